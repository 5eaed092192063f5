"""Checks of the asynchronous pipeline: commits, waits, copies in flight while the MMAs run, and the
release of a shared-memory slot only after the wgmmas that read it.

What they read is :mod:`.groups`' bookkeeping of the groups that may be pending at each instruction
(``LDGSTS`` issues, ``LDGDEPBAR`` commits, ``DEPBAR.LE SB0, N`` waits; ``HGMMA`` … ``gsb0`` commits a
wgmma group, ``WARPGROUP.DEPBAR.LE gsb0, N`` waits). Counts are of groups that hold data: an empty
group (a commit with no copy since the last one) counts for ``wait_group N`` but brings nothing, so a
wait that looks like ``wait_group 1`` after an extra empty commit is a wait for everything.
"""
from __future__ import annotations

from .check import PLACE, Check, Finding, check_where, failed, no_main_loop, passed, signature
from .cfg import Loop
from .program import Program, Site
from .semantics import TENSOR_CORE, classify

_READS_SHARED = ("ldmatrix",)


def _reads_shared(site: Site) -> bool:
    e = classify(site.ins)
    return e.kind in _READS_SHARED or (e.kind == "load" and e.space == "shared") or e.kind in ("wgmma", "tcgen05.mma")


def _per_trip(p: Program, loop: Loop, kind: str) -> set[int]:
    """How many instructions of ``kind`` one trip round ``loop`` runs: the counts (capped at 8) over every path
    from its header back to it (loops inside it are gone round once; a predicated one may be skipped)."""
    g = p.graph
    back = set(g.back_edges)
    out: dict[int, set[int]] = {}
    for b in (b for b in g.order if b in loop.body):          # reverse postorder: forward predecessors first
        if b == loop.header:
            incoming = {0}
        else:
            incoming = set().union(*[out.get(q, set()) for q in g.blocks[b].predecessors
                                     if q in loop.body and (q, b) not in back])
        counts = set(incoming)
        instructions = g.blocks[b].instructions
        for i, ins in enumerate(instructions):
            if classify(ins).kind == kind and not (kind == "cp.async.commit" and _wait_all(instructions, i)):
                counts = {min(8, c + 1) for c in counts} | (counts if ins.conditional else set())
        out[b] = counts
    return set().union(*[out.get(u, set()) for u, _h in loop.back_edges])


def _wait_all(instructions: list, i: int) -> bool:
    """Whether the commit at ``i`` is the first half of ``cp.async.wait_all`` (CuTe's ``cp_async_wait<0>``): it
    closes an empty group (a commit came before it with no copy between) and a wait for every group follows."""
    before = next((classify(x).kind for x in reversed(instructions[:i])
                   if classify(x).kind in ("cp.async", "cp.async.commit", "async.wait")), None)
    after = next((x for x in instructions[i + 1:] if classify(x).kind in ("cp.async", "cp.async.commit", "async.wait")),
                 None)
    return before == "cp.async.commit" and after is not None and classify(after).kind == "async.wait" and \
        classify(after).count == 0


def commits_per_stage(where: str = "main_loop") -> Check:
    """Every trip round the main loop commits the same number of groups of copies, one per k-tile (also when no
    tile is left to load): ``wait_group N`` counts groups, so a trip without its commit makes it wait for the
    wrong tile. A loop the compiler unrolled holds several k-tiles a trip: as many commits as waits.

    Reads: LDGDEPBAR and DEPBAR.LE SB0 on every path from the loop's header back to it.
    """
    if where != "main_loop":
        raise ValueError("commits_per_stage speaks of the main loop only")
    name = signature("commits_per_stage")

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        for loop in p.main_loops:
            commits = _per_trip(p, loop, "cp.async.commit")
            waits = _per_trip(p, loop, "async.wait")
            if 0 in commits or len(commits) > 1:
                return failed(name, "some trips round your main loop commit no group of copies, or fewer than others "
                                    "(the commit is inside an `if`, or missing): wait_group N counts committed groups, "
                                    "so commit once in every iteration, even when no tile is left to load.")
            if len(waits) == 1 and min(waits) >= 1 and commits != waits:
                return failed(name, f"each trip round your main loop commits {min(commits)} groups of copies but "
                                    f"waits {min(waits)} time(s): commit one group per k-tile, or wait_group N no "
                                    "longer counts k-tiles.")
        return passed(name, "every trip round the main loop commits one group per k-tile.")

    return Check(name, "one cp.async group committed per k-tile", run)


def _effective_waits(p: Program, sites: list[Site]) -> list[Site]:
    """The waits that are not followed by another wait before shared memory is read (a wait right before a
    stricter one does nothing)."""
    out = []
    for s in sites:
        block = p.graph.blocks[s.block]
        superseded = False
        for ins in block.instructions[s.index + 1:]:
            e = classify(ins)
            if e.kind == "async.wait" and not ins.conditional:
                superseded = True
                break
            if _reads_shared(Site(s.block, 0, ins)):
                break
        if not superseded:
            out.append(s)
    return out


def waits_in_main_loop(pending: int) -> Check:
    """The main loop waits for its copies with exactly ``pending`` groups of data left in flight (a ring of
    STAGES slots: ``pending = STAGES - 2``): waiting for more stalls the pipeline, waiting for less reads a
    slot before its copies have landed.

    Reads: DEPBAR.LE SB0 (cp.async.wait_group) in each main loop, and the groups that may still be pending
    after it, counting only groups that hold copies.
    """
    if pending < 0:
        raise ValueError("pending= is a number of groups, 0 or more")
    name = signature("waits_in_main_loop", pending=pending)

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, "main_loop")
        if early:
            return early
        groups = p.cp_async_groups
        for loop in p.main_loops:
            waits = [Site(b, i, ins) for b, i, ins, _ in groups.each(lambda i: classify(i).kind == "async.wait", set(loop.body))]
            if not waits:
                return failed(name, "your main loop never waits for its copies (no cp.async.wait_group inside it): the "
                                    "MMAs may read a slot before its tile has landed.")
            for w in _effective_waits(p, waits):
                after = groups.after(w.block, w.index)
                most = max((s.committed_data for s in after), default=0)
                asked = classify(w.ins).count
                if most > pending:
                    return failed(name, f"your main loop's wait (cp.async.wait_group {asked}) leaves up to {most} "
                                        f"groups of copies pending where {pending} may be: the tile the next MMAs "
                                        "read may not have landed yet.", [w])
                if most < pending:
                    empty = any(len(s.pending) > s.committed_data for s in after)
                    why = (" An extra commit with no copy makes an empty group that the wait counts: it then waits "
                           "for every group that holds data." if empty and asked and asked >= pending else "")
                    if most == 0:
                        msg = (f"your main loop waits for every copy issued so far (cp.async.wait_group {asked} inside "
                               "the loop leaves no group of copies pending): the k-tiles the next iterations need are "
                               f"not kept in flight, so this is not yet a pipeline; the wait should leave {pending} "
                               "group(s) pending.")
                    else:
                        msg = (f"your main loop's wait (cp.async.wait_group {asked}) leaves only {most} group(s) of "
                               f"copies pending where {pending} could stay in flight: it stalls on copies the "
                               "pipeline wants in flight.")
                    return failed(name, msg + why, [w])
        return passed(name, f"the main loop's waits leave {pending} group(s) of copies in flight.")

    return Check(name, f"cp.async.wait_group leaving {pending} group(s) pending in the main loop", run)


def pipelined(in_flight: int) -> Check:
    """Copies of later k-tiles are in flight while the main loop's MMAs run: at the MMAs, up to ``in_flight``
    groups of cp.async copies may still be on their way (a ring of STAGES slots: ``STAGES - 1``).

    Reads: the cp.async groups (with data) that may be pending at each tensor-core instruction of the main
    loops, the largest count over every path. Cannot see: which tiles those copies fetch.
    """
    if in_flight < 1:
        raise ValueError("in_flight= is the number of k-tiles in flight during the MMAs, 1 or more")
    name = signature("pipelined", in_flight=in_flight)

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, "main_loop")
        if early:
            return early
        groups = p.cp_async_groups
        for loop in p.main_loops:
            at = groups.each_steady(loop, lambda i: classify(i).kind in TENSOR_CORE)
            most = max((s.in_flight for _, _, _, states in at for s in states), default=0)
            if most == 0:
                waits = [ins for b in loop.body for ins in p.graph.blocks[b].instructions if classify(ins).kind == "async.wait"]
                detail = f" (cp.async.wait_group {classify(waits[0]).count} inside the loop)" if waits else ""
                return failed(name, f"your main loop waits for every copy before it computes{detail}: no copy is in "
                                    "flight during the MMAs, so this is not yet a pipeline. Issue the copies of later "
                                    "k-tiles before the MMAs of this one and wait only for the tile you need.")
            if most < in_flight:
                return failed(name, f"while your main loop's MMAs run, at most {most} k-tile(s) of copies are in "
                                    f"flight, where the ring keeps {in_flight}: the loop waits for tiles it does "
                                    "not need yet (check the wait_group count and where the next tiles are issued).")
        return passed(name, f"up to {in_flight} k-tiles of copies are in flight while the MMAs run.")

    return Check(name, f"{in_flight} k-tile(s) of copies in flight during the MMAs", run)


def copies_land_before_reads(pending: int = 0, where: str = "anywhere") -> Check:
    """Every read of shared memory in ``where`` happens after a wait and a barrier that leave at most
    ``pending`` groups of copies in flight, and no copy is left outside a committed group.

    Reads: the cp.async groups pending at each LDS/LDSM (and wgmma) and whether a BAR.SYNC came after the
    last wait. Cannot see: which part of shared memory a read touches (a pipeline reads one slot while
    copies fill others; use waits_in_main_loop there).
    """
    check_where(where)
    name = signature("copies_land_before_reads", pending=pending, where=where if where != "anywhere" else None)

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        groups = p.cp_async_groups
        if not p.where("cp.async"):
            return failed(name, "your kernel issues no cp.async copy whose arrival could be waited for.")
        region = p.region(where)
        reads = groups.each(lambda i: _reads_shared(Site(0, 0, i)), region)
        for b, i, ins, states in reads:
            relevant = [s for s in states if s.pending or s.open or not s.synced]
            if not relevant:
                continue
            site = Site(b, i, ins)
            if any(s.open for s in states):
                return failed(name, "your copies are not closed into a group before the wait (no cp.async.commit_group "
                                    "between the copies and cp.async.wait_group): a wait covers committed groups only, "
                                    "so shared memory is read while the copies may still be on their way.", [site])
            most = max(s.committed_data for s in states)
            if most > pending and not p.where("async.wait"):
                return failed(name, "your kernel never waits for its copies (no cp.async.wait_group): shared memory is "
                                    f"read while up to {most} group(s) of copies may still be in flight.", [site])
            if most > pending:
                return failed(name, f"shared memory is read while up to {most} group(s) of copies may still be in "
                                    f"flight: the wait before the read leaves too many pending (cp.async.wait_group N "
                                    "waits for all but the newest N groups).", [site])
            if any(not s.synced for s in states):
                return failed(name, "shared memory is read after the wait but with no barrier (__syncthreads) between "
                                    "them: a wait covers only the calling thread's copies, the barrier makes every "
                                    "thread's copies visible.", [site])
        if not reads:
            return failed(name, f"no read of shared memory {PLACE[where]}.")
        return passed(name, "every read of shared memory comes after its copies have landed, and after a barrier.")

    return Check(name, "copies waited for (commit, wait, barrier) before shared memory is read", run)


def _writes_shared(site: Site) -> bool:
    """A write into shared memory: a cp.async (or TMA) copy, or a store (a staged copy, a zero fill)."""
    e = classify(site.ins)
    return e.kind in ("cp.async", "tma.load") or (e.kind == "store" and e.space == "shared")


def _read_since_barrier(p: Program) -> dict[int, bool]:
    """Per block: whether shared memory may have been read since the last CTA barrier when the block starts (a
    may-analysis over every path, round the loops too; a predicated barrier may not run)."""
    g = p.graph
    entry: dict[int, bool] = {b: False for b in g.order}
    exit_: dict[int, bool] = {}
    work = list(g.order)
    while work:
        b = work.pop(0)
        state = any(exit_.get(q, False) for q in g.blocks[b].predecessors)
        entry[b] = state
        for i, ins in enumerate(g.blocks[b].instructions):
            if ins.never_runs:
                continue
            e = classify(ins)
            if e.kind == "barrier" and not ins.conditional:
                state = False
            elif _reads_shared(Site(b, i, ins)):
                state = True
        if exit_.get(b) != state:
            exit_[b] = state
            work += [q for q in g.blocks[b].successors if q not in work]
    return entry


def refills_after_barrier() -> Check:
    """In the main loop, shared memory is written (the next k-tile's copies) only after a barrier that follows
    every read of it: a warp that copies the next tile while another still reads the current one overwrites
    that tile under it. For kernels with one buffer (notebook 05's); a ring refills a slot that nobody reads
    while others are read, which this check cannot tell apart (use waits_in_main_loop and pipelined there).

    Reads: LDSM/LDS (reads of shared memory), BAR.SYNC, and LDGSTS/STS (writes) on every path round the main
    loop. Cannot see: which part of shared memory an instruction touches.
    """
    name = signature("refills_after_barrier")

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, "main_loop")
        if early:
            return early
        inside = p.region("main_loop") or set()
        if not any(_reads_shared(s) for s in p.sites if s.block in inside):
            return failed(name, "your main loop reads no shared memory: the MMAs' fragments should come from the "
                                "tiles the loop copies there.")
        entry = _read_since_barrier(p)
        for b in (b for b in p.graph.order if b in inside):
            state = entry[b]
            for i, ins in enumerate(p.graph.blocks[b].instructions):
                if ins.never_runs:
                    continue
                site = Site(b, i, ins)
                e = classify(ins)
                if e.kind == "barrier" and not ins.conditional:
                    state = False
                elif _reads_shared(site):
                    state = True
                elif state and _writes_shared(site):
                    return failed(name, "your main loop writes the next tile into shared memory while other warps may "
                                        f"still be reading the current one ({ins.opcode} with no barrier since the "
                                        "last read of shared memory): a fast warp overwrites the tile a slow warp is "
                                        "multiplying. Put __syncthreads() (DSL cute.arch.sync_threads()) after the "
                                        "MMAs and before the next tile's copies.", [site])
        return passed(name, "every copy into shared memory in the main loop comes after a barrier that follows the "
                            "reads of the tile before it.")

    return Check(name, "a barrier between the last read of a tile and the copies that overwrite it", run)


def releases_after_wgmma_wait(in_flight: int = 1, overlap: bool = False) -> Check:
    """In the main loop, a slot is released (an mbarrier arrival) only when at most ``in_flight`` groups of
    wgmmas may still run: after ``wgmma.wait_group(1)`` the previous k-tile's wgmmas, which read the slot
    being released, have finished. ``overlap``: and the current group is still allowed to run then (a release
    after ``wait_group(0)`` is correct but makes the tensor cores idle while the next wait runs).

    Reads: the wgmma groups (HGMMA … gsb0) pending at each plain mbarrier arrive (SYNCS.ARRIVE …ART0) in the
    main loops, after the WARPGROUP.DEPBAR waits.
    """
    name = signature("releases_after_wgmma_wait", in_flight=in_flight, overlap=overlap or None)

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, "main_loop")
        if early:
            return early
        groups = p.wgmma_groups
        inside = p.region("main_loop")
        arrives = groups.each(lambda i: classify(i).kind == "mbarrier.arrive", inside)
        if not arrives:
            return failed(name, "your main loop releases no slot (no mbarrier arrive on an empty barrier).")
        for b, i, ins, states in arrives:
            most = max((s.in_flight for s in states), default=0)
            if most > in_flight:
                return failed(name, f"your main loop releases a slot while up to {most} groups of wgmmas may still "
                                    "read shared memory: wgmma is asynchronous, so wait (warpgroup.wait_group) until "
                                    "the wgmmas that read the slot have finished before releasing it.", [Site(b, i, ins)])
            if overlap and most < in_flight:
                return failed(name, "your main loop releases a slot only after every wgmma has finished "
                                    f"(warpgroup.wait_group(0)): keep {in_flight} group running while the slot of the "
                                    "previous k-tile is released, so the tensor cores stay busy.", [Site(b, i, ins)])
        return passed(name, f"slots are released with at most {in_flight} wgmma group(s) running.")

    return Check(name, "a slot released only after the wgmmas that read it", run)


def arrives_once_per_warp(where: str = "main_loop") -> Check:
    """Every plain mbarrier arrive in ``where`` is issued by one thread of its warp (inside ``elect_one``), so a
    barrier that counts one arrival per warp gets one from each warp, not 32.

    Reads: the guard predicate of each SYNCS.ARRIVE…ART0, followed back to the ELECT that set it, or evaluated for
    the 32 lanes of a warp (``lane == 0``). Cannot see: which warps arrive.
    """
    check_where(where)
    name = signature("arrives_once_per_warp", where=where if where != "main_loop" else None)

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        arrives = p.where("mbarrier.arrive", where)
        if not arrives:
            return failed(name, f"no mbarrier arrive {PLACE[where]}: no slot is ever released.")
        for s in arrives:
            if not _one_lane(p, s):
                return failed(name, f"{PLACE[where]} an mbarrier arrive is issued by more than one thread of a warp "
                                    "(by all 32 unless one thread is chosen) where the barrier counts one arrival per "
                                    "warp: its phase completes too early and the slot is refilled while it is still "
                                    "read. Arrive from one elected thread.", [s])
        return passed(name, f"{len(arrives)} mbarrier arrive(s) {PLACE[where]}, each from one thread of its warp.")

    return Check(name, "an mbarrier arrival once per warp", run)


def _one_lane(p: Program, site: Site) -> bool:
    """Whether ``site`` runs in one lane of a warp: its guard predicate comes from an ELECT, or from an ISETP that is
    true for exactly one of lanes 0..31 (``lane == 0``, ``tid % 32 == k``)."""
    guard = site.ins.predicate.lstrip("@")
    if not guard or guard in ("PT", "UPT"):
        return False
    v = p.values
    vid = v.read(p.state_before(site), guard.lstrip("!"))
    sources = [p.site(b, i) for b, i in v.results_of(vid)]
    if any(s.ins.base == "ELECT" for s in sources):
        return True
    if len(sources) != 1 or sources[0].ins.base != "ISETP":
        return False
    lanes = [_compare(p, sources[0], lane) for lane in range(32)]
    if any(x is None for x in lanes):
        return False
    return sum(x != guard.startswith("!") for x in lanes) == 1


#: ISETP's comparisons.
_COMPARE = {"EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "LT": lambda a, b: a < b,
            "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b}


def _compare(p: Program, site: Site, lane: int) -> bool | None:
    """The predicate ``ISETP.<cmp>[.U32].AND P, PT, a, b, PT`` writes, in lane ``lane`` of warp 0 (None: another form)."""
    ins = site.ins
    cmp = next((m for m in ins.modifiers if m in _COMPARE), None)
    if cmp is None or "AND" not in ins.modifiers or len(ins.operands) < 5 or ins.operands[1] != "PT" \
            or ins.operands[4] != "PT":
        return None
    state = p.state_before(site)
    env = {"SR_TID.X": lane, "SR_TID.Y": 0, "SR_TID.Z": 0, "SR_LANEID": lane}
    a, b = (p.values.evaluate(p.values.read(state, o), env) for o in ins.operands[2:4])
    if a is None or b is None:
        return None
    if "U32" not in ins.modifiers:
        a, b = (x - (1 << 32) if x >= 1 << 31 else x for x in (a, b))
    return _COMPARE[cmp](a, b)


__all__ = ["arrives_once_per_warp", "commits_per_stage", "copies_land_before_reads", "pipelined", "refills_after_barrier",
           "releases_after_wgmma_wait", "waits_in_main_loop"]
