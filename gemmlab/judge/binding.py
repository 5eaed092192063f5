"""A kernel's parameters bound to the GEMM's operands: by name, or by position from a recorded launch.

Why: the judge builds the launcher itself, so it must know which argument is which without a
student's Python call. The kernel's own parameter names say it: ``A``, ``B`` and the output
``D`` (or ``C``) are pointers; ``M``, ``N``, ``K`` the sizes; ``lda``, ``ldb``, ``ldc``/``ldd``
the row pitches; ``alpha``, ``beta`` the scalars of the "nn" convention. A name outside this
vocabulary, or a missing operand, is refused before anything is compiled or launched.

A launch recorded from a student's launcher (``gemmlab.remote``) says it instead, position by
position: an operand's role (:data:`ROLES`) for each pointer, a number for each scalar. Then the
parameter names do not matter, and nothing but those roles and numbers reaches the kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from .errors import JudgeError

#: Pointer parameters by convention (the output may be called C or D).
POINTERS = ("A", "B", "C", "D")
#: Scalar parameters: sizes, pitches, and the scalars of C = α·A·B + β·C.
SCALARS = ("M", "N", "K", "lda", "ldb", "ldc", "ldd", "alpha", "beta")
OUTPUTS = ("C", "D")
#: What a pointer argument of a recorded launch may be: one of the GEMM's three matrices.
ROLES = ("A", "B", "out")
#: A null pointer argument of a recorded launch (a launcher's ``None``: e.g. 02's kernel without a who map).
NULL = "null"
#: Largest magnitude of a number argument of a recorded launch.
MAX_NUMBER = 2.0**62


def understood(convention: str) -> str:
    """The parameter names the judge understands, in words, for messages."""
    scalars = [s for s in SCALARS if convention == "nn" or s not in ("alpha", "beta")]
    return f"pointers A, B and the output C or D; scalars {', '.join(scalars)}"


@dataclass(frozen=True)
class Operands:
    """The values one launch binds: the three matrices (any objects: tensors on the GPU, stand-ins in tests)."""

    A: Any
    B: Any
    out: Any
    M: int
    N: int
    K: int
    alpha: float = 1.0
    beta: float = 0.0


def check_parameters(params: Sequence[Any], convention: str, name: str = "kernel") -> None:
    """Refuse a parameter list the judge cannot bind (unknown or repeated names, wrong kinds, missing operands)."""
    names = [p.name for p in params]
    known = set(POINTERS) | set(SCALARS)
    if convention != "nn":
        known -= {"alpha", "beta"}
    for p in params:
        if p.name not in known:
            raise JudgeError(f"kernel '{name}' has a parameter {p.name!r} the judge cannot bind; it understands "
                             f"{understood(convention)}. Rename the parameter to one of these.")
        want = "pointer" if p.name in POINTERS else "scalar"
        if p.kind != want:
            raise JudgeError(f"kernel '{name}': parameter {p.name!r} is a {p.kind} (`{p.ctype}`) but the judge "
                             f"binds {p.name} as a {want}.")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise JudgeError(f"kernel '{name}' names more than one parameter {', '.join(repeated)}.")
    outputs = [n for n in names if n in OUTPUTS]
    if len(outputs) != 1:
        raise JudgeError(f"kernel '{name}' needs exactly one output pointer, named C or D; it has "
                         f"{', '.join(outputs) or 'none'}.")
    missing = [n for n in ("A", "B") if n not in names]
    if missing:
        raise JudgeError(f"kernel '{name}' has no parameter {' or '.join(missing)}: the judge passes the inputs "
                         "as pointers named A and B.")


def arguments(params: Sequence[Any], convention: str, operands: Operands, name: str = "kernel") -> list[Any]:
    """The argument list for ``params`` in order: each parameter's operand by its name."""
    check_parameters(params, convention, name)
    ld_b = operands.K if convention == "tn" else operands.N
    values = {"A": operands.A, "B": operands.B, "C": operands.out, "D": operands.out,
              "M": operands.M, "N": operands.N, "K": operands.K,
              "lda": operands.K, "ldb": ld_b, "ldc": operands.N, "ldd": operands.N,
              "alpha": operands.alpha, "beta": operands.beta}
    return [values[p.name] for p in params]


def check_value(value: Any, position: int) -> str | int | float:
    """One recorded argument as plain data: an operand role, an integer or a finite float."""
    if isinstance(value, str):
        if value not in ROLES and value != NULL:
            raise JudgeError(f"argument {position} is {value!r:.30}; an operand argument is one of {', '.join(ROLES)}"
                             f" or {NULL} (a null pointer).")
        return value
    if type(value) is int and abs(value) <= MAX_NUMBER:
        return value
    if type(value) is float and math.isfinite(value) and abs(value) <= MAX_NUMBER:
        return value
    raise JudgeError(f"argument {position} is {value!r:.40}: a recorded argument is an operand role "
                     f"({', '.join(ROLES)}), an integer or a finite number within ±2**62.")


def check_positional(params: Sequence[Any], args: Sequence[Any], name: str = "kernel") -> None:
    """Refuse recorded arguments that cannot bind to ``params`` position by position.

    Each pointer parameter takes an operand role, each scalar parameter a number; struct
    parameters (a CUtensorMap, a parameter object) cannot be described as data and are refused.
    """
    if len(args) != len(params):
        raise JudgeError(f"kernel '{name}' takes {len(params)} arguments but the launch passed {len(args)}.")
    for position, (param, value) in enumerate(zip(params, args)):
        value = check_value(value, position)
        if param.kind == "struct":
            raise JudgeError(f"kernel '{name}': parameter {param.name!r} (`{param.ctype}`) is a struct; a launch "
                             "sent as data can pass only the GEMM's matrices and numbers.")
        if param.kind == "pointer" and not isinstance(value, str):
            raise JudgeError(f"kernel '{name}': pointer parameter {param.name!r} got the number {value!r:.30}; pass "
                             "one of the operand tensors A, B or the output themselves (not a data_ptr()).")
        if param.kind == "scalar" and isinstance(value, str):
            raise JudgeError(f"kernel '{name}': parameter {param.name!r} (`{param.ctype}`) is a scalar but got "
                             f"the tensor {value}.")
    if "out" not in args:
        raise JudgeError(f"kernel '{name}' was not given the output matrix: pass the output tensor (C or D) "
                         "to the kernel.")


def check_launches(params: Sequence[Any], convention: str, name: str, launches: Sequence[Any] = ()) -> None:
    """Parameters bound by position from every recorded launch (their ``args``), or by name when there are none."""
    if not launches:
        check_parameters(params, convention, name)
    for launch in launches:
        check_positional(params, launch.args, name)


def positional_arguments(args: Sequence[Any], operands: Operands) -> list[Any]:
    """The argument list of a recorded launch: each role replaced by its operand, numbers as recorded."""
    values = {"A": operands.A, "B": operands.B, "out": operands.out, NULL: None}
    return [values[a] if isinstance(a, str) else a for a in args]


__all__ = ["MAX_NUMBER", "NULL", "OUTPUTS", "Operands", "POINTERS", "ROLES", "SCALARS", "arguments", "check_launches",
           "check_parameters", "check_positional", "check_value", "positional_arguments", "understood"]
