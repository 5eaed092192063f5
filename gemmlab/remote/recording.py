"""What a GEMM function launches, found out without a GPU and written down as data.

Why: the pool's judge must never run a student's Python, and the student's machine has no GPU
to run it on either. So the function (``fn(A, B, D)`` or ``fn(A, B, C, alpha, beta)``) is called
here on stand-in tensors (CPU tensors that are never read: shapes, dtypes, strides, 512-byte
aligned addresses) while its launches are written down instead of made:

- a :class:`gemmlab.Kernel` (CuTe C++): which kernel (source, name, options, arch), its grid, block
  and dynamic shared memory, and for each argument which operand it is (by identity) or its number
  (a :class:`Recording`; the judge compiles the source itself);
- a CuTe DSL kernel: the plan :mod:`gemmlab.dsl.recording` writes (module images, launches, copies),
  recorded for the pool's GPU (:data:`POOL_ARCH`) by running the DSL's exported host code
  (a :class:`DslRecording`; the judge replays it).

Refused, with what to do: a function that launches nothing gemmlab compiled (torch alone), launches a
C++ kernel more than once per call or together with a DSL kernel, computes with torch, or hands a C++
kernel a tensor that is not one of the three operands (a copy, a view, a scratch buffer).
"""
from __future__ import annotations

import numbers
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..errors import GemmlabError
from gemmlab.checking.integrity import DATA_MOVEMENT, NO_COPIES, library_guard
from ..judge.binding import NULL, check_positional
from ..judge.errors import JudgeError
from ..judge.spec import RecordedLaunch
from gemmlab.running.launch import LaunchLimits, validate_launch
from .errors import UnsendableCallError

#: One recording at a time: the kernel class's call is swapped for the recorder while it runs.
_SWAP = threading.Lock()
#: The GPU a DSL recording is made for: the pool's (H100 / H200), whose attributes the DSL's host code is told.
POOL_ARCH = "sm_90a"


@dataclass(frozen=True)
class DslRecording:
    """One call of a GEMM function that launched CuTe DSL kernels, for one problem size: its plan."""

    shape: tuple[int, int, int]
    plan: dict


@dataclass(frozen=True)
class KernelSource:
    """Which kernel a launch ran, as the judge recompiles it: source, name, the student's own options, arch."""

    source: str
    name: str
    options: tuple[str, ...]
    arch: str


@dataclass(frozen=True)
class Recording:
    """One call of a GEMM function for one problem size: its kernel and its launch."""

    kernel: KernelSource
    launch: RecordedLaunch


@dataclass(frozen=True)
class KernelCall:
    """A kernel call as it was made, before it is turned into data."""

    kernel: Any
    args: tuple[Any, ...]
    grid: Any
    block: Any
    smem: Any


@contextmanager
def kernel_calls() -> Iterator[list[KernelCall]]:
    """Inside the block, calling any :class:`gemmlab.Kernel` appends a :class:`KernelCall` instead of launching."""
    from gemmlab.running.kernel import Kernel

    calls: list[KernelCall] = []

    def write_down(kernel: Any, *args: Any, grid: Any, block: Any, smem: Any = 0, **_launch_options: Any) -> None:
        calls.append(KernelCall(kernel, args, grid, block, smem))

    with _SWAP:
        launch = Kernel.__dict__["__call__"]
        Kernel.__call__ = write_down  # type: ignore[method-assign]
        try:
            yield calls
        finally:
            Kernel.__call__ = launch  # type: ignore[method-assign]


def stand_ins(shape: tuple[int, int, int], convention: str, dtype: Any, out_dtype: Any,
              pad: int = 0) -> tuple[Any, Any, Any]:
    """``(A, B, out)`` on torch's meta device, laid out as check_gemm and bench_gemm lay out theirs (row-major,
    each row ``pad`` elements longer than the matrix when the check pads them)."""
    import torch

    M, N, K = shape

    def matrix(rows: int, cols: int, dt: Any) -> Any:
        return torch.empty_strided((rows, cols), (cols + pad, 1), dtype=dt, device="meta")

    return matrix(M, K, dtype), matrix(*((N, K) if convention == "tn" else (K, N)), dtype), matrix(M, N, out_dtype)


def student_options(options: tuple[str, ...], arch: str) -> tuple[str, ...]:
    """The options the student passed to gemmlab.compile: the full NVRTC line without gemmlab's own leading part."""
    from gemmlab.compiling.job import DEFAULT_STD
    from gemmlab.compiling.nvrtc import build_options

    own = set(build_options(arch, (), (), DEFAULT_STD))
    start = 0
    while start < len(options) and (options[start] in own or options[start].startswith(("--include-path=", "-std="))):
        if options[start].startswith("-std=") and options[start] != f"-std={DEFAULT_STD}":
            raise UnsendableCallError(f"kernel compiled with {options[start]}: the pool compiles with "
                                      f"-std={DEFAULT_STD}; compile without std= to run it there.")
        start += 1
    return tuple(options[start:])


#: How a recording names the tensors it passes: the GEMM's operands, or a copy's.
GEMM_TENSORS = "A, B or the output"
COPY_TENSORS = "src, dst or the who map"


def _argument(value: Any, position: int, operands: dict[int, str], tensors: str = GEMM_TENSORS) -> str | int | float:
    import torch

    if value is None:                       # a null pointer, as Kernel passes None (the judge passes one too)
        return NULL
    if isinstance(value, torch.Tensor):
        if id(value) not in operands:
            raise UnsendableCallError(
                f"argument {position} of the kernel is a tensor that is not {tensors} itself (a view, copy, "
                f"scratch buffer or new tensor). The pool gives the kernel only the call's tensors ({tensors}): "
                "pass them to the kernel directly.")
        return operands[id(value)]
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UnsendableCallError(f"argument {position} of the kernel is a {type(value).__name__}: the pool passes "
                                  "only the tensors and numbers (ints, floats).")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def gemm_probes(shape: tuple[int, int, int], convention: str, dtype: Any, out_dtype: Any, pad: int = 0,
            offset: int = 0) -> list[Any]:
    """The stand-ins as CPU tensors at distinct addresses (what a DSL recording relocates from), aligned, or
    ``offset`` elements past alignment as the check will place them."""
    from ..dsl.recording import probe

    return [probe(t.shape, t.stride(), t.dtype, offset * t.element_size())
            for t in stand_ins(shape, convention, dtype, out_dtype, pad)]


def record(fn: Callable[..., Any], shape: tuple[int, int, int], convention: str, dtype: Any, out_dtype: Any,
           alpha: float = 1.0, beta: float = 0.0, pad: int = 0, offset: int = 0) -> Recording | DslRecording:
    """Call ``fn`` once on stand-ins of ``shape`` (rows padded by ``pad`` and starts shifted by ``offset``, as the
    check will place them) and return its launches as data.

    A GemmlabError the function raises itself (a LaunchError of its own checks, a bad grid)
    passes through, as a local check reports it for that shape; anything that cannot be sent
    is a :class:`UnsendableCallError`.
    """
    A, B, out = probes = gemm_probes(shape, convention, dtype, out_dtype, pad, offset)
    call_args = (A, B, out) if convention == "tn" else (A, B, out, alpha, beta)
    return _record(fn, call_args, probes, shape, "your GEMM function", GEMM_TENSORS, DATA_MOVEMENT)


def copy_probes(shape: tuple[int, int], dtype: Any, transpose: bool) -> list[Any]:
    """A copy's stand-ins in recorded order (src, who map, dst), as CPU tensors at distinct aligned addresses; the
    who map's place holds a 4-element placeholder when the copy has none (the judge passes the same)."""
    import torch

    from ..dsl.recording import probe

    M, N = shape
    dst = (N, M) if transpose else (M, N)
    return [probe((M, N), (N, 1), dtype, 0), probe((M, N), (N, 1), torch.int32, 0), probe(dst, (dst[1], 1), dtype, 0)]


def record_copy(fn: Callable[..., Any], shape: tuple[int, int], dtype: Any, transpose: bool = False,
                who: bool = False) -> Recording | DslRecording:
    """Call a copy function ``fn(src, dst[, who])`` once on stand-ins of ``shape`` (M, N) and return its launch as
    data, under the problem size (M, N, 1). Torch copies in ``fn`` are refused: the kernel must move the data."""
    src, owner, dst = probes = copy_probes(shape, dtype, transpose)
    if not who:
        from ..dsl.recording import probe
        import torch

        probes[1] = probe((4,), (1,), torch.int32, 0)
    call_args = (src, dst, owner) if who else (src, dst)
    return _record(fn, call_args, probes, (shape[0], shape[1], 1), "your copy function", COPY_TENSORS, NO_COPIES)


def _record(fn: Callable[..., Any], call_args: tuple[Any, ...], probes: list[Any], shape: tuple[int, int, int],
            what: str, tensors: str, allowed: frozenset[str]) -> Recording | DslRecording:
    """Call ``fn(*call_args)`` with kernel launches written down; ``probes`` are the three tensors in role order
    (A, B, out), ``what`` and ``tensors`` name the function and its tensors in messages."""
    from ..dsl.host_recording import H100_ATTRIBUTES
    from ..dsl.host_recording import HostRecordingError
    from ..dsl.recording import recording
    from gemmlab.running.kernel import Kernel

    try:
        with kernel_calls() as calls, library_guard(True, allowed) as computed, \
                recording(POOL_ARCH, H100_ATTRIBUTES, probes) as dsl:
            fn(*call_args)
    except HostRecordingError as exc:
        raise UnsendableCallError(f"{what} cannot be sent to the pool: {exc}") from None
    except GemmlabError:
        raise
    except Exception as exc:
        raise UnsendableCallError(
            f"{what} raised {type(exc).__name__}: {str(exc)[:300]} while its launch was recorded for the "
            "pool. It runs here on stand-in tensors that hold no data (torch's meta device), on a machine without "
            "a GPU: it may read shapes, dtypes and strides and call a gemmlab Kernel, nothing that needs the "
            "values or CUDA.") from None
    launched_dsl = any(step["op"] == "launch" for step in dsl.steps)
    if launched_dsl and calls:
        raise UnsendableCallError(f"{what} launched a C++ kernel and a CuTe DSL kernel in one call; the pool "
                                  "runs one kind per call.")
    if computed and (not launched_dsl or allowed is not DATA_MOVEMENT):
        raise UnsendableCallError(
            f"{what} {'computes' if allowed is DATA_MOVEMENT else 'copies or computes'} with torch "
            f"({', '.join(sorted(set(computed)))}); the pool runs only "
            "the kernel your function launches, so the result must come from that kernel alone.")
    if launched_dsl:
        try:
            return DslRecording(tuple(shape), dsl.plan())  # type: ignore[arg-type]
        except HostRecordingError as exc:
            raise UnsendableCallError(f"{what} cannot be sent to the pool: {exc}") from None
    if not calls:
        raise UnsendableCallError(
            f"{what} launched no kernel compiled with gemmlab, so there is nothing to send to the pool. "
            "The pool runs C++ kernels launched as kernel(tensors..., grid=..., block=...) and CuTe DSL kernels "
            "made with gemmlab.dsl.compile or gemmlab.dsl.gemm_fn; torch-only functions run only on a local GPU.")
    if len(calls) > 1:
        raise UnsendableCallError(f"{what} launched kernels {len(calls)} times in one call; the pool runs "
                                  "one kernel launch per call.")
    (call,) = calls
    kernel = call.kernel
    if not isinstance(kernel, Kernel):
        raise UnsendableCallError("the launched kernel is not a gemmlab.Kernel from gemmlab.compile.")
    grid, block = validate_launch(call.grid, call.block, call.smem, LaunchLimits(), name=kernel.name)
    A, B, out = probes
    roles = {id(A): "A", id(B): "B", id(out): "out"}
    args = tuple(_argument(v, i, roles, tensors) for i, v in enumerate(call.args))
    try:
        check_positional(kernel.params, args, kernel.name)
        launch = RecordedLaunch(tuple(shape), grid, block, int(call.smem), args)  # type: ignore[arg-type]
    except JudgeError as exc:
        raise UnsendableCallError(f"the pool cannot run this launch: {exc}") from None
    return Recording(KernelSource(kernel.source, kernel.name, student_options(kernel.options, kernel.arch),
                                  kernel.arch), launch)


__all__ = ["DslRecording", "KernelCall", "KernelSource", "POOL_ARCH", "Recording", "copy_probes", "gemm_probes", "kernel_calls", "record",
           "record_copy", "stand_ins", "student_options"]
