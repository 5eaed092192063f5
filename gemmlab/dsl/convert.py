"""Torch tensors and Python scalars -> what the CuTe DSL compiles for and runs with.

A compiled DSL function is specialised on each tensor's *signature* (dtype, rank, which
mode is contiguous, pointer/row alignment), never on its sizes: every shape and stride is
left dynamic, so check_gemm's many shapes share one compile. The same signature yields
the fake tensors we compile with (no GPU needed) and the runtime tensors we launch with.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from gemmlab.dtypes import dtype_name
from ..errors import LaunchError

#: torch dtype name -> cutlass numeric type name.
DTYPES = {
    "float16": "Float16", "bfloat16": "BFloat16", "float32": "Float32", "float64": "Float64",
    "int8": "Int8", "uint8": "Uint8", "int16": "Int16", "int32": "Int32", "int64": "Int64",
    "float8_e4m3fn": "Float8E4M3FN", "float8_e5m2": "Float8E5M2", "bool": "Boolean",
}
MAX_ALIGN = 16  # bytes: the widest vector access (128-bit)


@dataclass(frozen=True)
class TensorSig:
    """What a compiled function assumes about one tensor argument."""

    dtype: str
    rank: int
    leading: int  # the stride-1 mode ("majorness")
    order: tuple[int, ...]  # stride order, innermost = 0 (torch's dim order reversed)
    align: int  # bytes the base pointer, every row pitch and the row length are divisible by


@dataclass(frozen=True)
class ScalarSig:
    kind: str  # "int" | "float" | "bool"
    constexpr: bool
    value: Any = None  # only for constexpr parameters: baked into the code


@dataclass(frozen=True)
class StreamSig:
    pass


@dataclass(frozen=True)
class Param:
    """One parameter of the student's ``@cute.jit`` function."""

    name: str
    is_stream: bool
    is_constexpr: bool


def _unwrap(fn: Callable) -> Callable:
    return getattr(fn, "__wrapped__", fn)


def params_of(fn: Callable) -> list[Param]:
    """fn's parameters; a ``cuda.CUstream`` (or one named ``stream``) is filled in by gemmlab."""
    try:
        sig = inspect.signature(_unwrap(fn))
    except (TypeError, ValueError):
        raise LaunchError(f"{fn!r} is not a Python function: pass the @cute.jit function itself.") from None
    out = []
    for p in sig.parameters.values():
        if p.name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = p.annotation
        ann_text = ann if isinstance(ann, str) else getattr(ann, "__qualname__", repr(ann))
        ann_mod = "" if isinstance(ann, str) else getattr(ann, "__module__", "")
        is_stream = "CUstream" in str(ann_text) or "CUstream" in str(ann) or p.name == "stream"
        is_constexpr = "Constexpr" in str(ann_text) or "Constexpr" in str(ann) or "constexpr" in ann_mod
        out.append(Param(p.name, is_stream, is_constexpr))
    return out


def signature_text(fn: Callable, params: Sequence[Param]) -> str:
    shown = ", ".join(f"[{p.name}]" if p.is_stream else p.name for p in params)  # [..]: gemmlab passes it
    return f"{getattr(_unwrap(fn), '__name__', 'fn')}({shown})"


def user_params(params: Sequence[Param]) -> list[Param]:
    return [p for p in params if not p.is_stream]


def bind(fn: Callable, params: Sequence[Param], args: Sequence[Any]) -> list[tuple[Param, Any]]:
    """Pair args with parameters; the stream may be left out (gemmlab passes torch's)."""
    wanted = user_params(params)
    if len(args) == len(params) and len(wanted) != len(params):
        return list(zip(params, args))
    if len(args) != len(wanted):
        raise LaunchError(
            f"{signature_text(fn, params)} takes {len(wanted)} argument(s) but you passed {len(args)}. "
            "Pass one torch tensor or Python number per parameter, in order"
            + (" (gemmlab passes torch's current stream for you)." if len(wanted) != len(params) else ".")
        )
    it = iter(args)
    return [(p, None if p.is_stream else next(it)) for p in params]


def _largest_pow2_dividing(value: int, cap: int = MAX_ALIGN) -> int:
    align = cap
    while align > 1 and value % align:
        align //= 2
    return align


def _label(index: int, param: Param) -> str:
    return f"argument {index + 1} ('{param.name}')"


def tensor_sig(t: Any, index: int, param: Param, need_cuda: bool) -> TensorSig:
    """The signature of a torch tensor, or a LaunchError saying how to fix the tensor."""
    import torch

    label = _label(index, param)
    dtype = dtype_name(t.dtype)
    if dtype not in DTYPES:
        raise LaunchError(f"{label} has dtype {dtype}, which the CuTe DSL cannot take; use one of "
                          f"{', '.join(sorted(DTYPES))}.")
    if need_cuda and t.device.type != "cuda":
        raise LaunchError(f"{label} is a {t.device.type.upper()} tensor, but the kernel runs on the GPU: "
                          f"move it there first ({param.name}.cuda()).")
    if t.dim() == 0:
        raise LaunchError(f"{label} is a 0-d tensor: pass a Python number instead ({param.name}.item()).")
    strides, sizes = t.stride(), t.shape
    ones = [d for d in range(t.dim()) if strides[d] == 1]
    # One mode of stride 1 and no two elements sharing memory: a transposed view (the other
    # majorness) and rows padded apart (torch.randn(M, K + 8)[:, :K]) are fine, because the
    # kernel gets the strides in its layout. Expanded (stride 0) or overlapping views are not.
    order_desc = sorted(range(t.dim()), key=lambda d: (strides[d], sizes[d]), reverse=True)
    span, disjoint = 1, True
    for d in reversed(order_desc):
        if sizes[d] != 1 and strides[d] < span:
            disjoint = False
        span = max(span, strides[d] * sizes[d]) if sizes[d] != 1 else span
    if not ones or not disjoint:
        raise LaunchError(
            f"{label} is not contiguous (shape {tuple(sizes)}, strides {tuple(strides)}): the kernel needs "
            f"one dimension of stride 1 and no element stored twice. Pass {param.name}.contiguous()."
        )
    leading = t.dim() - 1 if strides[-1] == 1 else ones[-1]
    esize = t.element_size()
    pitch_bytes = [strides[d] * esize for d in range(t.dim()) if d != leading and sizes[d] > 1]
    # The row length too: then align-byte vectors tile every row exactly. With two rows or more
    # the pitch already says so; a one-row tensor (M == 1) has no pitch that would.
    pitch_bytes.append(sizes[leading] * esize)
    ptr = t.data_ptr()
    if ptr % esize:
        raise LaunchError(f"{label} starts at address {ptr:#x}, not a multiple of its element size "
                          f"({esize} B): it is a misaligned view. Pass {param.name}.clone().")
    align = _largest_pow2_dividing(ptr)
    for p in pitch_bytes:
        align = min(align, _largest_pow2_dividing(p))
    align = max(align, min(esize, MAX_ALIGN))
    # Innermost = 0: the leading mode first, then by increasing stride.
    rest = sorted((d for d in range(t.dim()) if d != leading), key=lambda d: (strides[d], -d))
    order = [0] * t.dim()
    for rank, d in enumerate([leading, *rest]):
        order[d] = rank
    return TensorSig(dtype, t.dim(), leading, tuple(order), align)


def scalar_sig(value: Any, index: int, param: Param) -> ScalarSig:
    if isinstance(value, bool):
        kind = "bool"
    elif isinstance(value, int):
        kind = "int"
    elif isinstance(value, float):
        kind = "float"
    else:
        if param.is_constexpr:
            return ScalarSig("object", True, repr(value))
        raise LaunchError(f"{_label(index, param)} is a {type(value).__name__}; pass a torch tensor, "
                          "an int, a float or a bool.")
    return ScalarSig(kind, param.is_constexpr, value if param.is_constexpr else None)


def signature(bound: Sequence[tuple[Param, Any]], need_cuda: bool,
              dtypes: dict[str, str] | None = None, min_align: int | None = None) -> tuple:
    """Validate every argument and return the hashable signature used as the cache key."""
    import torch

    sigs: list[Any] = []
    for index, (param, value) in enumerate(bound):
        if param.is_stream:
            sigs.append(StreamSig())
            continue
        if isinstance(value, torch.Tensor):
            sig = tensor_sig(value, index, param, need_cuda)
            want = (dtypes or {}).get(param.name)
            if want and want != sig.dtype:
                fix = {"float16": ".half()", "bfloat16": ".bfloat16()", "float32": ".float()"}.get(want, f".to(torch.{want})")
                raise LaunchError(f"{_label(index, param)} must be {want} but you passed a {sig.dtype} tensor: "
                                  f"use {param.name}{fix}.")
            if min_align and sig.align < min_align:
                raise LaunchError(
                    f"{_label(index, param)} is only {sig.align}-byte aligned (its start, row pitch or row length), but this "
                    f"kernel needs {min_align}-byte alignment for its vector loads: make the contiguous dimension a "
                    f"multiple of {min_align // value.element_size()} elements, or pad the tensor."
                )
            sigs.append(sig)
        else:
            sigs.append(scalar_sig(value, index, param))
    return tuple(sigs)


# ----------------------------------------------------------------- DSL-side objects


def _numeric(cutlass: Any, dtype: str) -> Any:
    return getattr(cutlass, DTYPES[dtype])


def _scalar_value(cutlass: Any, sig: ScalarSig, value: Any) -> Any:
    if sig.constexpr:
        return value
    if sig.kind == "bool":
        return cutlass.Boolean(value)
    if sig.kind == "int":
        return cutlass.Int32(value) if -2**31 <= value < 2**31 else cutlass.Int64(value)
    return cutlass.Float32(value)


def compile_args(sigs: Sequence[Any], values: Sequence[Any]) -> list[Any]:
    """Fake tensors/streams for ``cute.compile``: shapes and pitches dynamic, nothing on a GPU."""
    from .env import load

    cutlass, cute = load()
    from cutlass.cute.runtime import make_fake_stream, make_fake_tensor

    out: list[Any] = []
    for sig, value in zip(sigs, values):
        if isinstance(sig, StreamSig):
            out.append(make_fake_stream())
        elif isinstance(sig, TensorSig):
            esize = max(1, _numeric(cutlass, sig.dtype).width // 8)
            shape = tuple(cute.sym_int() for _ in range(sig.rank))
            stride = tuple(1 if d == sig.leading else cute.sym_int64(divisibility=max(1, sig.align // esize))
                           for d in range(sig.rank))
            out.append(make_fake_tensor(_numeric(cutlass, sig.dtype), shape, stride, assumed_align=sig.align))
        else:
            out.append(_scalar_value(cutlass, sig, value))
    return out


def runtime_args(sigs: Sequence[Any], values: Sequence[Any], stream: Any = None) -> list[Any]:
    """Real arguments for a compiled call: DLPack views of the tensors and ``stream`` (default: torch's current
    stream). A recording (:mod:`gemmlab.dsl.recording`) passes CPU tensors and a stand-in stream."""
    import torch
    from cuda.bindings import driver

    from .env import load

    cutlass, _ = load()
    from cutlass.cute.runtime import from_dlpack

    out: list[Any] = []
    for sig, value in zip(sigs, values):
        if isinstance(sig, StreamSig):
            if value is None:
                value = stream if stream is not None else driver.CUstream(int(torch.cuda.current_stream().cuda_stream))
            out.append(value)
        elif isinstance(sig, TensorSig):
            out.append(from_dlpack(value.detach(), assumed_align=sig.align).mark_layout_dynamic(leading_dim=sig.leading))
        elif sig.constexpr:
            continue  # baked into the compiled code; the compiled function takes no slot for it
        else:
            out.append(_scalar_value(cutlass, sig, value))
    return out
