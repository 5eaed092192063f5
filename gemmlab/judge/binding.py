"""A kernel's parameters bound by name to the GEMM's operands.

Why: the judge builds the launcher itself, so it must know which argument is which without a
student's Python call. The kernel's own parameter names say it: ``A``, ``B`` and the output
``D`` (or ``C``) are pointers; ``M``, ``N``, ``K`` the sizes; ``lda``, ``ldb``, ``ldc``/``ldd``
the row pitches; ``alpha``, ``beta`` the scalars of the "nn" convention. A name outside this
vocabulary, or a missing operand, is refused before anything is compiled or launched.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from .errors import JudgeError

#: Pointer parameters by convention (the output may be called C or D).
POINTERS = ("A", "B", "C", "D")
#: Scalar parameters: sizes, pitches, and the scalars of C = α·A·B + β·C.
SCALARS = ("M", "N", "K", "lda", "ldb", "ldc", "ldd", "alpha", "beta")
OUTPUTS = ("C", "D")


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


__all__ = ["OUTPUTS", "Operands", "POINTERS", "SCALARS", "arguments", "check_parameters", "understood"]
