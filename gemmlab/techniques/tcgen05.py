"""Checks of Blackwell's (sm_100a) tensor-core protocol, read from the SASS of the image:
the accumulate flag, one MMA per k-block, the commit issued once per warp, the MMA warp waiting on the
barrier the TMA of its k-tile lands on (with the round's parity) and releasing each slot with a commit,
and the tensor memory read out chunk by chunk.

What ptxas 13.0 writes for sm_100a (docs/TECHNIQUES.md has the table): ``tcgen05.mma`` is ``UTCHMMA
gdesc[A], gdesc[B], tmem[D], …, flag`` whose last operand is the accumulate flag (``!UPT``: overwrite,
``UPT``: accumulate, a predicate register: decided at run time); ``tcgen05.commit`` is ``UTCBAR [bar]``,
issued once per warp, unless every thread of the warp runs it: then ptxas wraps it in a loop that runs
it once per thread (``ELECT`` … ``BRA.U.ANY``); ``mbarrier.try_wait.parity`` is
``SYNCS.PHASECHK.TRANS64.TRYWAIT P, [bar], parity`` (a zero register for parity 0); ``tcgen05.ld`` is
``LDTM.x32 R, tmem[addr]``. The checks follow k-tiles through code the compiler unrolled (the course's
Blackwell kernels take the number of k-tiles as a compile-time constant); a K loop that runs at run time
keeps barrier and parity in registers, and they then say they cannot follow it.
"""
from __future__ import annotations

from .check import Check, Finding, failed, passed, signature
from .program import Program
from .trace import Event, Trace


def _tiles(trace: Trace) -> list[list[Event]]:
    """The tcgen05.mma events in program order, cut into k-tiles at each tcgen05.commit."""
    tiles: list[list[Event]] = [[]]
    for e in trace.of("tcgen05.mma", "tcgen05.commit"):
        if e.kind == "tcgen05.mma":
            tiles[-1].append(e)
        elif tiles[-1]:
            tiles.append([])
    return [t for t in tiles if t]


def accumulates_after_first() -> Check:
    """The first tcgen05.mma of the tile overwrites the accumulator (ACCUMULATE off: tensor memory is not
    zeroed) and every later one accumulates (on).

    Reads: the last operand of each UTCHMMA (``!UPT`` off, ``UPT`` on; a predicate register is decided at run
    time and counts as not set).
    """
    name = signature("accumulates_after_first")

    def run(p: Program) -> Finding:
        mmas = Trace(p).of("tcgen05.mma")
        if not mmas:
            return failed(name, "no tcgen05.mma in your kernel.")
        unknown = [e for e in mmas if e.args["acc"] == "?"]
        if unknown:
            return failed(name, "the accumulate flag of your tcgen05.mma is not set to a known value (it is left "
                                "to run time): set ACCUMULATE off before the tile's first MMA and on after it.",
                          [unknown[0].site])
        if mmas[0].args["acc"] != "off":
            return failed(name, "your first tcgen05.mma accumulates into tensor memory that holds garbage: turn "
                                "ACCUMULATE off for the tile's first MMA.", [mmas[0].site])
        late = [i for i, e in enumerate(mmas[1:], 1) if e.args["acc"] != "on"]
        if late:
            return failed(name, f"MMA number {late[0] + 1} of the tile overwrites the accumulator instead of adding "
                                "to it: ACCUMULATE goes on after the first MMA and stays on.", [mmas[late[0]].site])
        return passed(name, f"the first of {len(mmas)} tcgen05.mma overwrites, the others accumulate.")

    return Check(name, "ACCUMULATE off for the first MMA only", run)


def mma_per_k_block(per_tile: int) -> Check:
    """Each k-tile issues ``per_tile`` tcgen05.mma (one per k-block), each reading a different k-block: their A
    and B shared-memory descriptors differ.

    Reads: the UTCHMMA between two UTCBAR (a k-tile), and the values of their ``gdesc`` operands.
    """
    name = signature("mma_per_k_block", per_tile=per_tile)

    def run(p: Program) -> Finding:
        tiles = _tiles(Trace(p))
        if not tiles:
            return failed(name, "no tcgen05.mma in your kernel.")
        for t, tile in enumerate(tiles):
            if len(tile) != per_tile:
                return failed(name, f"k-tile {t} issues {len(tile)} tcgen05.mma; it has {per_tile} k-blocks, one MMA "
                                    "each.", [tile[0].site])
            for operand in ("A", "B"):
                seen = [e.args[operand] for e in tile]
                if len(set(seen)) != len(seen):
                    return failed(name, f"two tcgen05.mma of k-tile {t} read the same {operand} descriptor: each MMA "
                                        "must read its own k-block (index the k-block mode with the loop's kb).",
                                  [tile[0].site])
        return passed(name, f"{len(tiles)} k-tile(s) of {per_tile} MMAs, each on its own k-block.")

    return Check(name, f"{per_tile} tcgen05.mma per k-tile, one per k-block", run)


def commits_once_per_warp() -> Check:
    """Every tcgen05.commit is issued once per warp (inside ``elect_one``), so the mbarrier gets one arrival.

    Reads: whether a UTCBAR sits in the loop ptxas writes to run it once per thread (ELECT … BRA.U.ANY).
    """
    name = signature("commits_once_per_warp")

    def run(p: Program) -> Finding:
        commits = Trace(p).of("tcgen05.commit")
        if not commits:
            return failed(name, "no tcgen05.commit in your kernel: no barrier learns that the MMAs finished.")
        every = [e for e in commits if e.per_thread]
        if every:
            return failed(name, "a tcgen05.commit is issued by every thread of the warp (32 arrivals where the "
                                "barrier expects one): issue it from one elected thread.", [every[0].site])
        return passed(name, f"{len(commits)} tcgen05.commit, each issued once per warp.")

    return Check(name, "tcgen05.commit from one thread", run)


def ring_waits(stages: int) -> Check:
    """The MMA warp's ring: before the MMAs of k-tile ``t`` it waits on the barrier that the TMA loads of
    k-tile ``t`` arrive on (full[t % stages]) with parity ``(t // stages) % 2``; after them it commits to the
    barrier the producer waits on before refilling that slot (empty[t % stages]); the slots of the first
    ``stages`` k-tiles are read through different descriptors.

    Reads: the producer's expect-tx arrivals and the waits before them (which barrier each k-tile's TMA lands
    on, which barrier frees its slot), the MMA warp's last wait before each k-tile's first UTCHMMA, and the
    UTCBAR after it. Cannot see: a ring whose K loop runs at run time (barrier and parity in registers).
    """
    if stages < 1:
        raise ValueError("stages= is the number of slots, 1 or more")
    name = signature("ring_waits", stages=stages)

    def run(p: Program) -> Finding:
        trace = Trace(p)
        events = trace.events
        arms = [e for e in events if e.kind == "mbarrier.expect_tx"]
        tiles = _tiles(trace)
        if not tiles:
            return failed(name, "no tcgen05.mma in your kernel.")
        if len(arms) < len(tiles):
            return failed(name, f"found {len(arms)} TMA arrivals (expect-tx) for {len(tiles)} k-tiles of MMAs: the "
                                "check follows a ring written out k-tile by k-tile (a compile-time number of k-tiles).")
        full = [a.args.get("barrier") for a in arms]
        empty = []
        for a in arms:                                 # the producer's last wait before arming a slot
            before = [e for e in events if e.kind == "mbarrier.wait" and e.site.ins.address < a.site.ins.address]
            empty.append(before[-1].args.get("barrier") if before else None)
        if any(b == "?" or b is None for b in full):
            return failed(name, "cannot tell which barrier each TMA load arrives on.")
        for t, tile in enumerate(tiles):
            first = tile[0]
            waits = [e for e in events if e.kind == "mbarrier.wait" and e.site.ins.address < first.site.ins.address
                     and e.args.get("barrier") not in (None,)]
            if not waits:
                return failed(name, f"the MMAs of k-tile {t} wait on no barrier: wait until the TMA loads of the "
                                    "k-tile have landed.", [first.site])
            wait = waits[-1]
            want_parity = (t // stages) % 2
            if wait.args["barrier"] != full[t]:
                which = ("the barrier that frees a slot for the producer (an empty barrier): nobody arrives there "
                         "before the MMAs, so the warp waits for ever" if wait.args["barrier"] in empty else
                         f"the barrier of another slot (the one k-tile {full.index(wait.args['barrier'])} lands on)"
                         if wait.args["barrier"] in full else "a barrier no TMA load arrives on")
                return failed(name, f"before the MMAs of k-tile {t} your MMA warp waits on {which}: it must wait on "
                                    f"the barrier the TMA loads of k-tile {t} arrive on, full[{t % stages}].",
                              [wait.site])
            if wait.args.get("parity") != want_parity:
                return failed(name, f"k-tile {t} waits on its slot's barrier with parity {wait.args.get('parity')}: "
                                    f"that barrier's phase {t // stages} has parity {want_parity}.", [wait.site])
            commits = [e for e in events if e.kind == "tcgen05.commit" and e.site.ins.address > tile[-1].site.ins.address
                       and (t + 1 >= len(tiles) or e.site.ins.address < tiles[t + 1][0].site.ins.address)]
            release = empty[t + stages] if t + stages < len(empty) else None
            if not commits:
                return failed(name, f"after the MMAs of k-tile {t} no tcgen05.commit releases its slot.", [tile[-1].site])
            if release is not None and commits[0].args.get("barrier") != release:
                return failed(name, f"after the MMAs of k-tile {t} the commit goes to a barrier the producer does not "
                                    f"wait on before refilling slot {t % stages}: commit to that slot's empty barrier.",
                              [commits[0].site])
        last = tiles[-1][-1].site.ins.address
        after = [e for e in events if e.site.ins.address > last]
        epilogue = next((e for e in after if e.kind == "mbarrier.wait"), None)      # the first wait after the MMAs
        committed = {e.args.get("barrier") for e in after if e.kind == "tcgen05.commit"
                     and (epilogue is None or e.site.ins.address < epilogue.site.ins.address)}
        if epilogue is None or epilogue.args.get("barrier") not in committed or epilogue.args.get("barrier") in empty:
            return failed(name, "after the last k-tile no tcgen05.commit arrives on a barrier the epilogue waits on: "
                                "commit once more (on the accumulator's barrier) so the epilogue learns that every MMA "
                                "has finished.", [tiles[-1][-1].site])
        early = [e for e in events if e.kind == "tcgen05.commit" and e.site.ins.address < last
                 and e.args.get("barrier") == epilogue.args["barrier"]]
        if early:
            t = next(i for i, tile in enumerate(tiles) if tile[-1].site.ins.address > early[0].site.ins.address) - 1
            return failed(name, f"after the MMAs of k-tile {max(t, 0)} your MMA warp already commits to the barrier the "
                                "epilogue waits on: the epilogue would read the accumulator while later MMAs still add "
                                "to it. Commit to the accumulator's barrier once, after the last k-tile.",
                          [early[0].site])
        firsts = [tile[0].args["A"] for tile in tiles[:stages]]
        if len(set(firsts)) != len(firsts):
            return failed(name, f"two of the first {stages} k-tiles read the same shared-memory descriptors though "
                                "they sit in different slots: index the slot mode with t % stages.")
        return passed(name, f"{len(tiles)} k-tiles through {stages} slots: each waits on its full barrier with the "
                            "round's parity and commits its slot free.")

    return Check(name, f"the TMA → MMA ring of {stages} slots", run)


def tmem_read_out(chunks: int | None = None) -> Check:
    """The accumulator is read out of tensor memory chunk by chunk: ``chunks`` tcgen05.ld (if given) at
    different TMEM addresses, each waited for (``tcgen05.wait::ld``) before its registers are used.

    Reads: LDTM and its ``tmem[...]`` address; for the wait, the NOP ptxas 13.0 leaves for
    ``tcgen05.wait::ld`` between the load and the first use of its registers. ptxas makes that use wait for
    the load's registers either way, so converting before the wait compiles to the same machine code as
    after it: no check of the image can tell those apart (and the image then has no such race).
    """
    name = signature("tmem_read_out", chunks=chunks)

    def run(p: Program) -> Finding:
        trace = Trace(p)
        loads = trace.of("tcgen05.ld")
        if not loads:
            return failed(name, "no tcgen05.ld in your kernel: the accumulator is never read out of tensor memory.")
        if chunks is not None and len(loads) != chunks:
            return failed(name, f"{len(loads)} tcgen05.ld where the accumulator row has {chunks} chunks: read every "
                                "chunk once.", [loads[0].site])
        addresses = [e.args.get("tmem") for e in loads]
        if len(set(addresses)) != len(addresses):
            return failed(name, "two tcgen05.ld read the same tensor-memory columns: each chunk i of the accumulator "
                                "must be read from its own columns.", [loads[0].site])
        for e in loads:
            if not _waited(p, e):
                return failed(name, "a tcgen05.ld's registers are used with no tcgen05.wait::ld after it: the load is "
                                    "asynchronous; wait for it (cute.arch.fence_view_async_tmem_load()) before using "
                                    "the values.", [e.site])
        return passed(name, f"{len(loads)} tcgen05.ld of distinct chunks, each waited for.")

    return Check(name, "TMEM read out chunk by chunk, each load waited for", run)


def _waited(p: Program, event: Event) -> bool:
    """A NOP (what tcgen05.wait::ld becomes) between the load and the first instruction that reads its
    destination registers, in the load's block."""
    from .values import destinations, register_name

    block = p.graph.blocks[event.site.block]
    written = set(destinations(event.site.ins))
    for ins in block.instructions[event.site.index + 1:]:
        if ins.base == "NOP":
            return True
        if any(register_name(o) in written for o in ins.operands):
            return False
    return False


def tmem_allocated(columns: int) -> Check:
    """Tensor memory is allocated once with at least ``columns`` columns, the permit relinquished, and
    the columns freed before the CTA ends.

    Reads: UTCATOMSWS.FIND_AND_SET (tcgen05.alloc; its operand is the count in units of 32 columns),
    UVIRTCOUNT.DEALLOC (tcgen05.relinquish_alloc_permit) and UTCATOMSWS.AND (tcgen05.dealloc).
    """
    name = signature("tmem_allocated", columns=columns)

    def run(p: Program) -> Finding:
        trace = Trace(p)
        allocs = trace.of("tcgen05.alloc")
        if not allocs:
            return failed(name, "no tcgen05.alloc: the accumulator has no tensor memory.")
        got = allocs[0].args.get("columns")
        if got == "?" or (isinstance(got, int) and got < columns):
            return failed(name, f"tcgen05.alloc of {got} columns: the accumulator needs {columns}.", [allocs[0].site])
        relinquish = trace.of("tcgen05.relinquish")
        dealloc = trace.of("tcgen05.dealloc")
        if not dealloc:
            return failed(name, "the tensor-memory columns are never freed (no tcgen05.dealloc): every allocated "
                                "column must be freed before the CTA exits.")
        freed = dealloc[0].args.get("columns")
        if isinstance(freed, int) and isinstance(got, int) and freed != got:
            return failed(name, f"tcgen05.dealloc frees {freed} columns where tcgen05.alloc took {got}: free exactly "
                                "the columns you allocated.", [dealloc[0].site])
        if not relinquish or relinquish[0].site.ins.address > dealloc[0].site.ins.address:
            return failed(name, "tcgen05.relinquish_alloc_permit must come before the deallocation.")
        return passed(name, f"{got} TMEM columns allocated, the permit relinquished, the columns freed.")

    return Check(name, "tensor memory allocated, relinquished and freed", run)


__all__ = ["accumulates_after_first", "commits_once_per_warp", "mma_per_k_block", "ring_waits", "tmem_allocated",
           "tmem_read_out"]
