"""Checks of how a kernel moves its data: which copies bring tiles into shared memory, whether anything
reads global memory straight into the computation, how fragments reach the tensor cores, how wide the
stores are, and whether local memory is used.

How a global → shared copy shows in SASS:

- ``cp.async`` (CuTe ``SM80_CP_ASYNC_*``, DSL ``CopyG2SOp``, CUDA ``__pipeline_memcpy_async``): ``LDGSTS``,
  its width the last modifier (``.128`` = 16 bytes, ``.64``, 4 bytes without one);
- a TMA load: ``UTMALDG``;
- through the registers (``UniversalCopy``, ``*(uint4*)dst = *(uint4*)src``): a global load ``LDG`` whose
  value is stored to shared memory by an ``STS`` (found by following the value, :mod:`.values`).
"""
from __future__ import annotations

from .check import PLACE, Check, Finding, check_where, failed, no_main_loop, passed, signature
from .program import Program, Site
from .semantics import classify

_COMPUTE = ("mma.sync", "fma")
_BY = ("cp.async", "tma", "registers", "any")


def _staged_loads(program: Program, region: set[int] | None) -> tuple[list[Site], list[Site]]:
    """Global loads in ``region`` whose values are stored to shared memory, and those that feed computation."""
    staged, direct, _ = _global_load_uses(program, region)
    return staged, direct


def _global_load_uses(program: Program, region: set[int] | None) -> tuple[list[Site], list[Site], list[Site]]:
    """Global loads in ``region`` whose values are stored to shared memory, those that feed computation, and those
    stored straight back to global memory (a copy that skips shared memory)."""
    loads = [s for s in program.sites if classify(s.ins).kind == "load" and classify(s.ins).space in ("global", "generic")
             and (region is None or s.block in region)]
    if not loads:
        return [], [], []
    wanted = {(s.block, s.index) for s in loads}
    staged: set[tuple[int, int]] = set()
    direct: set[tuple[int, int]] = set()
    back: set[tuple[int, int]] = set()
    for s in program.sites:
        e = classify(s.ins)
        if e.kind == "store" and len(s.ins.operands) > 1:
            found = {(o.block, o.index) for o in program.origins(s, len(s.ins.operands) - 1)} & wanted
            if e.space == "shared":
                staged |= found
            elif e.space in ("global", "generic"):
                back |= found
        elif e.kind in _COMPUTE:
            for k in range(1, len(s.ins.operands)):
                direct |= {(o.block, o.index) for o in program.origins(s, k)} & wanted
    by_key = {(s.block, s.index): s for s in loads}
    return ([by_key[k] for k in sorted(staged)], [by_key[k] for k in sorted(direct)],
            [by_key[k] for k in sorted(back)])


def _describe_copies(program: Program, region: set[int] | None) -> str:
    """What the kernel does instead: its global → shared copies, in words."""
    parts = []
    widths = sorted({classify(s.ins).bytes for s in program.where("cp.async") if region is None or s.block in region})
    if widths:
        parts.append("cp.async of " + " and ".join(f"{w} bytes" for w in widths))
    if any(region is None or s.block in region for s in program.where("tma.load")):
        parts.append("TMA loads")
    staged, _ = _staged_loads(program, region)
    if staged:
        w = sorted({classify(s.ins).bytes for s in staged})
        parts.append("loads into registers then stores to shared memory (" + ", ".join(f"{x}-byte" for x in w) +
                     f" {staged[0].ins.opcode} ...)")
    return "; ".join(parts) if parts else "no copy from global to shared memory at all"


def copies(src: str = "global", dst: str = "shared", by: str = "any", bytes: int | None = None,
           where: str = "anywhere", only: bool = False) -> Check:
    """Tiles move from ``src`` to ``dst`` memory ``by`` cp.async, TMA, or the registers (a load then a store),
    ``bytes`` per thread and instruction; ``only``: every such copy in ``where`` does (none narrower or of
    another kind).

    Reads: LDGSTS (and its width), UTMALDG, or LDG values stored by STS; for shared → global, LDS values
    stored by STG, or UTMASTG. Cannot see: which tile a copy fetches, or whether a predicated copy runs.
    """
    if (src, dst) not in (("global", "shared"), ("shared", "global")):
        raise ValueError("copies(src, dst): from 'global' to 'shared', or from 'shared' to 'global'")
    if by not in _BY:
        raise ValueError(f"by= must be one of {', '.join(_BY)}")
    check_where(where)
    name = signature("copies", src=src, dst=dst, by=by, bytes=bytes, where=where if where != "anywhere" else None,
                     only=only or None)
    how = {"cp.async": "cp.async", "tma": "TMA", "registers": "loads and stores through the registers",
           "any": "copies"}[by]
    size = f"{bytes}-byte " if bytes else ""
    wanted = f"{size}{how} from {src} to {dst} memory"

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        region = p.region(where)
        if (src, dst) == ("shared", "global"):
            return _stores_out(p, name, region, where, by, bytes, only, wanted)
        cp = [s for s in p.where("cp.async", where)]
        tma = [s for s in p.where("tma.load", where)]
        staged, _ = _staged_loads(p, region)
        candidates = {"cp.async": cp, "tma": tma, "registers": staged, "any": cp + tma + staged}[by]
        good = [s for s in candidates if by == "tma" or not bytes or classify(s.ins).bytes == bytes]
        kinds = cp + tma + staged
        if not good:
            return failed(name, f"no {wanted} {PLACE[where]}: it has {_describe_copies(p, region)}.", kinds)
        if only:
            bad = [s for s in kinds if s not in good]
            if bad:
                e = classify(bad[0].ins)
                what = {"cp.async": f"a {e.bytes}-byte cp.async", "tma.load": "a TMA load"}.get(
                    e.kind, f"a {e.bytes}-byte load into registers that is then stored to shared memory")
                return failed(name, f"not every copy from {src} to {dst} memory {PLACE[where]} is a {wanted}: "
                                    f"{len(bad)} are not, e.g. {what} ({bad[0].ins.opcode}).", bad)
        return passed(name, f"{len(good)} {wanted} {PLACE[where]}.", good)

    return Check(name, f"tiles copied by {wanted}", run)


def _stores_out(p: Program, name: str, region: set[int] | None, where: str, by: str, bytes: int | None,
                only: bool, wanted: str) -> Finding:
    tma = [s for s in p.where("tma.store", where)]
    stg = [s for s in p.where("store", where) if classify(s.ins).space in ("global", "generic")]
    from_shared = [s for s in stg if _stores_shared_data(p, s)]
    candidates = {"tma": tma, "registers": from_shared, "cp.async": [], "any": tma + from_shared}[by]
    good = [s for s in candidates if by == "tma" or not bytes or classify(s.ins).bytes == bytes]
    if not good:
        shown = from_shared or stg
        widths = sorted({classify(s.ins).bytes for s in shown})
        seen = (f": its stores {'of data read from shared memory ' if from_shared else ''}to global memory move "
                f"{' and '.join(f'{w}-byte' for w in widths)} pieces ({shown[0].ins.opcode})" if shown else "")
        return failed(name, f"no {wanted} {PLACE[where]}{seen}.", stg)
    if only:
        bad = [s for s in tma + from_shared if s not in good]
        if bad:
            return failed(name, f"not every store of data from shared memory {PLACE[where]} is a {wanted}: e.g. "
                                f"{classify(bad[0].ins).bytes}-byte {bad[0].ins.opcode}.", bad)
    return passed(name, f"{len(good)} {wanted} {PLACE[where]}.", good)


def _access(kind: str, space: str, bytes: int | None, where: str, every: bool, count: int | None) -> Check:
    check_where(where)
    if count is not None and (not isinstance(count, int) or count < 0):
        raise ValueError("count= is a number of instructions, 0 or more")
    verb = "stores" if kind == "store" else "loads"
    name = signature(verb, space=space, bytes=bytes, where=where if where != "anywhere" else None, every=every or None,
                     count=count)
    size = f"{bytes}-byte " if bytes else ""
    wanted = f"{size}{verb} {'to' if kind == 'store' else 'from'} {space} memory"

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        spaces = (space, "generic") if space == "global" else (space,)
        found = [s for s in p.where(kind, where) if classify(s.ins).space in spaces]
        good = [s for s in found if not bytes or classify(s.ins).bytes == bytes]
        widths = sorted({classify(s.ins).bytes for s in found})
        seen = ", ".join(f"{w}-byte" for w in widths) or "none"
        if count is not None and len(good) != count:
            looped = [s for s in good if p.graph.loop_of(s.block) is not None]
            kept = (f" {len(looped)} of them {'sits' if len(looped) == 1 else 'sit'} in a loop the compiler kept (one "
                    "instruction for every trip): a loop over a thread's elements whose trip count is known at compile "
                    "time is unrolled into one instruction per element." if looped else "")
            opcodes = ", ".join(sorted({s.ins.opcode for s in good}))
            return failed(name, f"found {len(good)} {wanted} {PLACE[where]}{f' ({opcodes})' if opcodes else ''} where "
                                f"{count} are expected: a thread issues one instruction for each element (or vector) it "
                                f"{'stores' if kind == 'store' else 'loads'}.{kept}", good or found)
        if count == 0:
            return passed(name, f"no {wanted} {PLACE[where]}.")
        if not good:
            return failed(name, f"no {wanted} {PLACE[where]}: your kernel's {verb} there are {seen} "
                                f"({found[0].ins.opcode if found else 'none'}). "
                                + (f"Move {bytes} bytes per thread and instruction (a 128-bit vector)." if bytes == 16 else ""),
                          found)
        if every:
            bad = [s for s in found if s not in good]
            if bad:
                return failed(name, f"{len(bad)} of your {len(found)} {verb} {PLACE[where]} move "
                                    f"{classify(bad[0].ins).bytes} bytes ({bad[0].ins.opcode}), not {bytes}: "
                                    f"every one should be a {bytes}-byte vector.", bad)
        return passed(name, f"{len(good)} {wanted} {PLACE[where]}.", good)

    return Check(name, wanted, run)


def stores(space: str = "global", bytes: int | None = None, where: str = "anywhere", every: bool = False,
           count: int | None = None) -> Check:
    """Stores to ``space`` memory of ``bytes`` per thread exist in ``where`` (``every``: all of them are that wide;
    ``count``: exactly that many such instructions, e.g. one per element of a thread's partition, 0 for none).

    Reads: STG/ST/STS/STL and their width (``.128`` 16 bytes, ``.64`` 8, ``.U16`` 2, 4 without a width). A count is
    of instructions in the machine code: an unrolled loop has one per trip, a loop the compiler kept one in all.
    """
    return _access("store", space, bytes, where, every, count)


def loads(space: str = "global", bytes: int | None = None, where: str = "anywhere", every: bool = False,
          count: int | None = None) -> Check:
    """Loads from ``space`` memory of ``bytes`` per thread exist in ``where`` (``every``: all of them are that wide;
    ``count``: exactly that many such instructions, 0 for none).

    Reads: LDG/LD/LDS/LDL/LDC and their width (cp.async is a copy, not a load into registers: see ``copies``).
    """
    return _access("load", space, bytes, where, every, count)


def no_global_loads_outside_copies(where: str = "main_loop") -> Check:
    """Every global load in ``where`` only brings data into shared memory: no loaded value reaches an MMA or
    an FMA except through shared memory, and none is stored straight back to global memory (a copy kernel's
    data must pass through shared memory).

    Reads: each LDG's value, followed through moves and arithmetic to where it is used: an STS (a copy into
    shared memory), an HMMA/FFMA/HFMA2 operand (computation straight from global memory) or an STG (a
    global → global copy). Cannot see: what a value means (an index read from global memory would count as
    data).
    """
    check_where(where)
    name = signature("no_global_loads_outside_copies", where=where if where != "main_loop" else None)

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        _, direct, back = _global_load_uses(p, p.region(where))
        if direct:
            e = classify(direct[0].ins)
            return failed(name, f"{PLACE[where]} your kernel reads global memory straight into the computation: "
                                f"{len(direct)} global loads ({direct[0].ins.opcode}, {e.bytes} bytes) feed the "
                                "MMAs or FMAs directly. Copy each tile into shared memory first, then compute from "
                                "shared memory.", direct)
        if back:
            e = classify(back[0].ins)
            return failed(name, f"{PLACE[where]}, {len(back)} global loads ({back[0].ins.opcode}, {e.bytes} bytes) are "
                                "stored straight back to global memory: that data skips shared memory. Copy the tile "
                                "into shared memory first, then store it from there.", back)
        return passed(name, f"every global load {PLACE[where]} goes into shared memory.")

    return Check(name, "no computation or copy straight from global memory", run)


def no_local_memory(where: str = "main_loop") -> Check:
    """No local-memory traffic (``LDL``/``STL``: spilled registers, or a register array indexed at run time) in
    ``where``.

    Reads: LDL/STL instructions. In the CuTe DSL a loop over k-blocks written with ``cutlass.range`` instead of
    ``cutlass.range_constexpr`` indexes the fragment arrays at run time, which sends them to local memory.
    """
    check_where(where)
    name = signature("no_local_memory", where=where if where != "main_loop" else None)

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        local = [s for s in p.where(("load", "store"), where) if classify(s.ins).space == "local"]
        if local:
            return failed(name, f"{PLACE[where]} your kernel uses local memory ({len(local)} LDL/STL, e.g. "
                                f"{local[0].ins.opcode}): registers were spilled or an array is indexed at run time. "
                                "Index register fragments with values known at compile time (unrolled loops: "
                                "cutlass.range_constexpr in the DSL, #pragma unroll in C++).", local)
        return passed(name, f"no local memory {PLACE[where]}.")

    return Check(name, "no local memory", run)


#: Lanes of warp 0, as the coalescing check places them (threadIdx.x = lane; blockDim.x of 32 or more).
WARP = 32


def _address_operand(site: Site) -> int | None:
    e = classify(site.ins)
    if e.kind == "cp.async":
        return 1
    if e.kind == "load" and e.space in ("global", "generic"):
        return 1
    if e.kind == "store" and e.space in ("global", "generic"):
        return 0
    return None


def warp_sectors(p: Program, site: Site) -> tuple[int, int] | None:
    """``(sectors, ideal)``: the 32-byte sectors warp 0's 32 lanes touch with one global access, and the fewest the
    bytes they move could touch; None where the address cannot be followed to the thread index."""
    k = _address_operand(site)
    if k is None or k >= len(site.ins.operands):
        return None
    found = p.values.address(p.state_before(site), site.ins.operands[k])
    if found is None:
        return None
    width = max(1, classify(site.ins).bytes)
    addresses = []
    for lane in range(WARP):
        env = {"SR_TID.X": lane, "SR_TID.Y": 0, "SR_TID.Z": 0, "SR_LANEID": lane, "SR_CTAID.X": 0, "SR_CTAID.Y": 0,
               "SR_CTAID.Z": 0}
        value = p.values.evaluate(found[1], env)
        if value is None:
            return None
        addresses.append(value)
    if len(set(addresses)) == 1:
        return None                                   # no lane-dependent address: not a per-thread access
    sectors = len({(a + b) // 32 for a in addresses for b in range(0, width, min(width, 32))} |
                  {(a + width - 1) // 32 for a in addresses})
    return sectors, -(-WARP * width // 32)


def _copy_accesses(p: Program) -> set[tuple[int, int]]:
    """The global accesses that move data between global and shared memory: cp.async sources, global loads stored
    to shared memory, and global stores of values loaded from shared memory."""
    staged, _ = _staged_loads(p, None)
    out = {(s.block, s.index) for s in p.where("cp.async")} | {(s.block, s.index) for s in staged}
    out |= {(s.block, s.index) for s in p.where("store") if classify(s.ins).space in ("global", "generic")
            and _stores_shared_data(p, s)}
    return out


def _stores_shared_data(p: Program, store: Site) -> bool:
    """Whether a store's value was read from shared memory (a copy out of a shared tile)."""
    return any(classify(o.ins).kind in ("load", "ldmatrix") and classify(o.ins).space == "shared"
               for o in p.origins(store, len(store.ins.operands) - 1))


def coalesced(where: str = "anywhere", slack: float = 1.0, copies_only: bool = False) -> Check:
    """Each warp's global accesses (cp.async sources, loads, stores) touch no more 32-byte sectors than ``slack``
    times the fewest their bytes need: consecutive lanes read or write consecutive vectors. ``copies_only``: judge
    only the accesses that copy data between global and shared memory (cp.async sources, loads stored to shared
    memory, stores of values read from shared memory), not others such as a test's bookkeeping stores.

    Reads: the address of each LDGSTS/LDG/STG evaluated for the 32 lanes of a warp (threadIdx.x = lane, the
    kernel's parameters standing for one large row pitch). Cannot see: addresses computed by operations it
    does not evaluate (those accesses are skipped), blocks narrower than 32 threads in x.
    """
    check_where(where)
    name = signature("coalesced", where=where if where != "anywhere" else None, slack=slack if slack != 1.0 else None,
                     copies_only=copies_only or None)

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        region = p.region(where)
        judged = 0
        copying = _copy_accesses(p) if copies_only else None
        for s in p.sites:
            if region is not None and s.block not in region:
                continue
            if copying is not None and (s.block, s.index) not in copying:
                continue
            found = warp_sectors(p, s)
            if found is None:
                continue
            judged += 1
            sectors, ideal = found
            if sectors > ideal * slack:
                what = {"cp.async": "cp.async copies from", "load": "loads from", "store": "stores to"}[classify(s.ins).kind]
                return failed(name, f"a warp's {classify(s.ins).bytes}-byte {what} global memory {PLACE[where]} touch "
                                    f"{sectors} 32-byte sectors where {ideal} would hold their bytes ({s.ins.opcode}): "
                                    "consecutive lanes should move consecutive vectors along a row (number the "
                                    "threads along the contiguous dimension).", [s])
        if copying is not None and not copying:
            return failed(name, f"{PLACE[where]} nothing is copied between global and shared memory, so no copy's "
                                "coalescing could be judged.")
        if not judged:
            what = "copy between global and shared memory" if copies_only else "global access"
            return failed(name, f"could not follow the address of any {what} {PLACE[where]} to the thread index.")
        return passed(name, f"{judged} global accesses {PLACE[where]}, each warp touching whole sectors.")

    return Check(name, "coalesced global accesses", run)


_OPERAND = {"A": 1, "B": 2}


def fragments_by(source: str = "ldmatrix", operands: str = "AB", x: int | None = None, trans: bool | None = None,
                 where: str = "main_loop") -> Check:
    """The ``operands`` (A, B) of the warp MMAs in ``where`` are filled by ``source`` (``"ldmatrix"``, or
    ``"shared"`` for any shared-memory load); ``x``: ldmatrix's number of matrices (4 for .x4); ``trans``: the
    transposing form (True), the plain one (False), or either (None).

    Reads: HMMA's A and B registers, followed back to the instructions that loaded them (LDSM.16.M88.4 is
    ldmatrix.x4, LDSM.16.MT88.4 its .trans form, LDS a plain load). Cannot see: wgmma and tcgen05 MMAs,
    which read shared memory themselves.
    """
    if source not in ("ldmatrix", "shared"):
        raise ValueError("fragments_by(source): 'ldmatrix' or 'shared'")
    if not operands or set(operands) - {"A", "B"}:
        raise ValueError("operands= is 'A', 'B' or 'AB'")
    check_where(where)
    name = signature("fragments_by", source=source, operands=operands, x=x, trans=trans,
                     where=where if where != "main_loop" else None)
    form = f"ldmatrix{f'.x{x}' if x else ''}{'.trans' if trans else ''}" if source == "ldmatrix" else "shared-memory loads"

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        mmas = p.where("mma.sync", where)
        if not mmas:
            return failed(name, f"no warp MMA (mma.sync, SASS HMMA) {PLACE[where]} whose fragments could be checked.")
        for operand in operands:
            seen: dict[str, Site] = {}
            for m in mmas:
                for o in p.origins(m, _OPERAND[operand]):
                    seen.setdefault(_fragment_source(o), o)
            good = _good_sources(source, x, trans)
            bad = {k: v for k, v in seen.items() if k not in good}
            if not seen:
                return failed(name, f"the {operand} fragments of your MMAs {PLACE[where]} are not loaded from memory "
                                    f"where the check can follow them; load them with {form}.")
            if bad:
                what, site = next(iter(bad.items()))
                fix = (f"load them with ldmatrix (a copy made from the ldmatrix atom and the TiledMMA, "
                       f"make_tiled_copy_{operand})" if source == "ldmatrix" else
                       "stage the tile in shared memory first and load the fragments from there")
                return failed(name, f"the {operand} fragments of your MMAs {PLACE[where]} come from {what} "
                                    f"({site.ins.opcode}), not from {form}: {fix}.", [site])
        return passed(name, f"the {operands} fragments of every MMA {PLACE[where]} come from {form}.")

    return Check(name, f"MMA fragments {operands} loaded by {form}", run)


def _fragment_source(site: Site) -> str:
    e = classify(site.ins)
    if e.kind == "ldmatrix":
        return f"ldmatrix.{e.shape}{'.trans' if e.trans else ''}"
    if e.kind == "load":
        return {"shared": "plain shared-memory loads", "global": "global memory", "generic": "global memory",
                "local": "local memory"}.get(e.space, f"{e.space} memory")
    return site.ins.opcode


def _good_sources(source: str, x: int | None, trans: bool | None) -> set[str]:
    if source == "shared":
        return {f"ldmatrix.x{n}{t}" for n in (1, 2, 4) for t in ("", ".trans")} | {"plain shared-memory loads"}
    shapes = [x] if x else [1, 2, 4]
    forms = [""] if trans is False else [".trans"] if trans else ["", ".trans"]
    return {f"ldmatrix.x{n}{t}" for n in shapes for t in forms}


__all__ = ["WARP", "coalesced", "copies", "fragments_by", "loads", "no_global_loads_outside_copies", "no_local_memory", "stores", "warp_sectors"]
