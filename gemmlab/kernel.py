"""A compiled kernel you can call like a function on torch tensors.

Loading (``cuModuleLoadData``), argument marshalling, launch validation and CUDA
error translation live here, so a student sees "argument 2 ('B') is `const half*`
(float16) but you passed a float32 tensor" instead of a segfault or a raw CUresult.

The pure parts (:func:`bind_arguments`, :func:`validate_launch`) need no GPU, so CI
tests them; everything that touches the driver calls :func:`gemmlab.gpu.require_gpu`
first.
"""
from __future__ import annotations

import contextlib
import ctypes
import html
import math
import numbers
import re
import struct
import time
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from .errors import ContextLostError, KernelError, KernelTimeoutError, LaunchError
from .gpu import require_gpu

#: Seconds :func:`synchronize` waits by default before calling a kernel hung.
DEFAULT_TIMEOUT_S = 30.0
#: Dynamic shared memory above this needs an explicit opt-in attribute on the function.
DEFAULT_DYNAMIC_SMEM = 48 * 1024

# CUresult names after which the CUDA context is unusable ("sticky" errors).
_STICKY = {
    "CUDA_ERROR_ILLEGAL_ADDRESS": "an illegal memory access (a load or store outside any allocation)",
    "CUDA_ERROR_MISALIGNED_ADDRESS": "a misaligned address (a vector access, e.g. 16-byte, at an address that is not a multiple of its size)",
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": "an illegal instruction (e.g. an instruction this GPU does not support)",
    "CUDA_ERROR_LAUNCH_FAILED": "an unspecified launch failure (often a trap or out-of-bounds access)",
    "CUDA_ERROR_HARDWARE_STACK_ERROR": "a hardware stack error (deep recursion or a corrupted stack)",
    "CUDA_ERROR_ASSERT": "a device-side assert() failed",
    "CUDA_ERROR_INVALID_ADDRESS_SPACE": "an access through a pointer in the wrong address space (e.g. a shared-memory address used as global)",
    "CUDA_ERROR_INVALID_PC": "an invalid program counter",
    "CUDA_ERROR_ECC_UNCORRECTABLE": "an uncorrectable ECC memory error",
    "CUDA_ERROR_LAUNCH_TIMEOUT": "the kernel ran past the display watchdog's limit",
}
# Fragments of torch's messages for the same sticky errors.
_STICKY_TORCH = (
    "illegal memory access", "misaligned address", "unspecified launch failure",
    "illegal instruction", "device-side assert", "hardware stack error", "invalid program counter",
    "uncorrectable ECC",
)

_context_lost: str | None = None  # set once a sticky error was seen: every later call fails fast


# --------------------------------------------------------------------------- errors


def _lost_message(detail: str) -> str:
    return (
        f"{detail}\nThe CUDA context is now lost: every further GPU call in this Python process "
        "will fail. Restart the Python kernel (Kernel → Restart), then fix the kernel: look for an "
        "out-of-bounds index (a missing bounds check/predicate on an edge tile) or a misaligned "
        "vector access (16-byte loads need 16-byte aligned addresses and row pitches). "
        "`compute-sanitizer python script.py` names the faulting line."
    )


def _mark_lost(detail: str) -> ContextLostError:
    global _context_lost
    _context_lost = detail
    return ContextLostError(_lost_message(detail))


def _raise_if_lost() -> None:
    if _context_lost is not None:
        raise ContextLostError(_lost_message(f"an earlier kernel failed: {_context_lost}"))


def _result_name(result: Any) -> str:
    name = getattr(result, "name", None)
    return name if isinstance(name, str) else str(result)


def _result_text(result: Any) -> str:
    name = _result_name(result)
    if name in _STICKY:
        return _STICKY[name]
    try:
        from cuda.bindings import driver

        err, text = driver.cuGetErrorString(result)
        if _result_name(err) == "CUDA_SUCCESS" and text:
            return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:  # the driver may be gone; the name alone still helps
        pass
    return name


def error_for(result: Any, what: str) -> KernelError:
    """The gemmlab error for a failed CUresult; sticky ones also mark the context lost."""
    name = _result_name(result)
    detail = f"{what} failed: {_result_text(result)} ({name})"
    if name in _STICKY:
        return _mark_lost(detail)
    return KernelError(detail)


def translate_torch_error(exc: BaseException, what: str) -> BaseException:
    """Turn torch's ``RuntimeError: CUDA error: ...`` (seen after a bad kernel) into ours."""
    text = str(exc)
    if "CUDA error" not in text and not any(s in text for s in _STICKY_TORCH):
        return exc
    first = text.strip().splitlines()[0] if text.strip() else text
    if any(s in text for s in _STICKY_TORCH):
        return _mark_lost(f"{what} failed: {first}")
    return KernelError(f"{what} failed: {first}")


def _check(ret: Any, what: str) -> Any:
    """Unpack a cuda.bindings return tuple, raising on failure (LaunchError-style, no context loss)."""
    if isinstance(ret, tuple):
        result, values = ret[0], ret[1:]
    else:
        result, values = ret, ()
    if _result_name(result) != "CUDA_SUCCESS":
        raise error_for(result, what)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


# --------------------------------------------------------------------------- arguments


@dataclass
class PackedArgs:
    """Argument bytes plus the ``void*[]`` cuLaunchKernel wants; keeps the buffers alive."""

    values: list[bytes]
    _buffers: list[Any] = field(default_factory=list, repr=False)
    _array: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._buffers = [ctypes.create_string_buffer(v, max(len(v), 1)) for v in self.values]
        self._array = (ctypes.c_void_p * max(len(self.values), 1))(
            *[ctypes.addressof(b) for b in self._buffers]
        )

    @property
    def address(self) -> int:
        """Address of the pointer array (``void**``), or 0 for a kernel without parameters."""
        return ctypes.addressof(self._array) if self.values else 0


def signature_text(name: str, params: Sequence[Any]) -> str:
    """``gemm(const half* A, const half* B, half* D, int M)`` for messages."""
    return f"{name}(" + ", ".join(f"{p.ctype} {p.name}".strip() for p in params) + ")"


def _describe(value: Any) -> str:
    try:
        import torch

        if isinstance(value, torch.Tensor):
            return f"a {str(value.dtype).replace('torch.', '')} tensor on {value.device}"
    except ImportError:  # pragma: no cover
        pass
    return f"{type(value).__name__} {value!r}" if isinstance(value, (int, float, bool)) else type(value).__name__


def _arg_label(index: int, param: Any) -> str:
    return f"argument {index + 1} ('{param.name}') is `{param.ctype}`"


#: Parameter names that give a row pitch ("leading dimension"): lda, ldb, ld_c, stride_a, pitch...
_PITCH_NAME = re.compile(r"^ld(_?[a-z0-9]*)?$|(^|_)ld$|stride|pitch", re.IGNORECASE)


def _rows_padded(value: Any) -> bool:
    """Row-major with padding between rows: last dim contiguous, every other stride at least
    the extent it steps over (torch.randn(M, K + pad)[:, :K] is one)."""
    if value.dim() < 2 or value.stride(-1) != 1:
        return False
    span = value.shape[-1]
    for size, stride in zip(reversed(value.shape[:-1]), reversed(value.stride()[:-1])):
        if stride < span:
            return False
        span = stride * size
    return True


def _pack_pointer(index: int, param: Any, value: Any, device: Any, takes_pitch: bool = False) -> bytes:
    import torch

    label = _arg_label(index, param)
    if value is None:
        return struct.pack("<Q", 0)
    if not isinstance(value, torch.Tensor):
        raise LaunchError(
            f"{label} (a pointer) but you passed {_describe(value)}: pass a torch tensor on the GPU "
            "(or None for a null pointer)."
        )
    if value.device.type != "cuda" and (device is None or device.type == "cuda"):
        raise LaunchError(
            f"{label} but you passed a tensor on the {value.device.type.upper()}: the GPU cannot read "
            f"host memory — move it with {param.name}.cuda() (or create it with device='cuda')."
        )
    if device is not None and value.device != device:
        raise LaunchError(
            f"{label} and must live on {device}, but you passed a tensor on {value.device}: "
            f"use {param.name}.to('{device}')."
        )
    want = getattr(param, "dtype", None)
    got = str(value.dtype).replace("torch.", "")
    if want is not None and got != want:
        hint = {"float16": ".half()", "bfloat16": ".bfloat16()", "float32": ".float()",
                "float64": ".double()", "int32": ".int()", "int64": ".long()",
                "int8": ".to(torch.int8)", "uint8": ".to(torch.uint8)"}.get(want, f".to(torch.{want})")
        raise LaunchError(
            f"{label} ({want}) but you passed a {got} tensor: use {param.name}{hint}."
        )
    if not value.is_contiguous() and not (takes_pitch and _rows_padded(value)):
        pitch_note = ("" if takes_pitch else " (rows padded apart are accepted only by a kernel that takes "
                      "their pitch, a parameter named like lda or stride_a)")
        raise LaunchError(
            f"{label} but the tensor you passed is not contiguous (shape {tuple(value.shape)}, strides "
            f"{tuple(value.stride())}; e.g. a transpose or a slice): the kernel indexes it as a dense "
            f"row-major array{pitch_note} — pass {param.name}.contiguous()."
        )
    return struct.pack("<Q", value.data_ptr())


_DTYPE_FORMATS = {"float32": "f", "float64": "d", "float16": "e", "bfloat16": "bf16", "bool": "?"}


def _scalar_format(ctype: str, nbytes: int, dtype: str | None = None) -> str:
    """struct format for a scalar C type: 'f', 'd', 'e', 'bf16', '?', or an integer code."""
    if dtype in _DTYPE_FORMATS:
        return _DTYPE_FORMATS[dtype]
    t = ctype.replace("const", "").replace("volatile", "").strip().lower()
    if "bfloat16" in t or "bf16" in t:
        return "bf16"
    if "half" in t or t in ("__half", "float16_t"):
        return "e"
    if "double" in t:
        return "d"
    if "float" in t or "tfloat32" in t:
        return "f" if nbytes == 4 else "d"
    if t == "bool":
        return "?"
    unsigned = (t.startswith(("unsigned", "uint", "size_t", "std::size_t", "cute::uint", "std::uint"))
                or (dtype or "").startswith("uint"))
    code = {1: "b", 2: "h", 4: "i", 8: "q"}.get(nbytes)
    if code is None:
        raise LaunchError(f"gemmlab cannot pass a {nbytes}-byte scalar of type `{ctype}`.")
    return code.upper() if unsigned else code


def _bf16_bits(x: float) -> bytes:
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    if math.isnan(x):
        return struct.pack("<H", 0x7FC0)
    bits += 0x7FFF + ((bits >> 16) & 1)  # round to nearest even
    return struct.pack("<H", (bits >> 16) & 0xFFFF)


def _pack_scalar(index: int, param: Any, value: Any) -> bytes:
    label = _arg_label(index, param)
    fmt = _scalar_format(param.ctype, param.nbytes, getattr(param, "dtype", None))
    try:
        import torch

        if isinstance(value, torch.Tensor):
            raise LaunchError(
                f"{label} (a number) but you passed a tensor: pass a Python number "
                f"(e.g. {param.name}.item(), or a size such as A.shape[0])."
            )
    except ImportError:  # pragma: no cover
        pass
    if fmt == "?":
        if not isinstance(value, (bool, numbers.Integral)):
            raise LaunchError(f"{label} but you passed {_describe(value)}: pass True or False.")
        return struct.pack("<?", bool(value))
    if fmt in ("f", "d", "e", "bf16"):
        if not isinstance(value, numbers.Real) or isinstance(value, bool):
            raise LaunchError(f"{label} (a floating-point number) but you passed {_describe(value)}.")
        x = float(value)
        if fmt == "bf16":
            return _bf16_bits(x)
        try:
            return struct.pack("<" + fmt, x)
        except OverflowError:
            raise LaunchError(f"{label} but {x!r} does not fit in it (too large for this type).") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise LaunchError(
            f"{label} (an integer) but you passed {_describe(value)}: pass an int "
            f"(e.g. int({param.name}))."
        )
    bits = 8 * struct.calcsize(fmt)
    lo, hi = (0, 2**bits - 1) if fmt.isupper() else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if not lo <= int(value) <= hi:
        raise LaunchError(
            f"{label} ({bits}-bit, range {lo:,} .. {hi:,}) but you passed {int(value):,}, which overflows it: "
            "use a 64-bit type (int64_t / long long) in the kernel or a smaller value."
        )
    return struct.pack("<" + fmt, int(value))


def _pack_struct(index: int, param: Any, value: Any) -> bytes:
    label = _arg_label(index, param)
    if callable(getattr(value, "getPtr", None)):  # cuda.bindings structs, e.g. CUtensorMap
        data = ctypes.string_at(int(value.getPtr()), param.nbytes)
        return data
    if isinstance(value, ctypes.Structure):
        data = bytes(value)
    else:
        try:
            data = bytes(memoryview(value).cast("B"))
        except TypeError:
            raise LaunchError(
                f"{label} (a {param.nbytes}-byte struct passed by value) but you passed {_describe(value)}: "
                "pass bytes, a ctypes.Structure or a cuda.bindings struct such as a CUtensorMap."
            ) from None
    if len(data) != param.nbytes:
        raise LaunchError(
            f"{label} ({param.nbytes} bytes) but the object you passed is {len(data)} bytes."
        )
    return data


def bind_arguments(params: Sequence[Any], args: Sequence[Any], device: Any = None,
                   name: str = "kernel") -> PackedArgs:
    """Check ``args`` against the kernel's parameter list and pack them for cuLaunchKernel.

    ``device`` is the torch device every tensor must live on; ``None`` means "any CUDA device"
    (pass ``torch.device('cpu')`` to exercise the packing on CPU tensors in tests).
    """
    if len(args) != len(params):
        raise LaunchError(
            f"kernel '{name}' takes {len(params)} argument{'s' if len(params) != 1 else ''} but you "
            f"passed {len(args)}; its signature is {signature_text(name, params)}."
        )
    values = []
    takes_pitch = any(p.kind == "scalar" and _PITCH_NAME.search(p.name or "") for p in params)
    for index, (param, value) in enumerate(zip(params, args)):
        if param.kind == "pointer":
            values.append(_pack_pointer(index, param, value, device, takes_pitch))
        elif param.kind == "scalar":
            values.append(_pack_scalar(index, param, value))
        elif param.kind == "struct":
            values.append(_pack_struct(index, param, value))
        else:  # pragma: no cover - signature.py only produces the three kinds
            raise LaunchError(f"{_arg_label(index, param)} of unknown kind {param.kind!r}.")
    return PackedArgs(values)


# --------------------------------------------------------------------------- launch geometry


@dataclass(frozen=True)
class LaunchLimits:
    """What one kernel on one device allows; queried from the driver, or made up in tests."""

    max_threads_per_block: int = 1024          # the kernel's own limit (registers can lower it)
    registers: int = 0
    static_smem: int = 0
    max_smem_optin: int = 227 * 1024           # device: largest opt-in shared memory per block
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dims: tuple[int, int, int] = (2**31 - 1, 65535, 65535)


def _dims(value: Any, what: str) -> tuple[int, int, int]:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        dims = (int(value),)
    elif isinstance(value, (tuple, list)) and all(
        isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in value
    ):
        dims = tuple(int(v) for v in value)
    else:
        raise LaunchError(f"{what} must be an int or a tuple of up to 3 ints, not {value!r}.")
    if not 1 <= len(dims) <= 3:
        raise LaunchError(f"{what} must have 1 to 3 dimensions, not {len(dims)} ({value!r}).")
    return (dims + (1, 1))[:3]  # type: ignore[return-value]


def validate_launch(grid: Any, block: Any, smem: int, limits: LaunchLimits,
                    name: str = "kernel") -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """Reject a launch the driver would refuse (or run wrongly) with a message that says why."""
    g = _dims(grid, "grid")
    b = _dims(block, "block")
    if any(d <= 0 for d in g):
        raise LaunchError(
            f"grid={g} is empty: every grid dimension must be ≥ 1. A size computed as M // tile is 0 "
            "when M < tile — use ceil_div(M, tile) = (M + tile - 1) // tile."
        )
    if any(d <= 0 for d in b):
        raise LaunchError(f"block={b} has a zero (or negative) dimension: every block dimension must be ≥ 1.")
    threads = b[0] * b[1] * b[2]
    if threads > 1024:
        raise LaunchError(f"block={b} has {threads} threads; a block can have at most 1024.")
    for axis, (d, m) in enumerate(zip(b, limits.max_block_dims)):
        if d > m:
            raise LaunchError(f"block dimension {'xyz'[axis]} = {d} is over the GPU's limit of {m}.")
    if threads > limits.max_threads_per_block:
        cap = limits.max_threads_per_block
        if limits.registers and limits.registers * threads > 65536:
            why = (f"it uses {limits.registers} registers per thread and an SM has 65,536 registers. Use a "
                   "smaller block, or make the kernel use fewer registers (__launch_bounds__(threads) tells "
                   "the compiler the block size to fit)")
        else:
            why = f"its __launch_bounds__ (.maxntid) says {cap}: launch {cap} threads or change the bound"
        raise LaunchError(f"block={b} has {threads} threads, but kernel '{name}' can run at most {cap} per block: {why}.")
    for axis, (d, m) in enumerate(zip(g, limits.max_grid_dims)):
        if d > m:
            raise LaunchError(
                f"grid dimension {'xyz'[axis]} = {d:,} is over the GPU's limit of {m:,}"
                + (" (only x may be large: put the big dimension in grid x)." if axis else ".")
            )
    if not isinstance(smem, numbers.Integral) or smem < 0:
        raise LaunchError(f"smem must be a number of bytes ≥ 0, not {smem!r}.")
    room = limits.max_smem_optin - limits.static_smem
    if smem > room:
        raise LaunchError(
            f"smem={smem:,} bytes of dynamic shared memory is too much: this GPU allows "
            f"{limits.max_smem_optin:,} bytes per block and the kernel already declares "
            f"{limits.static_smem:,} bytes statically, leaving {room:,}. Use smaller tiles or fewer stages."
        )
    return g, b


# --------------------------------------------------------------------------- driver plumbing


def _driver() -> Any:
    from cuda.bindings import driver

    return driver


def _torch_device() -> Any:
    """Torch's current CUDA device, with torch's CUDA initialised and its context current here."""
    import torch

    torch.cuda.init()
    index = torch.cuda.current_device()
    _ensure_context(index)
    return torch.device("cuda", index)


_contexts: dict[int, Any] = {}


def _ensure_context(index: int) -> None:
    """Make the device's primary context (the one torch uses) current on this thread."""
    d = _driver()
    _check(d.cuInit(0), "initialising the CUDA driver")
    ctx = _contexts.get(index)
    if ctx is None:
        dev = _check(d.cuDeviceGet(index), "finding the GPU")
        ctx = _check(d.cuDevicePrimaryCtxRetain(dev), "opening the GPU's context")
        _contexts[index] = ctx
    current = _check(d.cuCtxGetCurrent(), "reading the current CUDA context")
    if current is None or int(current) != int(ctx):
        _check(d.cuCtxSetCurrent(ctx), "selecting the GPU's context")


_device_limits: dict[int, dict[str, Any]] = {}


def _device_attrs(index: int) -> dict[str, Any]:
    if index not in _device_limits:
        d = _driver()
        A = d.CUdevice_attribute
        dev = _check(d.cuDeviceGet(index), "finding the GPU")

        def get(attr: Any) -> int:
            return int(_check(d.cuDeviceGetAttribute(attr, dev), "querying the GPU"))

        _device_limits[index] = {
            "max_smem_optin": get(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            "max_block_dims": (get(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), get(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                               get(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)),
            "max_grid_dims": (get(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), get(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                              get(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)),
            "sm_count": get(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            "l2_bytes": get(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        }
    return _device_limits[index]


def _stream_handle(stream: Any) -> Any:
    """A CUstream for ``stream`` (torch stream, CUstream, int handle) or torch's current stream."""
    d = _driver()
    if stream is None:
        import torch

        return d.CUstream(torch.cuda.current_stream().cuda_stream)
    if isinstance(stream, d.CUstream):
        return stream
    handle = getattr(stream, "cuda_stream", stream)
    return d.CUstream(int(handle))


def synchronize(timeout_s: float = DEFAULT_TIMEOUT_S, stream: Any = None, what: str = "the GPU work") -> None:
    """Wait for ``stream`` (default: torch's current stream) but give up after ``timeout_s``.

    A blind ``torch.cuda.synchronize()`` on a deadlocked kernel freezes the notebook forever;
    polling an event lets us tell the student what probably happened instead.
    """
    require_gpu("Waiting for a kernel")
    _raise_if_lost()
    _torch_device()
    d = _driver()
    handle = _stream_handle(stream)
    event = _check(d.cuEventCreate(int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)), what)
    try:
        _check(d.cuEventRecord(event, handle), what)
        deadline = time.monotonic() + timeout_s
        pause = 1e-5
        while True:
            (result,) = d.cuEventQuery(event)
            name = _result_name(result)
            if name == "CUDA_SUCCESS":
                return
            if name != "CUDA_ERROR_NOT_READY":
                raise error_for(result, what)
            if time.monotonic() > deadline:
                raise KernelTimeoutError(
                    f"{what} did not finish in {timeout_s:g} s — a deadlock on a barrier (e.g. "
                    "__syncthreads() inside a branch not all threads take, or waiting on an mbarrier/flag "
                    "that is never signalled) or an endless loop? The GPU is still busy with it: restart "
                    "the Python kernel (Kernel → Restart) before running anything else on the GPU."
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
    finally:
        if _context_lost is None:
            d.cuEventDestroy(event)


_private_streams: dict[int, Any] = {}


def _private_stream(index: int) -> Any:
    """A non-blocking CUDA stream of gemmlab's own on device ``index``, as a torch stream.

    Why not ``torch.cuda.Stream()``: torch hands out its streams round-robin from a pool of 32
    per device, so a "fresh" torch stream can be the very stream a student's function queued
    work on, and a snapshot queued on it would wait for that work. This stream is created once
    with the driver and is never in torch's pool.
    """
    import torch

    stream = _private_streams.get(index)
    if stream is None:
        d = _driver()
        _torch_device()
        handle = _check(d.cuStreamCreate(int(d.CUstream_flags.CU_STREAM_NON_BLOCKING)),
                        "creating a CUDA stream")
        stream = torch.cuda.ExternalStream(int(handle), device=torch.device("cuda", index))
        _private_streams[index] = stream
    return stream


@contextlib.contextmanager
def watched_stream() -> Iterator[Any]:
    """Make gemmlab's private stream torch's current stream for the ``with`` body.

    Why: torch's default stream is CUDA's legacy default stream, which synchronizes with every
    blocking stream, so a snapshot taken on it right after a student's function returns could
    wait for work the function left running on a side stream, and "finished when it returned"
    could not be checked. A stream of our own, which no student code was given, runs the
    snapshot as soon as the work queued on it is done; the GPU test of a side-stream launch
    (tests/test_gpu_grading.py) checks this.
    """
    import torch

    fresh = _private_stream(torch.cuda.current_device())
    fresh.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(fresh):
        yield fresh
    torch.cuda.current_stream().wait_stream(fresh)


def call_and_snapshot(call: Any, tensor: Any, timeout_s: float, what: str) -> tuple[Any, Any]:
    """``(call(), copy of tensor as it stood when call returned)``, with all GPU work then finished.

    The call runs on :func:`watched_stream`; the snapshot buffer is allocated before it, so
    nothing between its return and the copy can wait on the GPU. A snapshot that differs from
    ``tensor`` afterwards means the call left work running on another stream.
    """
    import torch

    with watched_stream():
        snapshot = torch.empty_like(tensor)
        returned = call()
        snapshot.copy_(tensor)
        synchronize(timeout_s=timeout_s, what=what)
    torch.cuda.synchronize()
    return returned, snapshot


def check_errors(timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Surface any error from kernels already launched on the current stream (kernels run async)."""
    synchronize(timeout_s=timeout_s, what="a kernel launched earlier")


# --------------------------------------------------------------------------- Kernel


@dataclass
class _Loaded:
    module: Any
    function: Any
    limits: LaunchLimits
    dynamic_smem_opt_in: int = DEFAULT_DYNAMIC_SMEM


class Kernel:
    """A compiled kernel: inspect it (``.ptx``, ``.resources``, ``.sass()``) or launch it."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self._loaded: dict[int, _Loaded] = {}

    # ---- what the compiler produced
    name = property(lambda self: self.compiled.name)
    lowered_name = property(lambda self: self.compiled.lowered_name)
    arch = property(lambda self: self.compiled.arch)
    source = property(lambda self: self.compiled.source)
    options = property(lambda self: self.compiled.options)
    ptx = property(lambda self: self.compiled.ptx)
    cubin = property(lambda self: self.compiled.cubin)
    log = property(lambda self: self.compiled.log)
    params = property(lambda self: self.compiled.params)
    resources = property(lambda self: self.compiled.resources)
    compile_seconds = property(lambda self: self.compiled.compile_seconds)
    cached = property(lambda self: self.compiled.cached)

    @property
    def signature(self) -> str:
        return signature_text(self.name, self.params)

    def __repr__(self) -> str:
        return f"<Kernel {self.signature} for {self.arch}>"

    # ---- loading
    def _load(self) -> tuple[Any, _Loaded]:
        device = _torch_device()
        index = device.index
        if index in self._loaded:
            return device, self._loaded[index]
        d = _driver()
        module = None
        errors = []
        for label, image in (("cubin", self.cubin), ("PTX", (self.ptx or "").encode() + b"\0")):
            if not image or image == b"\0":
                continue
            buf = ctypes.create_string_buffer(bytes(image), len(image))
            result, mod = d.cuModuleLoadData(ctypes.addressof(buf))
            if _result_name(result) == "CUDA_SUCCESS":
                module = mod
                break
            if _result_name(result) in _STICKY:
                raise error_for(result, f"loading kernel '{self.name}'")
            errors.append(f"{label}: {_result_text(result)}")
        if module is None:
            from .gpu import current_arch

            raise LaunchError(
                f"kernel '{self.name}' was compiled for {self.arch}, and this GPU ({current_arch()}) cannot "
                f"load it ({'; '.join(errors)}). Recompile with arch=None to target this GPU."
            )
        function = _check(d.cuModuleGetFunction(module, self.lowered_name.encode()),
                          f"finding kernel '{self.name}' in its module")
        F = d.CUfunction_attribute

        def attr(a: Any) -> int:
            return int(_check(d.cuFuncGetAttribute(a, function), "querying the kernel"))

        dev = _device_attrs(index)
        limits = LaunchLimits(
            max_threads_per_block=attr(F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
            registers=attr(F.CU_FUNC_ATTRIBUTE_NUM_REGS),
            static_smem=attr(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
            max_smem_optin=dev["max_smem_optin"],
            max_block_dims=dev["max_block_dims"],
            max_grid_dims=dev["max_grid_dims"],
        )
        loaded = _Loaded(module, function, limits)
        self._loaded[index] = loaded
        return device, loaded

    def limits(self) -> LaunchLimits:
        """This kernel's launch limits on the current GPU (loads the module)."""
        require_gpu(f"Loading kernel '{self.name}'")
        _raise_if_lost()
        return self._load()[1].limits

    # ---- launching
    def __call__(self, *args: Any, grid: Any, block: Any, smem: int = 0, stream: Any = None,
                 sync: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Launch on torch's current stream (or ``stream``); ``sync=True`` waits and reports errors."""
        require_gpu(f"Running kernel '{self.name}'")
        _raise_if_lost()
        device, loaded = self._load()
        packed = bind_arguments(self.params, args, device=device, name=self.name)
        g, b = validate_launch(grid, block, smem, loaded.limits, name=self.name)
        d = _driver()
        if smem > loaded.dynamic_smem_opt_in:
            _check(d.cuFuncSetAttribute(loaded.function,
                                        d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        int(smem)),
                   f"allowing kernel '{self.name}' {smem:,} bytes of dynamic shared memory")
            loaded.dynamic_smem_opt_in = int(smem)
        handle = _stream_handle(stream)
        (result,) = d.cuLaunchKernel(loaded.function, *g, *b, int(smem), handle, packed.address, 0)
        name = _result_name(result)
        if name != "CUDA_SUCCESS":
            if name == "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES":
                raise LaunchError(
                    f"kernel '{self.name}' could not launch with block={b}: it needs more registers or shared "
                    f"memory than one SM has ({loaded.limits.registers} registers per thread × "
                    f"{b[0] * b[1] * b[2]} threads). Use a smaller block or fewer registers."
                )
            if name in _STICKY:
                raise error_for(result, f"kernel '{self.name}'")
            raise LaunchError(f"kernel '{self.name}' could not launch: {_result_text(result)} ({name}).")
        if sync:
            synchronize(timeout_s=timeout_s, stream=stream, what=f"kernel '{self.name}'")

    # ---- inspection
    def max_active_blocks(self, block: Any, smem: int = 0) -> int:
        """Blocks of this size that fit on one SM at once (occupancy), from the driver."""
        require_gpu("Computing occupancy")
        _raise_if_lost()
        _, loaded = self._load()
        b = _dims(block, "block")
        d = _driver()
        return int(_check(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(loaded.function, b[0] * b[1] * b[2], int(smem)),
                          "computing occupancy"))

    def sass(self) -> str:
        """The GPU machine code (SASS) of the cubin (gemmlab.sass: nvdisasm or cuobjdump)."""
        from .sass import disassemble

        return disassemble(self.cubin, self.name)

    def _repr_html_(self) -> str:
        r = self.resources
        rows = [("signature", html.escape(self.signature)), ("arch", html.escape(str(self.arch)))]
        if r is not None:
            rows += [
                ("registers / thread", getattr(r, "registers", "?")),
                ("static shared memory", f"{getattr(r, 'static_smem_bytes', 0):,} B"),
                ("spills (store / load)", f"{getattr(r, 'spill_stores_bytes', 0)} B / {getattr(r, 'spill_loads_bytes', 0)} B"),
                ("max threads / block", getattr(r, "max_threads_per_block", "?")),
            ]
        rows.append(("compile", "cached" if self.cached else f"{self.compile_seconds:.1f} s"))
        body = "".join(f"<tr><th style='text-align:left'>{k}</th><td style='text-align:left'>{v}</td></tr>" for k, v in rows)
        return f"<table><caption>Kernel <code>{html.escape(self.name)}</code></caption>{body}</table>"
