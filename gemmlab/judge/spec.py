"""What a C++ kernel exercise hands the judge: the kernel source and how to launch it, as data.

Why: the judge must launch a student's kernel without running a line of the student's Python.
So the launcher a notebook would write (``kernel(A, B, D, M, N, K, grid=..., block=...)``) is
described instead: the kernel's source and name, the GEMM convention, and the grid, block and
dynamic shared memory as small expressions over M, N, K and named integer constants
(:mod:`gemmlab.judge.expressions`). The kernel's arguments are bound by parameter name
(:mod:`gemmlab.judge.binding`).
"""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from typing import Any

from . import expressions
from .errors import JudgeError

#: Longest kernel source accepted (characters).
MAX_SOURCE_CHARS = 200_000
#: Most named constants, and most compile options, a spec may have.
MAX_CONSTANTS = 32
MAX_OPTIONS = 16
CONVENTIONS = ("tn", "nn")

#: NVRTC options a spec may ask for (by prefix); include paths and output options are the judge's business.
ALLOWED_OPTION_PREFIXES = (
    "-D", "--define-macro=", "-U", "--undefine-macro=", "-lineinfo", "--generate-line-info",
    "-use_fast_math", "--use_fast_math", "-maxrregcount=", "--maxrregcount=", "-fmad=", "--fmad=",
    "-ftz=", "--ftz=", "-prec-div=", "--prec-div=", "-prec-sqrt=", "--prec-sqrt=",
    "--extra-device-vectorization", "-dopt=", "--dopt=",
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_KERNEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_:<>, ]{0,199}$")
_ARCH = re.compile(r"^sm_[0-9]{2,3}[a-z]?$")
_RESERVED = set(expressions.SIZE_NAMES) | set(expressions.FUNCTIONS)


def _expressions3(value: Any, what: str) -> tuple[str, str, str]:
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 3:
        raise JudgeError(f"{what} is up to three expressions, e.g. ('cdiv(N, BN)', 'cdiv(M, BM)', '1'), not {value!r:.80}.")
    texts = tuple(expressions.check_text(v).strip() for v in value)
    return (texts + ("1", "1"))[:3]  # type: ignore[return-value]


def _constants(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        raise JudgeError(f"constants are a mapping of names to integers, e.g. {{'BM': 128}}, not {type(value).__name__}.")
    if len(value) > MAX_CONSTANTS:
        raise JudgeError(f"a kernel spec has at most {MAX_CONSTANTS} constants, not {len(value)}.")
    out = {}
    for name, number in value.items():
        if not isinstance(name, str) or not _NAME.match(name) or keyword.iskeyword(name):
            raise JudgeError(f"constant name {name!r:.70} is not a plain identifier (letters, digits, _).")
        if name in _RESERVED:
            raise JudgeError(f"constant name {name!r} is taken: M, N, K, min, max and cdiv are built in.")
        if type(number) is not int or abs(number) > expressions.MAX_MAGNITUDE:
            raise JudgeError(f"constant {name} must be an integer within ±2**62, not {number!r:.70}.")
        out[name] = number
    return out


def _options(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_OPTIONS:
        raise JudgeError(f"options are a list of at most {MAX_OPTIONS} compiler options.")
    for option in value:
        if not isinstance(option, str) or len(option) > 200 or not option.startswith(ALLOWED_OPTION_PREFIXES):
            raise JudgeError(f"compile option {option!r:.80} is not one the judge passes on; allowed: "
                             f"{', '.join(ALLOWED_OPTION_PREFIXES)}.")
    return tuple(value)


@dataclass(frozen=True)
class KernelSpec:
    """A C++ GEMM kernel and its launch, checked when made: every field is plain data.

    ``grid``/``block``/``smem`` are expressions over ``M``, ``N``, ``K`` and ``constants``
    (e.g. ``grid=("cdiv(N, BN)", "cdiv(M, BM)", "1")``, ``constants={"BM": 128, "BN": 128}``).
    ``arch=None`` compiles for the judge's GPU.
    """

    source: str
    name: str
    convention: str = "tn"
    grid: tuple[str, str, str] = ("1", "1", "1")
    block: tuple[str, str, str] = ("1", "1", "1")
    smem: str = "0"
    constants: dict[str, int] = field(default_factory=dict)
    options: tuple[str, ...] = ()
    arch: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.source, str) or not self.source.strip():
            raise JudgeError("the kernel source is empty: send the CUDA C++ text of the kernel cell.")
        if len(self.source) > MAX_SOURCE_CHARS:
            raise JudgeError(f"the kernel source has {len(self.source):,} characters; the judge takes at most "
                             f"{MAX_SOURCE_CHARS:,}.")
        if not isinstance(self.name, str) or not _KERNEL_NAME.match(self.name):
            raise JudgeError(f"kernel name {self.name!r:.80} is not a __global__ function name (or an "
                             "instantiation such as gemm<128>).")
        if self.convention not in CONVENTIONS:
            raise JudgeError(f"convention must be 'tn' (D = A·Bᵀ) or 'nn' (C = α·A·B + β·C), not {self.convention!r:.20}.")
        if self.arch is not None and (not isinstance(self.arch, str) or not _ARCH.match(self.arch)):
            raise JudgeError(f"arch must be like 'sm_90a' (or None for the judge's GPU), not {self.arch!r:.20}.")
        object.__setattr__(self, "grid", _expressions3(self.grid, "grid"))
        object.__setattr__(self, "block", _expressions3(self.block, "block"))
        object.__setattr__(self, "smem", expressions.check_text(self.smem).strip())
        object.__setattr__(self, "constants", _constants(self.constants))
        object.__setattr__(self, "options", _options(self.options))
        names = set(expressions.SIZE_NAMES) | set(self.constants)
        for text in (*self.grid, *self.block, self.smem):
            expressions.check_vocabulary(text, names)

    def geometry(self, M: int, N: int, K: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """``(grid, block, smem)`` for one problem size, evaluated in the expression language."""
        names = {**self.constants, "M": int(M), "N": int(N), "K": int(K)}
        grid = tuple(expressions.evaluate(t, names) for t in self.grid)
        block = tuple(expressions.evaluate(t, names) for t in self.block)
        return grid, block, expressions.evaluate(self.smem, names)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: strings, ints, lists and None."""
        return {"source": self.source, "name": self.name, "convention": self.convention, "grid": list(self.grid),
                "block": list(self.block), "smem": self.smem, "constants": dict(self.constants),
                "options": list(self.options), "arch": self.arch}

    @classmethod
    def from_dict(cls, data: Any) -> "KernelSpec":
        """The spec :meth:`to_dict` wrote; anything else is a JudgeError saying what is wrong."""
        if not isinstance(data, dict):
            raise JudgeError(f"a kernel spec is a JSON object, not {type(data).__name__}.")
        fields = ("source", "name", "convention", "grid", "block", "smem", "constants", "options", "arch")
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise JudgeError(f"unknown kernel spec field(s) {', '.join(map(str, unknown))[:120]}; known: {', '.join(fields)}.")
        missing = [f for f in ("source", "name") if f not in data]
        if missing:
            raise JudgeError(f"a kernel spec needs {' and '.join(missing)}.")
        return cls(**data)


__all__ = ["ALLOWED_OPTION_PREFIXES", "CONVENTIONS", "KernelSpec", "MAX_CONSTANTS", "MAX_OPTIONS", "MAX_SOURCE_CHARS"]
