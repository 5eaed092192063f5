"""What each SASS instruction does, in the course's words: a copy into shared memory, a commit, a wait, an MMA...

Why: the checks speak of techniques (``cp.async`` of 16 bytes, ``ldmatrix.x4``, ``wgmma``, a TMA load, an
mbarrier wait with a parity); the machine code speaks in SASS opcodes (``LDGSTS.E.BYPASS.128``,
``LDSM.16.M88.4``, ``HGMMA.64x128x16.F32``, ``UTMALDG.2D``, ``SYNCS.PHASECHK.TRANS64.TRYWAIT``). This
module is the one dictionary between them, as seen in the SASS that ptxas 13.0 writes for sm_80,
sm_90a and sm_100a (the PTX each comes from is in docs/TECHNIQUES.md).

:func:`classify` returns an :class:`Effect`: its ``kind`` (one of :data:`KINDS`) and what the checks
need to know about it (bytes moved, the memory it reads or writes, the MMA's shape, a wait's count).
An instruction that never runs (``@!PT``) has kind ``"none"``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from .listing import Instruction

#: The kinds of instruction the checks talk about, with the PTX (or CUDA) they come from.
KINDS = {
    "cp.async": "a copy from global to shared memory that skips the registers (PTX cp.async; SASS LDGSTS)",
    "cp.async.commit": "the end of a group of cp.async copies (cp.async.commit_group; SASS LDGDEPBAR)",
    "bulk.commit": "the end of a group of bulk (TMA) stores (cp.async.bulk.commit_group; SASS UTMACMDFLUSH)",
    "async.wait": "a wait until at most N groups of copies are pending (cp.async.wait_group N, "
                  "cp.async.bulk.wait_group N; SASS DEPBAR.LE SB0, N)",
    "tma.load": "a TMA copy of a tile from global to shared memory (cp.async.bulk.tensor; SASS UTMALDG)",
    "tma.store": "a TMA copy of a tile from shared to global memory (SASS UTMASTG)",
    "bulk.copy": "a bulk copy that is not a tensor copy (cp.async.bulk; SASS UBLKCP)",
    "ldmatrix": "a warp load of 8x8 matrices from shared memory into MMA fragments (ldmatrix; SASS LDSM)",
    "stmatrix": "a warp store of 8x8 matrices to shared memory (stmatrix; SASS STSM)",
    "mma.sync": "a warp-level tensor-core MMA (mma.sync, WMMA; SASS HMMA/IMMA/DMMA)",
    "wgmma": "a warpgroup tensor-core MMA (wgmma.mma_async; SASS HGMMA)",
    "wgmma.fence": "the fence before wgmmas (wgmma.fence; SASS WARPGROUP.ARRIVE)",
    "wgmma.wait": "a wait until at most N wgmma groups run (wgmma.wait_group N; SASS WARPGROUP.DEPBAR.LE gsb0, N)",
    "tcgen05.mma": "a Blackwell tensor-core MMA issued by one thread (tcgen05.mma; SASS UTCHMMA)",
    "tcgen05.commit": "an mbarrier arrival when the issued tcgen05 operations finish (tcgen05.commit; SASS UTCBAR)",
    "tcgen05.ld": "a load from tensor memory into registers (tcgen05.ld; SASS LDTM)",
    "tcgen05.st": "a store from registers into tensor memory (tcgen05.st; SASS STTM)",
    "tcgen05.alloc": "an allocation of tensor-memory columns (tcgen05.alloc; SASS UTCATOMSWS.FIND_AND_SET)",
    "tcgen05.dealloc": "a release of tensor-memory columns (tcgen05.dealloc; SASS UTCATOMSWS.AND)",
    "tcgen05.relinquish": "the promise to allocate no more tensor memory (tcgen05.relinquish_alloc_permit; "
                          "SASS UVIRTCOUNT.DEALLOC)",
    "mbarrier.init": "an mbarrier's initialisation (mbarrier.init; SASS SYNCS.EXCH.64)",
    "mbarrier.wait": "a wait for an mbarrier phase of a given parity (mbarrier.try_wait.parity; "
                     "SASS SYNCS.PHASECHK.TRANS64.TRYWAIT)",
    "mbarrier.arrive": "an arrival on an mbarrier (mbarrier.arrive; SASS SYNCS.ARRIVE.*.ART0)",
    "mbarrier.expect_tx": "an arrival that also expects a number of bytes (mbarrier.arrive.expect_tx; "
                          "SASS SYNCS.ARRIVE.TRANS64)",
    "barrier": "a CTA barrier that waits for the other threads (__syncthreads, bar.sync; SASS BAR.SYNC, BAR.RED)",
    "fence": "a memory or proxy fence (fence.proxy.async, membar; SASS FENCE, MEMBAR)",
    "elect": "one lane of the warp chosen to act (elect.sync; SASS ELECT)",
    "load": "a load from memory into registers (ld; SASS LDG, LD, LDS, LDL, LDC)",
    "store": "a store from registers to memory (st; SASS STG, ST, STS, STL)",
    "atomic": "an atomic or reduction (atom, red; SASS ATOM, ATOMS, ATOMG, RED)",
    "setmaxnreg": "a change of the warpgroup's register budget (setmaxnreg; SASS USETMAXREG)",
    "fma": "a scalar or paired floating-point multiply-add on the CUDA cores (fma; SASS FFMA, HFMA2, DFMA)",
    "nop": "no operation (a NOP; tcgen05.wait::ld leaves one behind the load it waits for)",
    "other": "anything else",
    "none": "an instruction whose predicate is never true (it never runs)",
}

#: Short plural names of the kinds, for messages ("4 TMA stores").
NOUNS = {"cp.async": "cp.async copies", "cp.async.commit": "cp.async commits", "bulk.commit": "bulk-store commits",
         "async.wait": "cp.async waits", "tma.load": "TMA loads", "tma.store": "TMA stores", "bulk.copy": "bulk copies",
         "ldmatrix": "ldmatrix loads", "stmatrix": "stmatrix stores", "mma.sync": "mma.sync instructions",
         "wgmma": "wgmma instructions", "wgmma.fence": "wgmma fences", "wgmma.wait": "wgmma waits",
         "tcgen05.mma": "tcgen05.mma instructions", "tcgen05.commit": "tcgen05.commit instructions",
         "tcgen05.ld": "tcgen05.ld loads", "tcgen05.st": "tcgen05.st stores", "tcgen05.alloc": "TMEM allocations",
         "tcgen05.dealloc": "TMEM deallocations", "tcgen05.relinquish": "TMEM permit relinquishments",
         "mbarrier.init": "mbarrier initialisations", "mbarrier.wait": "mbarrier waits",
         "mbarrier.arrive": "mbarrier arrivals", "mbarrier.expect_tx": "expect-tx arrivals",
         "barrier": "CTA barriers", "fence": "fences", "elect": "elect instructions", "load": "loads",
         "store": "stores", "atomic": "atomics", "setmaxnreg": "setmaxnreg instructions", "fma": "FMAs",
         "nop": "NOPs", "other": "other instructions", "none": "instructions that never run"}

#: Memory spaces as the checks name them.
SPACES = ("global", "shared", "local", "constant", "generic", "tensor")

_BYTES = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "32": 4, "64": 8, "128": 16}
_MMA_SHAPE = {"16816": "m16n8k16", "1688": "m16n8k8", "884": "m8n8k4", "16832": "m16n8k32", "8816": "m8n8k16",
              "16864": "m16n8k64", "168256": "m16n8k256"}
_WAIT_COUNT = re.compile(r"0x([0-9a-fA-F]+)|(\d+)")


@dataclass(frozen=True)
class Effect:
    """What one instruction does, as far as the checks care."""

    kind: str
    space: str = ""             # the memory a load or store touches (global, shared, local, constant, generic)
    bytes: int = 0              # bytes per thread a load, store or copy moves
    shape: str = ""             # an MMA's shape ("m16n8k16", "64x128x16"), an ldmatrix's count ("x4")
    count: int | None = None    # a wait's N
    trans: bool = False         # ldmatrix .trans
    commits: bool = False       # an HGMMA that closes its group (gsb0)
    detail: str = ""            # a word more (an mbarrier arrive's "remote", a fence's scope)


def _count(operand: str) -> int | None:
    m = _WAIT_COUNT.search(operand)
    if not m:
        return None
    return int(m.group(1), 16) if m.group(1) else int(m.group(2))


def _width(modifiers: tuple[str, ...]) -> int:
    width = 4
    for mod in modifiers:
        if mod in _BYTES:
            width = _BYTES[mod]
    return width


@lru_cache(maxsize=1 << 16)
def classify(ins: Instruction) -> Effect:
    """The :class:`Effect` of one instruction."""
    if ins.never_runs:
        return Effect("none")
    base, mods, op = ins.base, ins.modifiers, ins.opcode
    if base == "LDGSTS":
        return Effect("cp.async", "global", _width(mods))
    if base == "LDGDEPBAR":
        return Effect("cp.async.commit")
    if base == "UTMACMDFLUSH":
        return Effect("bulk.commit")
    if base == "DEPBAR" and ins.operands and ins.operands[0].startswith("SB0"):
        return Effect("async.wait", count=_count(ins.operands[-1]) if len(ins.operands) > 1 else 0)
    if base == "UTMALDG":
        return Effect("tma.load", "global", detail="multicast" if "MULTICAST" in mods else "")
    if base in ("UTMASTG", "UTMAREDG"):
        return Effect("tma.store", "global")
    if base in ("UBLKCP", "UBLKRED"):
        return Effect("bulk.copy", "global")
    if base == "LDSM":
        x = next((m for m in reversed(mods) if m in ("1", "2", "4")), "1")
        return Effect("ldmatrix", "shared", 4 * int(x), shape=f"x{x}", trans=any(m.startswith("MT") for m in mods))
    if base == "STSM":
        x = next((m for m in reversed(mods) if m in ("1", "2", "4")), "1")
        return Effect("stmatrix", "shared", 4 * int(x), shape=f"x{x}", trans=any(m.startswith("MT") for m in mods))
    if base in ("HMMA", "IMMA", "DMMA", "BMMA", "QMMA", "OMMA"):
        return Effect("mma.sync", shape=_MMA_SHAPE.get(mods[0] if mods else "", mods[0] if mods else ""),
                      detail=".".join(mods[1:]))
    if base in ("HGMMA", "IGMMA", "QGMMA", "BGMMA", "OGMMA"):
        return Effect("wgmma", shape=mods[0] if mods else "", commits=any("gsb0" == o.strip() for o in ins.operands))
    if op.startswith("WARPGROUP.ARRIVE"):
        return Effect("wgmma.fence")
    if op.startswith("WARPGROUP.DEPBAR"):
        return Effect("wgmma.wait", count=_count(ins.operands[-1]) if len(ins.operands) > 1 else 0)
    if base in ("UTCHMMA", "UTCQMMA", "UTCIMMA", "UTCOMMA", "UTCMMA", "UTCBMMA"):
        return Effect("tcgen05.mma", detail="2cta" if "2CTA" in mods else "")
    if base == "UTCBAR":
        return Effect("tcgen05.commit", detail="multicast" if "MULTICAST" in mods else "")
    if base == "LDTM":
        x = next((m[1:] for m in mods if m.startswith("x") and m[1:].isdigit()), "1")
        return Effect("tcgen05.ld", "tensor", 4 * int(x), shape=f"x{x}")
    if base == "STTM":
        return Effect("tcgen05.st", "tensor")
    if base == "UTCATOMSWS":
        if "FIND_AND_SET" in mods:
            return Effect("tcgen05.alloc")
        if "AND" in mods:
            return Effect("tcgen05.dealloc")
    if op.startswith("UVIRTCOUNT.DEALLOC"):
        return Effect("tcgen05.relinquish")
    if base == "SYNCS":
        if "EXCH" in mods:
            return Effect("mbarrier.init")
        if "PHASECHK" in mods:
            return Effect("mbarrier.wait", detail="try" if "TRYWAIT" in mods else "test")
        if "ARRIVE" in mods:
            remote = "remote" if "RED" in mods else ""
            if any(m.startswith("ART") or m.startswith("A1T") for m in mods):
                return Effect("mbarrier.arrive", detail=remote)
            return Effect("mbarrier.expect_tx", detail=remote)
    if base == "BAR" and ("SYNC" in mods or "RED" in mods):
        return Effect("barrier")
    if base in ("MEMBAR", "FENCE"):
        return Effect("fence", detail=".".join(mods))
    if base == "USETMAXREG":
        return Effect("setmaxnreg", detail="increase" if "TRY_ALLOC" in mods else "decrease")
    if base == "ELECT":
        return Effect("elect")
    if base == "NOP":
        return Effect("nop")
    if base in ("LDG", "LD", "LDS", "LDL", "LDC", "ULDC", "LDCU", "LDGMC"):
        space = {"LDG": "global", "LDGMC": "global", "LD": "generic", "LDS": "shared", "LDL": "local"}.get(base, "constant")
        return Effect("load", space, _width(mods))
    if base in ("STG", "ST", "STS", "STL"):
        space = {"STG": "global", "ST": "generic", "STS": "shared", "STL": "local"}[base]
        return Effect("store", space, _width(mods))
    if base in ("ATOM", "ATOMG", "ATOMS", "RED", "REDG", "REDUX"):
        return Effect("atomic", "shared" if base == "ATOMS" else "global")
    if base in ("FFMA", "HFMA2", "DFMA", "FFMA2"):
        factors = [o.strip().lstrip("-|").split(".")[0] for o in ins.operands[1:3]]
        return Effect("other" if "RZ" in factors else "fma")     # ptxas moves constants with HFMA2 R, -RZ, RZ, a, b
    if base in ("TEX", "TLD", "TLD4", "TXD", "TXQ", "SULD", "SUST"):
        return Effect("load", "global", _width(mods))
    return Effect("other")


#: Kinds that run on the tensor cores.
TENSOR_CORE = ("mma.sync", "wgmma", "tcgen05.mma")
#: Kinds that bring global data into shared memory without the registers.
ASYNC_COPIES = ("cp.async", "tma.load", "bulk.copy")


def is_tensor_core(ins: Instruction) -> bool:
    return classify(ins).kind in TENSOR_CORE


def reads_global(ins: Instruction) -> bool:
    """A load that may read global memory into registers (a generic ``LD`` may, a texture read does)."""
    e = classify(ins)
    return e.kind == "load" and e.space in ("global", "generic")


def writes_global(ins: Instruction) -> bool:
    e = classify(ins)
    return e.kind == "store" and e.space in ("global", "generic")


__all__ = ["ASYNC_COPIES", "Effect", "KINDS", "NOUNS", "SPACES", "TENSOR_CORE", "classify", "is_tensor_core", "reads_global",
           "writes_global"]
