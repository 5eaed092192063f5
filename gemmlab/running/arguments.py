"""A kernel's arguments checked against its parameter list and packed for ``cuLaunchKernel``.

Why here and not in the kernel class: a wrong argument must fail *before* anything runs, with a
sentence a student can act on ("argument 2 ('B') is `const half*` (float16) but you passed a float32
tensor") instead of a segfault, and the packing is the same for a notebook's ``Kernel`` call and for
a process that runs a compiled kernel with no student Python around it. Nothing here needs a GPU:
``device=torch.device('cpu')`` exercises the packing on CPU tensors.
"""
from __future__ import annotations

import ctypes
import math
import numbers
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Sequence

from gemmlab.dtypes import dtype_name
from gemmlab.errors import LaunchError


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
            return f"a {dtype_name(value.dtype)} tensor on {value.device}"
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
    got = dtype_name(value.dtype)
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


__all__ = ["PackedArgs", "bind_arguments", "signature_text"]
