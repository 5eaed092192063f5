"""The GPU and its CUDA context, as the rest of gemmlab reaches them.

torch owns the CUDA context (the device's primary context); gemmlab's driver calls (module loads,
launches, events) must run in that same context, or pointers from torch tensors would be invalid in
them. :func:`torch_device` and :func:`ensure_context` make that so. :func:`device_attributes` reads
the limits a launch is checked against, once per device. :func:`checked` is how every driver call
here reports failure: through :mod:`gemmlab.running.faults`, so a sticky error marks the context lost.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gemmlab.running import faults


def driver() -> Any:
    """The ``cuda.bindings.driver`` module (imported on first use: it loads libcuda)."""
    from cuda.bindings import driver as _driver

    return _driver


def checked(ret: Any, what: str) -> Any:
    """The value(s) of a cuda.bindings call's return tuple; a failed ``CUresult`` raises the
    gemmlab error for it (:func:`gemmlab.running.faults.error_for`), ``what`` naming the action."""
    if isinstance(ret, tuple):
        result, values = ret[0], ret[1:]
    else:
        result, values = ret, ()
    if faults.result_name(result) != "CUDA_SUCCESS":
        raise faults.error_for(result, what)
    if not values:
        return None
    return values[0] if len(values) == 1 else values


_contexts: dict[int, Any] = {}


def ensure_context(index: int) -> None:
    """Make device ``index``'s primary context (the one torch uses) current on this thread."""
    d = driver()
    checked(d.cuInit(0), "initialising the CUDA driver")
    ctx = _contexts.get(index)
    if ctx is None:
        dev = checked(d.cuDeviceGet(index), "finding the GPU")
        ctx = checked(d.cuDevicePrimaryCtxRetain(dev), "opening the GPU's context")
        _contexts[index] = ctx
    current = checked(d.cuCtxGetCurrent(), "reading the current CUDA context")
    if current is None or int(current) != int(ctx):
        checked(d.cuCtxSetCurrent(ctx), "selecting the GPU's context")


def device_label(dev: Any) -> str:
    """What a local result says it ran on: the GPU's name, as the pool's results say, or ``"cpu"``.
    Why: "cuda:0" tells a student nothing, and a local and a pool number should name GPUs alike."""
    import torch

    d = torch.device(dev)
    return torch.cuda.get_device_name(d) if d.type == "cuda" else str(d)


def torch_device() -> Any:
    """Torch's current CUDA device, with torch's CUDA initialised and its context current here."""
    import torch

    torch.cuda.init()
    index = torch.cuda.current_device()
    ensure_context(index)
    return torch.device("cuda", index)


@dataclass(frozen=True)
class DeviceAttributes:
    """What one GPU allows a launch, and the sizes timing needs (L2 to flush)."""

    max_smem_optin: int                      #: largest opt-in dynamic shared memory per block (bytes)
    max_block_dims: tuple[int, int, int]
    max_grid_dims: tuple[int, int, int]
    sm_count: int
    l2_bytes: int


_attributes: dict[int, DeviceAttributes] = {}


def device_attributes(index: int) -> DeviceAttributes:
    """Device ``index``'s launch limits and cache size, queried from the driver once."""
    if index not in _attributes:
        d = driver()
        A = d.CUdevice_attribute
        dev = checked(d.cuDeviceGet(index), "finding the GPU")

        def get(attr: Any) -> int:
            return int(checked(d.cuDeviceGetAttribute(attr, dev), "querying the GPU"))

        _attributes[index] = DeviceAttributes(
            max_smem_optin=get(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            max_block_dims=(get(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), get(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                            get(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)),
            max_grid_dims=(get(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), get(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
                           get(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)),
            sm_count=get(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
            l2_bytes=get(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
        )
    return _attributes[index]


#: Device attribute numbers (CUdevice_attribute, equal to cudaDeviceAttr) a recording may ask about.
RAW_ATTRIBUTE_RANGE = range(1, 140)


def raw_attributes(index: int | None = None) -> dict[int, int]:
    """Every device attribute (by number) the driver answers for device ``index`` (torch's current by default).

    What a recorded CuTe DSL launch on another machine is told about this GPU (:mod:`gemmlab.dsl.recording`)."""
    import torch

    d = driver()
    dev = checked(d.cuDeviceGet(torch.cuda.current_device() if index is None else index), "finding the GPU")
    out = {}
    for number in RAW_ATTRIBUTE_RANGE:
        try:
            result, value = d.cuDeviceGetAttribute(d.CUdevice_attribute(number), dev)
        except ValueError:      # a number this driver binding does not name
            continue
        if int(result) == 0:
            out[number] = int(value)
    return out


__all__ = ["DeviceAttributes", "RAW_ATTRIBUTE_RANGE", "checked", "device_attributes", "driver", "ensure_context",
           "raw_attributes", "torch_device"]
