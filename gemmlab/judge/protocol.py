"""What crosses the judge's process boundary: one JSON request in, one JSON report out.

Why JSON and these limits: the request comes from the grader's side of a sandbox (and later over
a network), so it is data only (the kernel spec, the action, dtypes and sizes) and may be hostile.
Nothing in it picks input values: the judge draws its own seed. A request that is malformed,
oversized or asks for limits beyond the judge's ceilings is refused with the reason.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from gemmlab.results import COPY_DTYPES, MAX_COPY_ELEMENTS, MAX_OFFSET, MAX_PAD, MAX_WHO_ELEMENTS, SUITES as _CHECK_SUITES
from .errors import JudgeError
from .profile_options import PROFILE_ACTIONS, ProfileOptions, checked_options
from .spec import DslSpec, KernelSpec

JUDGE_VERSION = "1"
#: Largest request accepted, in bytes of JSON.
MAX_REQUEST_BYTES = 1 << 20
#: Largest report a client reads, in bytes of JSON (heatmaps of the largest shapes fit).
MAX_REPORT_BYTES = 16 << 20
#: Most shapes one check may ask for, and the largest size of any dimension.
MAX_SHAPES = 32
MAX_DIMENSION = 16384
#: Most elements of A, B and the output together (about 0.8 GB of fp32 output at the limit).
MAX_ELEMENTS = 3 * 8192 * 8192
#: The shape suites of gemmlab.check_gemm a request may name.
SUITES = tuple(_CHECK_SUITES)
ACTIONS = ("check", "bench", "copy", "copy_bench", *PROFILE_ACTIONS)
#: The actions that time a kernel (each holds its GPU alone).
TIMING_ACTIONS = ("bench", "copy_bench")
#: The actions that hold their GPU alone: the timings, and the profiles (an Nsight Compute readout, a timeline).
EXCLUSIVE_ACTIONS = (*TIMING_ACTIONS, *PROFILE_ACTIONS)
DTYPES = ("float16", "bfloat16")
#: What a copy request may say of its kernel: dst = srcᵀ (transpose), and a third tensor of thread indices (who).
COPY_OPTIONS = ("transpose", "who")
OUT_DTYPES = ("float16", "bfloat16", "float32")
#: Ceilings on the limits a request may ask for, in seconds.
MAX_COMPILE_S = 300.0
MAX_KERNEL_S = 60.0
#: Largest magnitude of a request's alpha and beta, and largest side of its heatmap tile.
MAX_SCALAR = 1e6
MAX_TILE = 4096

#: Every verdict a report can carry.
VERDICTS = (
    "passed",        # the check passed, or the timing ran and was verified
    "failed",        # the kernel ran and was wrong (check rows, or the timing's verification)
    "error",         # a GemmlabError before or while running (compile error, rejected launch, ...)
    "refused",       # the request itself was malformed, oversized or outside the vocabulary
    "context_lost",  # the kernel broke the CUDA context (illegal address, ...)
    "timeout",       # the kernel, the compile or the whole judge ran past its limit
    "crashed",       # the judge process died or answered something that is not a report
)


def _positive_int(value: Any, what: str) -> int:
    if type(value) is not int or not 1 <= value <= MAX_DIMENSION:
        raise JudgeError(f"{what} must be an integer from 1 to {MAX_DIMENSION:,}, not {value!r:.40}.")
    return value


def checked_shape(value: Any) -> tuple[int, int, int]:
    """``(M, N, K)`` within the judge's size limits, or a JudgeError saying which limit."""
    if not isinstance(value, (list, tuple)) or len(value) != 3:
        raise JudgeError(f"a shape is [M, N, K], not {value!r:.60}.")
    M, N, K = (_positive_int(v, f"{d} in a shape") for v, d in zip(value, "MNK"))
    if M * K + N * K + M * N > MAX_ELEMENTS:
        raise JudgeError(f"shape {M}×{N}×{K} is too large for the judge: A, B and the output may hold at most "
                         f"{MAX_ELEMENTS:,} elements together.")
    return M, N, K


@dataclass(frozen=True)
class JudgeLimits:
    """Seconds a compile and one kernel wait may take; a request may lower them, not raise them past the ceilings."""

    compile_s: float = 120.0
    kernel_s: float = 10.0

    def __post_init__(self) -> None:
        for name, ceiling in (("compile_s", MAX_COMPILE_S), ("kernel_s", MAX_KERNEL_S)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= ceiling:
                raise JudgeError(f"limit {name} must be a number of seconds above 0 and at most {ceiling:.0f}, "
                                 f"not {value!r:.30}.")

    def to_dict(self) -> dict[str, float]:
        return {"compile_s": float(self.compile_s), "kernel_s": float(self.kernel_s)}

    @classmethod
    def from_dict(cls, data: Any) -> "JudgeLimits":
        if not isinstance(data, dict) or set(data) - {"compile_s", "kernel_s"}:
            raise JudgeError("limits are an object with compile_s and kernel_s (seconds).")
        return cls(**data)


def _scalar(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or abs(value) > MAX_SCALAR:
        raise JudgeError(f"{what} must be a finite number within ±{MAX_SCALAR:g} (or null), not {value!r:.30}.")
    return float(value)


def _tile(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not all(
            type(v) is int and 1 <= v <= MAX_TILE for v in value):
        raise JudgeError(f"tile is [rows, columns] of the failure heatmap, each 1 to {MAX_TILE}, not {value!r:.40}.")
    return value[0], value[1]


def _copy_options(value: Any, action: str) -> dict[str, bool] | None:
    if action not in ("copy", "copy_bench"):
        if value is not None and action not in PROFILE_ACTIONS:   # a profile of a copy kernel says so by having them
            raise JudgeError("copy options apply to the copy action only.")
        if value is None:
            return None
    if value is None:
        value = {}
    if not isinstance(value, dict) or set(value) - set(COPY_OPTIONS) or not all(
            type(v) is bool for v in value.values()):
        raise JudgeError(f"copy options are an object with true/false {' and '.join(COPY_OPTIONS)}, not {value!r:.60}.")
    return {name: bool(value.get(name, False)) for name in COPY_OPTIONS}


def _check_copy_request(request: "JudgeRequest") -> None:
    """A copy request's limits: element types, [M, N, 1] shapes within the copy sizes, recorded launches."""
    if request.dtype not in COPY_DTYPES:
        raise JudgeError(f"a copy's dtype is one of {', '.join(COPY_DTYPES)}, not {request.dtype!r:.30}.")
    if request.out_dtype not in (None, request.dtype) or request.pad is not None or request.offset is not None \
            or request.alpha is not None \
            or request.beta is not None or request.tile is not None:
        raise JudgeError("a copy takes no out_dtype, pad, offset, alpha, beta or tile.")
    if request.action == "copy" and isinstance(request.shapes, str):
        raise JudgeError("a copy's shapes are a list of [M, N, 1], not a suite.")
    who = request.copy["who"]
    if who and request.action != "copy":
        raise JudgeError("a copy's timing or profile takes no who map.")
    for M, N, K in request.run_shapes():
        if K != 1 or M * N > MAX_COPY_ELEMENTS:
            raise JudgeError(f"a copy's shape is [M, N, 1] with M·N at most {MAX_COPY_ELEMENTS:,}, not {[M, N, K]}.")
    if who and sum(M * N for M, N, _ in request.run_shapes()) > MAX_WHO_ELEMENTS:
        raise JudgeError(f"a copy with a who map checks at most {MAX_WHO_ELEMENTS:,} elements in all (its maps come "
                         "back as numbers).")
    if not request.spec.launches and not isinstance(request.spec, DslSpec):
        raise JudgeError("a copy kernel is judged from its recorded launches; the spec has none.")
    for launch in request.spec.launches:   # the who map's tensor is passed exactly when there is one
        if ("B" in launch.args) != who:
            raise JudgeError("a copy's recorded launch passes the who map's tensor (role B) " +
                             ("without a who map in the request." if not who else "nowhere, though the request asks "
                              "for a who map."))


@dataclass(frozen=True)
class JudgeRequest:
    """One judgement: check ``spec``'s kernel on ``shapes`` (a list or a suite name), or time it on ``shape``.

    ``alpha``/``beta`` (None: ``check_gemm``'s and ``bench_gemm``'s defaults) and ``tile`` (the
    heatmap's tile; None: ``check_gemm``'s) are passed on, and so is a check's ``pad`` (rows of every
    operand that many elements longer than the matrix; None: none). A spec with recorded launches must
    have one for every shape the request runs, recorded on operands padded the same way. A check's ``offset``
    starts every operand that many elements past an aligned address (None: aligned).

    ``action="copy"`` checks a copy kernel instead (:func:`gemmlab.check_copy`): ``shapes`` are [M, N, 1],
    ``dtype`` may also be float32, and ``copy`` says whether dst is srcᵀ and whether the kernel gets a who map;
    ``action="copy_bench"`` times one (:func:`gemmlab.bench_copy`) on ``shape`` [M, N, 1].

    ``action="profile"`` (an Nsight Compute readout) and ``action="trace"`` (the in-kernel timeline) run on ``shape``
    after a checked call there; ``profile`` holds their options (:mod:`.profile_options`), and ``copy`` options
    make them a copy kernel's (:mod:`gemmlab.profiling`).
    """

    spec: KernelSpec | DslSpec
    action: str = "check"
    dtype: str = "float16"
    out_dtype: str | None = None
    shapes: tuple[tuple[int, int, int], ...] | str = "default"
    shape: tuple[int, int, int] = (4096, 4096, 4096)
    limits: JudgeLimits = field(default_factory=JudgeLimits)
    alpha: float | None = None
    beta: float | None = None
    tile: tuple[int, int] | None = None
    pad: int | None = None
    copy: dict[str, bool] | None = None
    offset: int | None = None
    profile: ProfileOptions | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.spec, (KernelSpec, DslSpec)):
            raise JudgeError("a request's spec is a KernelSpec or a DslSpec.")
        if self.action not in ACTIONS:
            raise JudgeError(f"action must be one of {', '.join(ACTIONS)}, not {self.action!r:.30}.")
        object.__setattr__(self, "copy", _copy_options(self.copy, self.action))
        object.__setattr__(self, "profile", checked_options(self.profile, self.action))
        if self.dtype not in DTYPES and not self.is_copy:
            raise JudgeError(f"dtype must be one of {', '.join(DTYPES)}, not {self.dtype!r:.30}.")
        if self.out_dtype is not None and self.out_dtype not in OUT_DTYPES:
            raise JudgeError(f"out_dtype must be one of {', '.join(OUT_DTYPES)} (or null), not {self.out_dtype!r:.30}.")
        if isinstance(self.shapes, str):
            if self.shapes not in SUITES:
                raise JudgeError(f"shapes must be a suite ({', '.join(SUITES)}) or a list of [M, N, K], "
                                 f"not {self.shapes!r:.30}.")
        else:
            if not isinstance(self.shapes, (list, tuple)) or not 1 <= len(self.shapes) <= MAX_SHAPES:
                raise JudgeError(f"shapes must be a suite name or a list of 1 to {MAX_SHAPES} shapes [M, N, K].")
            object.__setattr__(self, "shapes", tuple(checked_shape(s) for s in self.shapes))
        object.__setattr__(self, "shape", checked_shape(self.shape))
        if not isinstance(self.limits, JudgeLimits):
            raise JudgeError("a request's limits are a JudgeLimits.")
        object.__setattr__(self, "alpha", _scalar(self.alpha, "alpha"))
        object.__setattr__(self, "beta", _scalar(self.beta, "beta"))
        object.__setattr__(self, "tile", _tile(self.tile))
        if self.pad is not None:
            if isinstance(self.pad, bool) or not isinstance(self.pad, int) or not 0 <= self.pad <= MAX_PAD:
                raise JudgeError(f"pad is a whole number of elements from 0 to {MAX_PAD} (or null), not {self.pad!r:.30}.")
            if self.action != "check":
                raise JudgeError("pad applies to checks only: a timing runs on unpadded operands, as bench_gemm does.")
        if self.offset is not None:
            if isinstance(self.offset, bool) or not isinstance(self.offset, int) or not 0 <= self.offset <= MAX_OFFSET:
                raise JudgeError(f"offset is a whole number of elements from 0 to {MAX_OFFSET} (or null), "
                                 f"not {self.offset!r:.30}.")
            if self.action != "check":
                raise JudgeError("offset applies to checks only: a timing runs on aligned operands, as bench_gemm does.")
        if self.is_copy:
            _check_copy_request(self)
        if self.spec.launches or isinstance(self.spec, DslSpec):
            for shape in self.run_shapes():
                self.spec.launch_for(*shape)

    @property
    def is_copy(self) -> bool:
        """A copy kernel's request: the copy actions, or a profile or trace with copy options."""
        return self.action in ("copy", "copy_bench") or (self.action in PROFILE_ACTIONS and self.copy is not None)

    def run_shapes(self) -> list[tuple[int, int, int]]:
        """The shapes this request runs: the check's list (or its suite's), or the timing's or profile's one shape."""
        if self.action in EXCLUSIVE_ACTIONS:
            return [self.shape]
        return list(_CHECK_SUITES[self.shapes]) if isinstance(self.shapes, str) else list(self.shapes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; alpha, beta, tile, pad, copy and offset appear only when set, so older judges read a request without them
        unchanged (and refuse one with them: an older judge that ignored ``pad`` would run the recorded pitches on
        unpadded operands)."""
        data = {"spec": self.spec.to_dict(), "action": self.action, "dtype": self.dtype, "out_dtype": self.out_dtype,
                "shapes": self.shapes if isinstance(self.shapes, str) else [list(s) for s in self.shapes],
                "shape": list(self.shape), "limits": self.limits.to_dict()}
        for name in ("alpha", "beta", "tile", "pad", "copy", "offset"):
            if getattr(self, name) is not None:
                data[name] = list(self.tile) if name == "tile" else getattr(self, name)
        if self.profile is not None:
            data["profile"] = self.profile.to_dict()
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, data: Any) -> "JudgeRequest":
        """The request :meth:`to_dict` wrote; any other value is a JudgeError saying what is wrong."""
        if not isinstance(data, dict):
            raise JudgeError(f"a judge request is a JSON object, not {type(data).__name__}.")
        fields = ("spec", "action", "dtype", "out_dtype", "shapes", "shape", "limits", "alpha", "beta", "tile", "pad",
                  "copy", "offset", "profile")
        unknown = sorted(str(k) for k in set(data) - set(fields))
        if unknown:
            raise JudgeError(f"unknown request field(s) {', '.join(unknown)[:120]}; known: {', '.join(fields)}."
                             + (" The judge draws its own seed." if "seed" in unknown else ""))
        if "spec" not in data:
            raise JudgeError("a judge request needs a spec (the kernel and its launch).")
        values = dict(data)
        is_dsl = isinstance(data["spec"], dict) and data["spec"].get("kind") == "dsl"
        values["spec"] = (DslSpec if is_dsl else KernelSpec).from_dict(data["spec"])
        if "limits" in data:
            values["limits"] = JudgeLimits.from_dict(data["limits"])
        try:
            return cls(**values)
        except TypeError as exc:  # a field of the wrong JSON type that a comparison trips on
            raise JudgeError(f"a request field has the wrong type: {exc}.") from None

    @classmethod
    def from_json(cls, raw: str | bytes) -> "JudgeRequest":
        """Parse one request, refusing oversized or malformed JSON before looking inside."""
        return cls.from_dict(_bounded_json(raw, MAX_REQUEST_BYTES, "the request"))


def _bounded_json(raw: str | bytes, limit: int, what: str) -> Any:
    """``raw`` parsed as JSON, refused (JudgeError naming ``what``) when over ``limit`` bytes or malformed."""
    if len(raw) > limit:
        raise JudgeError(f"{what} is larger than {limit:,} bytes.")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise JudgeError(f"{what} is not JSON ({type(exc).__name__}: {str(exc)[:120]}).") from None


@dataclass(frozen=True)
class JudgeReport:
    """What the judge answers: a verdict, the check's or timing's plain results, or the error's text."""

    verdict: str
    action: str = ""
    check: dict[str, Any] | None = None
    bench: dict[str, Any] | None = None
    error: str = ""
    error_type: str = ""
    device: str = ""
    judge_version: str = JUDGE_VERSION
    profile: dict[str, Any] | None = None   # a profile's readout or a trace's timeline (gemmlab.profiling)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise JudgeError(f"a report's verdict is one of {', '.join(VERDICTS)}, not {self.verdict!r:.30}.")

    @property
    def passed(self) -> bool:
        return self.verdict == "passed"

    def to_dict(self) -> dict[str, Any]:
        data = {"verdict": self.verdict, "action": self.action, "check": self.check, "bench": self.bench,
                "error": self.error, "error_type": self.error_type, "device": self.device,
                "judge_version": self.judge_version}
        if self.profile is not None:   # only then, so a reader of the other actions' reports sees them unchanged
            data["profile"] = self.profile
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), allow_nan=False)

    @classmethod
    def from_dict(cls, data: Any) -> "JudgeReport":
        base = set(cls("error").to_dict())
        if not isinstance(data, dict) or set(data) not in (base, base | {"profile"}):
            raise JudgeError("not a judge report: a JSON object with exactly the fields of JudgeReport.to_dict().")
        if data.get("profile") is not None and not isinstance(data["profile"], dict):
            raise JudgeError("not a judge report: profile is neither an object nor absent.")
        for name in ("verdict", "action", "error", "error_type", "device", "judge_version"):
            if not isinstance(data[name], str):
                raise JudgeError(f"not a judge report: {name} is not a string.")
        for name in ("check", "bench"):
            if data[name] is not None and not isinstance(data[name], dict):
                raise JudgeError(f"not a judge report: {name} is neither an object nor null.")
        return cls(**data)

    @classmethod
    def from_json(cls, raw: str | bytes) -> "JudgeReport":
        return cls.from_dict(_bounded_json(raw, MAX_REPORT_BYTES, "the judge's report"))


__all__ = [
    "ACTIONS", "COPY_OPTIONS", "EXCLUSIVE_ACTIONS", "PROFILE_ACTIONS", "TIMING_ACTIONS", "DTYPES", "JUDGE_VERSION", "JudgeLimits", "JudgeReport", "JudgeRequest", "MAX_COMPILE_S",
    "MAX_DIMENSION", "MAX_ELEMENTS", "MAX_KERNEL_S", "MAX_REPORT_BYTES", "MAX_REQUEST_BYTES", "MAX_SCALAR",
    "MAX_SHAPES", "MAX_TILE",
    "OUT_DTYPES", "SUITES", "VERDICTS", "checked_shape",
]
