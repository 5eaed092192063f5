"""Checks that count instructions: the tensor-core instruction and its shape, and any other kind
(TMA loads and stores, multicast, mbarrier waits, setmaxnreg...).

SASS names the MMA's shape in its opcode: ``HMMA.16816.F32`` is ``mma.sync.m16n8k16`` with fp32
accumulators, ``HMMA.1688`` is m16n8k8, ``HGMMA.64x128x16.F32`` is a wgmma of 64×128×16, ``UTCHMMA`` a
tcgen05.mma. A WMMA 16×16×16 becomes two ``HMMA.16816``. Counts are of instructions in the machine code,
so a loop the compiler unrolled multiplies them (``per_mma`` asks for a ratio instead); an instruction that
never runs (``@!PT``) is not counted.
"""
from __future__ import annotations

from fractions import Fraction

from .check import PLACE, Check, Finding, check_where, failed, no_main_loop, passed, signature
from .program import Program, Site
from .semantics import KINDS, NOUNS, TENSOR_CORE, classify

#: What ``mma(kind)`` accepts besides a shape.
MMA_KINDS = {"mma.sync": "mma.sync", "wgmma": "wgmma", "tcgen05": "tcgen05.mma", "any": None}
_PTX = {"mma.sync": "mma.sync (SASS HMMA)", "wgmma": "wgmma.mma_async (SASS HGMMA)",
        "tcgen05.mma": "tcgen05.mma (SASS UTCHMMA)"}


#: ``mma(inputs=...)``: the input type of an ``mma.sync``, as SASS writes it after the accumulator type
#: (``HMMA.16816.F32`` takes fp16, ``HMMA.16816.F32.BF16`` bf16, ``HMMA.1684.F32.TF32`` tf32).
MMA_INPUTS = {"f16": "", "bf16": "BF16", "tf32": "TF32"}


def _inputs_of(site: Site) -> str:
    """The input type of an mma.sync (a key of :data:`MMA_INPUTS`), or "" for any other instruction."""
    e = classify(site.ins)
    if e.kind != "mma.sync":
        return ""
    marks = set(e.detail.split("."))
    return next((name for name, mark in MMA_INPUTS.items() if mark and mark in marks), "f16")


def _matches(site: Site, kind: str, inputs: str | None = None) -> bool:
    e = classify(site.ins)
    if e.kind not in TENSOR_CORE:
        return False
    if inputs is not None and _inputs_of(site) != inputs:
        return False
    if kind in MMA_KINDS:
        want = MMA_KINDS[kind]
        return want is None or e.kind == want
    return e.shape == kind


def _describe(sites: list[Site], inputs: bool = False) -> str:
    counts: dict[str, int] = {}
    for s in sites:
        e = classify(s.ins)
        key = f"{e.kind} {e.shape}".strip() + (f" on {_inputs_of(s)} inputs" if inputs and e.kind == "mma.sync" else "")
        counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in counts.items()) or "none"


def _count_message(found: int, count: int | None, at_least: int | None) -> str | None:
    if count is not None and found != count:
        return f"expected {count}, found {found}"
    if at_least is not None and found < at_least:
        return f"expected at least {at_least}, found {found}"
    return None


def mma(kind: str = "any", count: int | None = None, at_least: int | None = 1, where: str = "anywhere",
        only: bool = False, inputs: str | None = None) -> Check:
    """Tensor-core instructions of ``kind`` in ``where``: a shape (``"m16n8k16"``, ``"m16n8k8"``, a wgmma's
    ``"64x256x16"``) or a family (``"mma.sync"``, ``"wgmma"``, ``"tcgen05"``, ``"any"``); exactly ``count`` of
    them, or ``at_least``; ``only``: no tensor-core instruction of another kind there. ``inputs`` (``"f16"``,
    ``"bf16"``, ``"tf32"``; mma.sync only): the type the instruction multiplies, so that a bf16 kernel built on
    an fp16 MMA (the same bits read as other numbers) is told so.

    Reads: HMMA/IMMA (mma.sync, and WMMA: two HMMA.16816 per 16×16×16; the input type after the accumulator's,
    ``HMMA.16816.F32.BF16``), HGMMA (wgmma), UTCHMMA (tcgen05.mma).
    """
    check_where(where)
    if inputs is not None and inputs not in MMA_INPUTS:
        raise ValueError(f"inputs= must be one of {', '.join(MMA_INPUTS)}, not {inputs!r}")
    name = signature("mma", kind=kind, count=count, at_least=at_least if at_least != 1 else None,
                     where=where if where != "anywhere" else None, only=only or None, inputs=inputs)
    what = _PTX.get(MMA_KINDS.get(kind) or "", f"{kind} MMA") + (f" on {inputs} inputs" if inputs else "")

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        every = p.where(TENSOR_CORE, where)
        good = [s for s in every if _matches(s, kind, inputs)]
        problem = _count_message(len(good), count, at_least if count is None else None)
        if problem:
            return failed(name, f"{PLACE[where]}: {problem} {what} instruction(s); your kernel has "
                                f"{_describe(every, inputs is not None)}.", every)
        if only and len(good) != len(every):
            other = [s for s in every if s not in good]
            also = _describe(other, inputs is not None)
            return failed(name, f"{PLACE[where]} your kernel also uses {also}: use the {kind} instruction"
                                f"{f' on {inputs} inputs' if inputs else ''} only.", other)
        return passed(name, f"{len(good)} {what} instruction(s) {PLACE[where]}.", good)

    return Check(name, f"tensor cores through {what}", run)


def instructions(kind: str, count: int | None = None, at_least: int | None = 1, where: str = "anywhere",
                 detail: str | None = None, per_mma: float | Fraction | None = None) -> Check:
    """Instructions of a kind of :data:`gemmlab.techniques.semantics.KINDS` in ``where``: exactly ``count``
    or ``at_least``; ``detail`` narrows it (``"multicast"`` for TMA loads, ``"increase"``/``"decrease"`` for
    setmaxnreg, ``"remote"`` for an arrive on another CTA's barrier). ``per_mma`` instead asks for that many of
    them per tensor-core instruction (e.g. ``0.5``: one ldmatrix for every two MMAs), in each main loop on its own
    when ``where="main_loop"``: a ratio does not change when the compiler unrolls a loop, a count does.

    Reads: the SASS named for that kind in KINDS.
    """
    if kind not in KINDS:
        raise ValueError(f"kind= must be one of {', '.join(KINDS)}, not {kind!r}")
    check_where(where)
    if per_mma is not None and (isinstance(per_mma, bool) or not isinstance(per_mma, (int, float, Fraction))
                                or per_mma < 0):
        raise ValueError(f"per_mma= is a number of instructions per MMA (0.5, Fraction(3, 4)...), not {per_mma!r}")
    ratio = None if per_mma is None else Fraction(per_mma).limit_denominator(64)
    name = signature("instructions", kind=kind, count=count,
                     at_least=at_least if at_least != 1 and per_mma is None else None,
                     where=where if where != "anywhere" else None, detail=detail,
                     per_mma=None if ratio is None else float(ratio))
    what = NOUNS[kind] + (f" ({detail})" if detail else "")

    def of_kind(p: Program, body: set[int] | None) -> list[Site]:
        found = [s for s in p.where(kind) if (body is None or s.block in body)
                 and (detail is None or classify(s.ins).detail == detail)]
        if kind == "mbarrier.wait":
            found = [s for s in found if s.block not in p.spin_blocks]
        return found

    def per_mma_run(p: Program) -> Finding:
        bodies = [set(loop.body) for loop in p.main_loops] if where == "main_loop" else [p.region(where)]
        total = 0
        for body in bodies:
            found = of_kind(p, body)
            mmas = [s for s in p.where(TENSOR_CORE) if body is None or s.block in body]
            if not mmas:
                return failed(name, f"{PLACE[where]}: no tensor-core instruction to count {what} against.", found)
            got = Fraction(len(found), len(mmas))
            if got != ratio:
                return failed(name, f"{PLACE[where]}: {len(found)} {what} for {len(mmas)} MMAs, {_rate(got)}, where "
                                    f"{_rate(ratio)} is expected.", found)
            total += len(found)
        return passed(name, f"{_rate(ratio)} {PLACE[where]} ({total} {what}).")

    def run(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        if ratio is not None:
            return per_mma_run(p)
        found = of_kind(p, p.region(where))
        problem = _count_message(len(found), count, at_least if count is None else None)
        if problem:
            return failed(name, f"{PLACE[where]}: {problem} {what}. ({KINDS[kind][0].upper()}{KINDS[kind][1:]}.)",
                          found)
        return passed(name, f"{len(found)} {what} {PLACE[where]}.", found)

    return Check(name, KINDS[kind], run)


def _rate(ratio: Fraction) -> str:
    """``Fraction(1, 2)`` → "1 for every 2 MMAs"."""
    if ratio.denominator == 1:
        return f"{ratio.numerator} per MMA"
    return f"{ratio.numerator} for every {ratio.denominator} MMAs"


def instruction_counts(target: object, example: object = None) -> dict[str, int]:
    """How many instructions of each kind (with its shape: ``"mma.sync m16n8k16"``, ``"ldmatrix x4"``,
    ``"wgmma 64x128x16"``, ``"fma"``, ``"tma.load"``…) the machine code of ``target``'s kernels holds; what
    a count of PTX instructions said, read from the image that runs."""
    from .images import machine_code, program

    counts: dict[str, int] = {}
    for code in machine_code(target, example):       # type: ignore[arg-type]
        for s in program(code).sites:
            e = classify(s.ins)
            if e.kind in ("other", "none", "nop"):
                continue
            key = f"{e.kind} {e.shape}{'.trans' if e.trans else ''}".strip()
            counts[key] = counts.get(key, 0) + 1
    return counts


__all__ = ["MMA_INPUTS", "MMA_KINDS", "instruction_counts", "instructions", "mma"]
