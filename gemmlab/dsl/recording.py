"""A call of a student's function, written down as a plan a judge can replay: its CuTe DSL launches and copies.

Why: a judge that runs no student Python must still check and time a DSL kernel. So the student's
process calls its function once on *probes*, CPU tensors with the shapes, strides, dtypes and
address alignment of the judge's operands, while

- every :class:`~gemmlab.dsl.core.DslKernel` call is recorded instead of launched
  (:mod:`.host_recording`), and
- every torch operation is watched: views and new tensors are allowed, writes are recorded as
  steps if they only move data (``copy_``, ``zero_``, ``fill_``: padding an operand, copying a
  result back), anything that computes is refused (the judge would not run it).

The plan (:meth:`DslRecorder.plan`, plain data) lists the buffers the steps touch (a probe, by its
argument number, or a tensor the function made, which the judge replaces with zeroed memory of its
own of the same size), the module images, and the steps in order: launches (geometry, attributes,
parameter bytes) and copies/fills (by buffer, byte offset, shape and strides).
"""
from __future__ import annotations

import base64
import hashlib
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from gemmlab.dtypes import dtype_name
from gemmlab.running.contract import span_bytes
from .host_recording import HostRecording, HostRecordingError

#: Alignment (bytes) a probe's address shares with the operand it stands for.
PROBE_ALIGNMENT = 512
#: Most launches and most steps one recorded call may make, and most bytes of module images it may load.
MAX_LAUNCHES = 16
MAX_STEPS = 64
MAX_IMAGE_BYTES = 32 << 20  # base64, they stay under the 64 MiB a reply may take
#: Torch operations that write and only move data: recorded as steps.
RECORDED_WRITES = {"copy_", "zero_", "fill_"}
#: Factories whose new tensor starts as the judge's scratch does (zeros) or whose contents do not matter.
ZERO_OR_EMPTY = {"zeros", "empty", "empty_strided", "empty_like", "zeros_like", "new_zeros", "new_empty",
                 "new_empty_strided", "_empty_affine_quantized"}

_ACTIVE = threading.local()


def probe(shape: Sequence[int], stride: Sequence[int], dtype: Any, address_mod: int) -> Any:
    """A CPU tensor of ``shape``/``stride``/``dtype`` whose address ≡ ``address_mod`` (mod PROBE_ALIGNMENT)."""
    import torch

    itemsize = torch.empty((), dtype=dtype).element_size()
    span = span_bytes(shape, stride, itemsize)
    raw = torch.empty(span + 2 * PROBE_ALIGNMENT, dtype=torch.uint8)
    offset = (address_mod - raw.data_ptr()) % PROBE_ALIGNMENT
    offset -= offset % itemsize
    return raw[offset:offset + span + itemsize].view(dtype).as_strided(tuple(shape), tuple(stride))


@dataclass
class DslRecorder:
    """Collects the buffers, DSL launches and copies of one recorded call."""

    arch: str
    device_attributes: Mapping[int, int]
    probes: list[Any]
    buffers: list[dict[str, Any]] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    images: dict[str, str] = field(default_factory=dict)
    tensor_maps: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for index, t in enumerate(self.probes):
            self.buffers.append({"base": t.data_ptr(), "argument": index,
                                 "nbytes": span_bytes(t.shape, t.stride(), t.element_size())})

    def buffer_of(self, t: Any) -> int:
        """Index of the buffer holding tensor ``t`` (a new scratch buffer for its storage if none does)."""
        ptr = t.data_ptr()
        for index, b in enumerate(self.buffers):
            if b["base"] <= ptr < b["base"] + max(1, b["nbytes"]):
                return index
        storage = t.untyped_storage()
        self.buffers.append({"base": storage.data_ptr(), "argument": None, "nbytes": storage.nbytes()})
        return len(self.buffers) - 1

    def region(self, t: Any) -> dict[str, Any]:
        """Where a tensor view lies: buffer, byte offset, shape, strides (elements) and dtype."""
        index = self.buffer_of(t)
        return {"buffer": index, "offset": t.data_ptr() - self.buffers[index]["base"], "shape": list(t.shape),
                "stride": list(t.stride()), "dtype": dtype_name(t.dtype)}

    def _step(self, step: dict[str, Any]) -> None:
        if len(self.steps) >= MAX_STEPS:
            raise HostRecordingError(f"the function did more than {MAX_STEPS} launches and copies in one call.")
        self.steps.append(step)

    def add_copy(self, dst: Any, src: Any) -> None:
        self._step({"op": "copy", "dst": self.region(dst), "src": self.region(src)})

    def add_fill(self, dst: Any, value: float) -> None:
        self._step({"op": "fill", "dst": self.region(dst), "value": float(value)})

    def add_launches(self, host: HostRecording, tensors: list[Any]) -> None:
        if host.problems:
            raise HostRecordingError("recording the DSL kernel's launch failed: " + "; ".join(host.problems[:5]))
        for t in tensors:
            self.buffer_of(t)       # every tensor the kernel was given is a buffer the judge provides
        keys = []
        for image in host.images:
            key = hashlib.sha256(image).hexdigest()
            if key not in self.images:
                if sum(len(v) * 3 // 4 for v in self.images.values()) + len(image) > MAX_IMAGE_BYTES:
                    raise HostRecordingError(f"the kernels' module images take more than {MAX_IMAGE_BYTES:,} bytes.")
                self.images[key] = base64.b64encode(image).decode()
            keys.append(key)
        first_map = len(self.tensor_maps)
        self.tensor_maps += [dict(m.__dict__, dims=list(m.dims), strides=list(m.strides), box=list(m.box),
                                  element_strides=list(m.element_strides)) for m in host.tensor_maps]
        for launch in host.launches:
            if sum(s["op"] == "launch" for s in self.steps) >= MAX_LAUNCHES:
                raise HostRecordingError(f"the function launched more than {MAX_LAUNCHES} kernels in one call.")
            self._step({
                "op": "launch", "image": keys[host.kernels[launch.kernel]], "kernel": launch.kernel,
                "grid": list(launch.grid), "block": list(launch.block), "smem": launch.smem,
                "attributes": [[i, v.hex()] for i, v in launch.attributes],
                "kernel_attributes": {str(k): v for k, v in host.kernel_attributes.get(launch.kernel, {}).items()},
                "params": [p.hex() for p in launch.params], "first_tensor_map": first_map,
            })

    def plan(self) -> dict[str, Any]:
        """The recorded call as plain data (:mod:`gemmlab.judge.dsl_replay` says how it is replayed)."""
        if not any(s["op"] == "launch" for s in self.steps):
            raise HostRecordingError("the function launched no CuTe DSL kernel: the judge runs only what a gemmlab "
                                     "DSL kernel (gemmlab.dsl.compile / gemm_fn) launches, so the product must come "
                                     "from it.")
        return {"version": 1, "arch": self.arch, "images": dict(self.images), "buffers": list(self.buffers),
                "steps": list(self.steps), "tensor_maps": list(self.tensor_maps)}


def _watch(recorder: DslRecorder) -> Any:
    """A torch dispatch mode that records data-moving writes and refuses computation."""
    from gemmlab.running.dispatch_watch import dispatch_watch

    def record(func: Any, args: tuple, kwargs: dict) -> Any:
        schema = func._schema
        name = schema.name.split("::")[-1]
        aliases = [r.alias_info for r in schema.returns]
        writes = any(a is not None and a.is_write for a in aliases)
        if name in ("_local_scalar_dense", "is_nonzero", "equal", "allclose"):
            raise HostRecordingError(f"your function reads the values of a tensor ({schema.name}: .item(), "
                                     "float(), a comparison) while its launches are recorded: it runs on stand-in "
                                     "tensors that hold no data, so it may read shapes, dtypes and strides only.")
        result = func(*args, **kwargs)
        if writes:
            if name == "copy_":
                recorder.add_copy(args[0], args[1])
            elif name == "zero_":
                recorder.add_fill(args[0], 0.0)
            elif name == "fill_" and not hasattr(args[1], "shape"):
                recorder.add_fill(args[0], args[1])
            else:
                raise HostRecordingError(f"your function computes with torch ({schema.name}) while its launches "
                                         "are recorded for the judge, which replays only DSL kernels and copies.")
        elif any(a is not None for a in aliases):
            pass                                       # a view: no data moves
        elif name in ZERO_OR_EMPTY:
            pass                                       # a new tensor: the judge's scratch starts zeroed
        elif name in ("full", "ones", "full_like", "ones_like", "new_full", "new_ones"):
            value = 1.0 if "ones" in name else (args[1] if name in ("full", "full_like") else args[2])
            recorder.add_fill(result, value)
        elif name in ("lift_fresh", "_to_copy", "clone") or not schema.returns:
            if name in ("_to_copy", "clone"):
                recorder.add_copy(result, args[0])
        else:
            raise HostRecordingError(f"your function computes with torch ({schema.name}) while its launches are "
                                     "recorded for the judge, which replays only DSL kernels and copies.")
        return result

    return dispatch_watch(record)


def active() -> DslRecorder | None:
    """The recorder of the call being recorded in this thread, if any."""
    return getattr(_ACTIVE, "recorder", None)


@contextmanager
def recording(arch: str, device_attributes: Mapping[int, int], probes: list[Any]) -> Iterator[DslRecorder]:
    """Inside the block, DSL kernel calls in this thread are recorded instead of launched, and torch writes watched."""
    recorder = DslRecorder(arch, device_attributes, probes)
    previous = active()
    _ACTIVE.recorder = recorder
    try:
        with _watch(recorder):
            yield recorder
    finally:
        _ACTIVE.recorder = previous


__all__ = ["DslRecorder", "MAX_IMAGE_BYTES", "MAX_LAUNCHES", "MAX_STEPS", "PROBE_ALIGNMENT", "active", "probe",
           "recording", "span_bytes"]
