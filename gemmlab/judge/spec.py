"""What a C++ kernel exercise hands the judge: the kernel source and how to launch it, as data.

Why: the judge must launch a student's kernel without running a line of the student's Python.
So the launcher a notebook would write (``kernel(A, B, D, M, N, K, grid=..., block=...)``) is
described instead: the kernel's source and name, the GEMM convention, and the grid, block and
dynamic shared memory as small expressions over M, N, K and named integer constants
(:mod:`gemmlab.judge.expressions`). The kernel's arguments are bound by parameter name
(:mod:`gemmlab.judge.binding`).

Or, for a launcher recorded without a GPU (:mod:`gemmlab.remote`), as a table of
:class:`RecordedLaunch`: per problem size, the concrete grid, block, shared memory and the
arguments by position (operand roles and numbers). The judge then launches exactly that.
"""
from __future__ import annotations

import copy
import keyword
import re
from dataclasses import dataclass, field
from typing import Any

from . import binding, expressions
from .errors import JudgeError

#: Longest kernel source accepted (characters).
MAX_SOURCE_CHARS = 200_000
#: Most named constants, and most compile options, a spec may have.
MAX_CONSTANTS = 32
MAX_OPTIONS = 16
#: Most recorded launches (problem sizes) a spec may carry, and most arguments of one launch.
MAX_LAUNCHES = 64
MAX_ARGUMENTS = 64
#: Largest size of one dimension of a recorded shape, grid or block.
MAX_EXTENT = 2**31 - 1
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


def _extents(value: Any, what: str, count: int) -> tuple[int, ...]:
    if not isinstance(value, (list, tuple)) or len(value) != count or not all(
            type(v) is int and 1 <= v <= MAX_EXTENT for v in value):
        raise JudgeError(f"a recorded launch's {what} is {count} integers from 1 to {MAX_EXTENT:,}, not {value!r:.60}.")
    return tuple(value)


@dataclass(frozen=True)
class RecordedLaunch:
    """One launch of the kernel for one problem size, as recorded from a launcher: all concrete values.

    ``args`` are the kernel's arguments by position: ``"A"``, ``"B"``, ``"out"`` for the operand
    matrices (:data:`gemmlab.judge.binding.ROLES`), ints and floats for scalars.
    """

    shape: tuple[int, int, int]
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int = 0
    args: tuple[str | int | float, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", _extents(self.shape, "shape [M, N, K]", 3))
        object.__setattr__(self, "grid", _extents(self.grid, "grid", 3))
        object.__setattr__(self, "block", _extents(self.block, "block", 3))
        if type(self.smem) is not int or not 0 <= self.smem <= MAX_EXTENT:
            raise JudgeError(f"a recorded launch's smem is a number of bytes ≥ 0, not {self.smem!r:.30}.")
        if not isinstance(self.args, (list, tuple)) or len(self.args) > MAX_ARGUMENTS:
            raise JudgeError(f"a recorded launch's args are a list of at most {MAX_ARGUMENTS} values.")
        object.__setattr__(self, "args", tuple(binding.check_value(v, i) for i, v in enumerate(self.args)))

    def to_dict(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "grid": list(self.grid), "block": list(self.block), "smem": self.smem,
                "args": list(self.args)}

    @classmethod
    def from_dict(cls, data: Any) -> "RecordedLaunch":
        fields = ("shape", "grid", "block", "smem", "args")
        if not isinstance(data, dict) or set(data) - set(fields) or not {"shape", "grid", "block"} <= set(data):
            raise JudgeError(f"a recorded launch is an object with {', '.join(fields)} (smem and args optional).")
        return cls(**data)


@dataclass(frozen=True)
class KernelSpec:
    """A C++ GEMM kernel and its launch, checked when made: every field is plain data.

    ``grid``/``block``/``smem`` are expressions over ``M``, ``N``, ``K`` and ``constants``
    (e.g. ``grid=("cdiv(N, BN)", "cdiv(M, BM)", "1")``, ``constants={"BM": 128, "BN": 128}``).
    ``arch=None`` compiles for the judge's GPU. ``launches``, when given, replace the expressions
    and the binding by name: each problem size runs its own :class:`RecordedLaunch`, and a size
    without one is refused.
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
    launches: tuple[RecordedLaunch, ...] = ()

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
        object.__setattr__(self, "launches", _launches(self.launches))

    def launch_for(self, M: int, N: int, K: int) -> RecordedLaunch:
        """The recorded launch of one problem size, or a JudgeError naming the sizes that were recorded."""
        for launch in self.launches:
            if launch.shape == (M, N, K):
                return launch
        known = ", ".join("×".join(map(str, launch.shape)) for launch in self.launches[:8])
        raise JudgeError(f"no launch was recorded for M×N×K = {M}×{N}×{K}; recorded: {known or 'none'}.")

    def geometry(self, M: int, N: int, K: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """``(grid, block, smem)`` for one problem size: recorded, or evaluated in the expression language."""
        if self.launches:
            launch = self.launch_for(int(M), int(N), int(K))
            return launch.grid, launch.block, launch.smem
        names = {**self.constants, "M": int(M), "N": int(N), "K": int(K)}
        grid = tuple(expressions.evaluate(t, names) for t in self.grid)
        block = tuple(expressions.evaluate(t, names) for t in self.block)
        return grid, block, expressions.evaluate(self.smem, names)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: strings, numbers, lists and None (``launches`` only when there are any)."""
        data = {"source": self.source, "name": self.name, "convention": self.convention, "grid": list(self.grid),
                "block": list(self.block), "smem": self.smem, "constants": dict(self.constants),
                "options": list(self.options), "arch": self.arch}
        if self.launches:
            data["launches"] = [launch.to_dict() for launch in self.launches]
        return data

    @classmethod
    def from_dict(cls, data: Any) -> "KernelSpec":
        """The spec :meth:`to_dict` wrote; anything else is a JudgeError saying what is wrong."""
        if not isinstance(data, dict):
            raise JudgeError(f"a kernel spec is a JSON object, not {type(data).__name__}.")
        fields = ("source", "name", "convention", "grid", "block", "smem", "constants", "options", "arch", "launches")
        unknown = sorted(set(data) - set(fields))
        if unknown:
            raise JudgeError(f"unknown kernel spec field(s) {', '.join(map(str, unknown))[:120]}; known: {', '.join(fields)}.")
        missing = [f for f in ("source", "name") if f not in data]
        if missing:
            raise JudgeError(f"a kernel spec needs {' and '.join(missing)}.")
        values = dict(data)
        if "launches" in data:
            if not isinstance(data["launches"], list):
                raise JudgeError("a kernel spec's launches are a list of recorded launches.")
            values["launches"] = tuple(RecordedLaunch.from_dict(launch) for launch in data["launches"])
        return cls(**values)


def _launches(value: Any) -> tuple[RecordedLaunch, ...]:
    if not isinstance(value, (list, tuple)) or len(value) > MAX_LAUNCHES:
        raise JudgeError(f"a kernel spec carries at most {MAX_LAUNCHES} recorded launches, in a list.")
    if not all(isinstance(launch, RecordedLaunch) for launch in value):
        raise JudgeError("a kernel spec's launches are RecordedLaunch values.")
    shapes = [launch.shape for launch in value]
    if len(set(shapes)) != len(shapes):
        raise JudgeError("a kernel spec records at most one launch per problem size.")
    return tuple(value)


__all__ = ["ALLOWED_OPTION_PREFIXES", "CONVENTIONS", "KernelSpec", "MAX_ARGUMENTS", "MAX_CONSTANTS", "MAX_EXTENT",
           "MAX_LAUNCHES", "MAX_OPTIONS", "MAX_SOURCE_CHARS", "RecordedLaunch"]


@dataclass(frozen=True)
class DslSpec:
    """A CuTe DSL kernel as recorded launch plans, one per problem size (:mod:`gemmlab.dsl.recording`).

    Why not a :class:`KernelSpec`: a DSL kernel has no source the judge could compile (its Python is
    the student's). Its plans say what to run instead: module images, launches and copies over the
    call's three tensors (A, B and the output), which the judge checks (:func:`.dsl_replay.parse_plan`)
    and replays on its own tensors. The module images are stored once for all plans.
    """

    convention: str
    plans: tuple[tuple[tuple[int, int, int], dict], ...]
    launches: tuple = ()          # no C++ launches: binding by name or position does not apply

    def __post_init__(self) -> None:
        from .dsl_replay import PlanError, parse_plan

        if self.convention not in CONVENTIONS:
            raise JudgeError(f"convention must be 'tn' or 'nn', not {self.convention!r:.20}.")
        if not isinstance(self.plans, (list, tuple)) or not 1 <= len(self.plans) <= MAX_LAUNCHES:
            raise JudgeError(f"a DSL spec carries 1 to {MAX_LAUNCHES} recorded plans.")
        plans = []
        for item in self.plans:
            if not (isinstance(item, (list, tuple)) and len(item) == 2):
                raise JudgeError("a recorded plan is a [shape, plan] pair.")
            shape = _extents(item[0], "shape [M, N, K]", 3)
            try:
                parse_plan(item[1], 3)
            except PlanError as exc:
                raise JudgeError(f"the plan recorded for {shape}: {exc}") from None
            plans.append((shape, item[1]))
        object.__setattr__(self, "plans", tuple(plans))

    @property
    def name(self) -> str:
        """The first kernel the plans launch (for messages and reports)."""
        steps = [s for _, plan in self.plans for s in plan.get("steps", []) if s.get("op") == "launch"]
        return str(steps[0].get("kernel", "dsl_kernel"))[:80] if steps else "dsl_kernel"

    def launch_for(self, M: int, N: int, K: int) -> dict:
        """The plan recorded for one problem size, or a JudgeError naming the sizes that were recorded."""
        for shape, plan in self.plans:
            if shape == (M, N, K):
                return plan
        known = ", ".join("×".join(map(str, shape)) for shape, _ in self.plans[:8])
        raise JudgeError(f"no launch was recorded for M×N×K = {M}×{N}×{K}; recorded: {known or 'none'}.")

    def geometry(self, M: int, N: int, K: int) -> tuple[tuple[int, ...], tuple[int, ...], int]:
        """``(grid, block, smem)`` of the first launch recorded for one problem size."""
        launch = next(s for s in self.launch_for(M, N, K)["steps"] if s.get("op") == "launch")
        return tuple(launch["grid"]), tuple(launch["block"]), int(launch["smem"])

    def to_dict(self) -> dict[str, Any]:
        images: dict[str, str] = {}
        plans = []
        for shape, plan in self.plans:
            images.update(plan.get("images", {}))
            plans.append({"shape": list(shape), "plan": copy.deepcopy({k: v for k, v in plan.items() if k != "images"})})
        return {"kind": "dsl", "convention": self.convention, "images": images, "plans": plans}

    @classmethod
    def from_dict(cls, data: Any) -> "DslSpec":
        if not isinstance(data, dict) or data.get("kind") != "dsl" or set(data) - {"kind", "convention", "images", "plans"}:
            raise JudgeError("a DSL spec is an object with kind 'dsl', convention, images and plans.")
        images, plans = data.get("images"), data.get("plans")
        if not isinstance(images, dict) or not isinstance(plans, list):
            raise JudgeError("a DSL spec's images are an object and its plans a list.")
        pairs = []
        for item in plans:
            if not isinstance(item, dict) or not isinstance(item.get("plan"), dict):
                raise JudgeError("a DSL spec's plan entry is an object with shape and plan.")
            plan = dict(item["plan"])
            used = {s.get("image") for s in plan.get("steps", []) if isinstance(s, dict) and s.get("op") == "launch"}
            plan["images"] = {k: images[k] for k in used if isinstance(k, str) and k in images}
            pairs.append((item.get("shape"), plan))
        return cls(str(data.get("convention")), tuple(pairs))
