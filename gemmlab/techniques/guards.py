"""In the grader's judge: the kernel the judge launches is the kernel whose techniques were checked.

Why: a CuTe DSL kernel is compiled in the student's process, which hands the judge both the image a check
reads and the images of the launches the judge replays. After a check passed on one image, every plan
later recorded for the same launching answer (a compiled kernel's handle, or a function's name) is held
to the same checks before it runs: an image seen before keeps its verdict, a new one is disassembled and
checked. A kernel that passes on the image it showed and launches another is refused with the checks'
messages.

Which launches are held to them: those whose tensors all allow 16-byte vectors (start, row pitch and row
length multiples of 16 bytes), the case the course's fast paths are written for. A call with narrower
rows may launch a fallback variant that copies element by element (06's odd K); it is not checked.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .check import Check
from .images import MachineCode, images_of_plan, program
from .report import TechniqueError, TechniqueReport

_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
             "int32": 4, "int64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1, "bool": 1}


def vector_friendly(metas: Sequence[dict[str, Any]]) -> bool:
    """Whether every tensor of a call allows 16-byte vectors: its start, each pitch and its contiguous extent
    (in bytes) are multiples of 16."""
    for m in metas:
        size = _ITEMSIZE.get(str(m.get("dtype")), 0)
        if not size or int(m.get("address_mod", 1)) % 16:
            return False
        for extent, stride in zip(m.get("shape", []), m.get("stride", [])):
            if extent > 1 and stride != 1 and (stride * size) % 16:
                return False
            if stride == 1 and extent > 1 and (extent * size) % 16:
                return False
    return True


def verdict_of(code: MachineCode, checks: Sequence[Check], what: str) -> TechniqueReport:
    p = program(code)
    return TechniqueReport(what, [(code.label, c(p)) for c in checks])


def bind_checks_to_launches(target: Any, checks: Sequence[Check], checked: Sequence[MachineCode], what: str,
                            register: bool = True) -> Callable[[Any, list[dict[str, Any]]], None]:
    """Hold every later launch of ``target`` (a judge-side answer) to ``checks`` (see the module's docstring);
    returns the guard (``register=False``: only returns it)."""

    verdicts: dict[tuple[str, str | None], TechniqueReport] = {}
    for code in checked:
        verdicts[(code.digest, code.kernel)] = TechniqueReport(what)

    def guard(plan: Any, metas: list[dict[str, Any]]) -> None:
        if not vector_friendly(metas):
            return
        for code in images_of_plan(plan, getattr(target, "__name__", "kernel")):
            key = (code.digest, code.kernel)
            report = verdicts.get(key)
            if report is None:
                report = verdicts[key] = verdict_of(code, checks, what)
            if not report.passed:
                raise TechniqueError("the kernel launched for these tensors is not the kernel whose techniques were "
                                     "checked, and it lacks them.\n" + report.message())

    if register:
        from gemmlab.answers.stand_ins import guard_launches

        guard_launches(target, guard)
    return guard


def in_judge_answer(target: Any) -> bool:
    """Whether ``target`` is the judge's stand-in for a launch of the student's (a compiled kernel or function)."""
    return getattr(type(target), "__module__", "") == "gemmlab.answers.stand_ins" and \
        type(target).__name__ in ("CompiledAnswer", "Answer", "DslAnswer")


__all__ = ["bind_checks_to_launches", "in_judge_answer", "vector_friendly", "verdict_of"]
