"""Replay a recorded CuTe DSL launch plan on the judge's own buffers: the DSL kernel run with no student Python.

Why: the student's process records what its function launches (:mod:`gemmlab.dsl.recording`) and
sends it as plain data. Nothing in it is trusted. The judge loads the module images itself,
checks every launch against the device's limits and an allow-list of launch and kernel attributes,
and rebuilds the two kinds of addresses a launch holds over its own memory:

- a parameter word that points into a recorded buffer (an operand's probe, or a scratch buffer the
  function allocated) is moved by the same offset into the judge's tensor of that argument, or into
  zeroed scratch memory of the judge's of that size;
- a TMA descriptor the host code asked ``cuTensorMapEncodeTiled`` for (a parameter the recorder
  marked) is encoded again by the judge's driver with the recorded shape, strides, box and swizzle
  over the judge's address, after checking that everything it can reach lies inside that buffer;
  one the DSL encoded itself (as 4.8 does) is a parameter like the others, its address word moved.

Copies and fills between those buffers (padding an operand, copying a result back) are replayed
with torch on views the judge checks to lie inside their buffers. A forged plan can therefore only
run the student's own device code and data movement, as the plan says, on the judge's inputs and
output: what the judge's checks (poisoned outputs, guard zones, the reference) then see is what
that device code did.
"""
from __future__ import annotations

import base64
import ctypes
import hashlib
import struct
from dataclasses import dataclass
from typing import Any, Sequence

from gemmlab.running.contract import TENSOR_MAP_BYTES, TENSOR_MAP_MARK, TensorMapRecord as TensorMap, span_bytes
from .errors import JudgeError

#: Launch attributes a plan may carry (CUlaunchAttributeID): cooperative (off), cluster dimension,
#: cluster scheduling policy, programmatic stream serialization.
COOPERATIVE, CLUSTER_DIM, CLUSTER_POLICY, PROGRAMMATIC = 2, 4, 5, 6
#: The access-policy window (persisting L2): never run, and refused with its own reason (docs/THREAT_MODEL.md).
ACCESS_POLICY_WINDOW = 1
#: Kernel attributes a plan may set (CUfunction_attribute): dynamic shared memory, carveout,
#: non-portable cluster sizes, cluster scheduling policy.
KERNEL_ATTRIBUTES = {8, 9, 14, 15}
#: Most scratch memory a plan may ask for, and most parameter bytes of one launch.
MAX_SCRATCH_BYTES = 2 << 30
MAX_PARAM_BYTES = 32764
#: Element sizes of CUtensorMapDataType 0..12 (uint8 .. tfloat32_ftz).
TENSOR_MAP_ELEMENT_BYTES = {0: 1, 1: 2, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 4, 11: 4, 12: 4}


class PlanError(JudgeError):
    """A recorded plan the judge will not run; the message says which part and why."""


def _ints(value: Any, count: int | None, what: str, low: int = 0, high: int = 2**63 - 1) -> tuple[int, ...]:
    if not isinstance(value, list) or (count is not None and len(value) != count) or not all(
            isinstance(v, int) and not isinstance(v, bool) and low <= v <= high for v in value):
        raise PlanError(f"{what} must be a list of {count or 'some'} integers in [{low}, {high}].")
    return tuple(value)


def _hex(value: Any, what: str, limit: int) -> bytes:
    if not isinstance(value, str) or len(value) > 2 * limit:
        raise PlanError(f"{what} must be a hex string of at most {limit} bytes.")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise PlanError(f"{what} is not hex.") from None


@dataclass(frozen=True)
class Buffer:
    base: int
    nbytes: int
    argument: int | None


@dataclass(frozen=True)
class Launch:
    image: str
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    cluster: tuple[int, int, int]
    cluster_policy: int | None
    smem: int
    kernel_attributes: tuple[tuple[int, int], ...]
    params: tuple[bytes, ...]
    first_tensor_map: int


#: dtypes a copy or fill may use.
DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64")
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int8": 1, "uint8": 1, "int16": 2,
               "int32": 4, "int64": 8}


@dataclass(frozen=True)
class Region:
    buffer: int
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class Copy:
    dst: Region
    src: Region | None          # None: a fill with ``value``
    value: float = 0.0


def _region(item: Any, buffers: list[Buffer]) -> Region:
    if not isinstance(item, dict) or item.get("dtype") not in DTYPES:
        raise PlanError("a copy's region is malformed or has a dtype the judge does not copy.")
    buffer, offset = _ints([item.get("buffer"), item.get("offset")], 2, "a region's buffer and offset", 0, 2**62)
    shape = _ints(item.get("shape"), None, "a region's shape", 0, 2**40)
    stride = _ints(item.get("stride"), len(shape), "a region's strides", 0, 2**40)
    if buffer >= len(buffers) or len(shape) > 8:
        raise PlanError("a copy names a buffer the plan does not have.")
    size = DTYPE_BYTES[item["dtype"]]
    span = span_bytes(shape, stride, size)
    if offset % size or offset + span > buffers[buffer].nbytes:
        raise PlanError("a copy reaches outside its buffer (or is misaligned).")
    return Region(buffer, offset, shape, stride, item["dtype"])


def parse_plan(plan: Any, arguments: int) -> tuple[dict[str, bytes], list[Buffer], list[Launch | Copy], list[TensorMap]]:
    """Check a plan's shape and numbers (no GPU needed); ``arguments`` is how many tensors the call passed."""
    if not isinstance(plan, dict) or plan.get("version") != 1:
        raise PlanError("the recorded plan is not a version-1 plan.")
    raw_images = plan.get("images")
    if not isinstance(raw_images, dict) or not 1 <= len(raw_images) <= 8:
        raise PlanError("the plan must carry 1 to 8 module images.")
    images = {}
    for key, text in raw_images.items():
        try:
            image = base64.b64decode(text, validate=True)
        except (ValueError, TypeError):
            raise PlanError("a module image is not base64.") from None
        if hashlib.sha256(image).hexdigest() != key:
            raise PlanError("a module image does not match its hash.")
        images[key] = image
    buffers = []
    for item in plan.get("buffers") or []:
        if not isinstance(item, dict):
            raise PlanError("a buffer entry is not an object.")
        base, nbytes = _ints([item.get("base"), item.get("nbytes")], 2, "a buffer's base and size", 0, 2**64 - 1)
        argument = item.get("argument")
        if argument is not None and not (isinstance(argument, int) and 0 <= argument < arguments):
            raise PlanError(f"a buffer names argument {argument!r}; the call passed {arguments} tensors.")
        buffers.append(Buffer(base, nbytes, argument))
    if sum(b.nbytes for b in buffers if b.argument is None) > MAX_SCRATCH_BYTES:
        raise PlanError(f"the plan asks for more than {MAX_SCRATCH_BYTES >> 30} GiB of scratch memory.")
    maps = []
    for item in plan.get("tensor_maps") or []:
        if not isinstance(item, dict):
            raise PlanError("a TMA descriptor entry is not an object.")
        dims = _ints(item.get("dims"), None, "a TMA descriptor's dims", 1, 2**32)
        rank = len(dims)
        if not 1 <= rank <= 5:
            raise PlanError(f"a TMA descriptor of rank {rank}.")
        maps.append(TensorMap(
            _ints([item.get("address")], 1, "a TMA descriptor's address", 0, 2**64 - 1)[0],
            _ints([item.get("dtype")], 1, "a TMA descriptor's dtype", 0, 12)[0], dims,
            _ints(item.get("strides"), rank - 1, "a TMA descriptor's strides", 16, 2**40),
            _ints(item.get("box"), rank, "a TMA descriptor's box", 1, 256),
            _ints(item.get("element_strides"), rank, "a TMA descriptor's element strides", 1, 8),
            *_ints([item.get("interleave"), item.get("swizzle"), item.get("l2_promotion"), item.get("oob_fill")], 4,
                   "a TMA descriptor's modes", 0, 8)))
    steps: list[Launch | Copy] = []
    raw_steps = plan.get("steps")
    if not isinstance(raw_steps, list) or not 1 <= len(raw_steps) <= 64:
        raise PlanError("the plan must hold 1 to 64 steps.")
    for item in raw_steps:
        if isinstance(item, dict) and item.get("op") in ("copy", "fill"):
            value = item.get("value", 0.0)
            if item["op"] == "fill" and not isinstance(value, (int, float)):
                raise PlanError("a fill's value is not a number.")
            steps.append(Copy(_region(item.get("dst"), buffers),
                              _region(item.get("src"), buffers) if item["op"] == "copy" else None, float(value)))
            continue
        if not isinstance(item, dict) or item.get("op") != "launch" or item.get("image") not in images or \
                not isinstance(item.get("kernel"), str):
            raise PlanError("a launch does not name a kernel of one of the plan's images.")
        cluster, policy = (1, 1, 1), None
        for pair in item.get("attributes") or []:
            if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int)):
                raise PlanError("a launch attribute is malformed.")
            value = _hex(pair[1], "a launch attribute", 64)
            if pair[0] == CLUSTER_DIM:
                cluster = struct.unpack_from("<3I", value, 0)
            elif pair[0] == CLUSTER_POLICY:
                policy = struct.unpack_from("<I", value, 0)[0]
            elif pair[0] == COOPERATIVE and struct.unpack_from("<i", value, 0)[0] == 0:
                pass
            elif pair[0] == PROGRAMMATIC:
                pass                            # ordering within one stream: the judge serialises anyway
            elif pair[0] == ACCESS_POLICY_WINDOW:
                raise PlanError("a launch sets an L2 access-policy window (persisting L2), which would keep data "
                                "in L2 across the flush between timed calls: the judge refuses it. Launch without "
                                "an access policy.")
            else:
                raise PlanError(f"launch attribute {pair[0]} is not one the judge runs.")
        kernel_attributes = item.get("kernel_attributes") or {}
        if not isinstance(kernel_attributes, dict):
            raise PlanError("a launch's kernel attributes are malformed.")
        attrs = []
        for key, value in kernel_attributes.items():
            if not (str(key).isdigit() and int(key) in KERNEL_ATTRIBUTES and isinstance(value, int)):
                raise PlanError(f"kernel attribute {key} is not one the judge sets.")
            attrs.append((int(key), value))
        params = tuple(_hex(p, "a kernel parameter", MAX_PARAM_BYTES) for p in item.get("params") or [])
        if sum(len(p) for p in params) > MAX_PARAM_BYTES:
            raise PlanError(f"a launch passes more than {MAX_PARAM_BYTES} bytes of parameters.")
        first = item.get("first_tensor_map", 0)
        if not isinstance(first, int) or not 0 <= first <= len(maps):
            raise PlanError("a launch's first TMA descriptor is out of range.")
        steps.append(Launch(item["image"], item["kernel"][:4096],
                               _ints(item.get("grid"), 3, "a grid", 1, 2**31 - 1),  # type: ignore[arg-type]
                               _ints(item.get("block"), 3, "a block", 1, 1024),  # type: ignore[arg-type]
                               tuple(cluster), policy,  # type: ignore[arg-type]
                               _ints([item.get("smem")], 1, "the shared memory", 0, 1 << 20)[0],
                               tuple(attrs), params, first))
        for axis in range(3):
            if cluster[axis] < 1 or steps[-1].grid[axis] % cluster[axis]:  # type: ignore[union-attr]
                raise PlanError(f"cluster {cluster} does not divide grid {steps[-1].grid}.")  # type: ignore[union-attr]
    if not any(isinstance(step, Launch) for step in steps):
        raise PlanError("the plan launches no kernel.")
    return images, buffers, steps, maps


def footprint(tmap: TensorMap) -> int:
    """Bytes from a TMA descriptor's address to one past the last byte it can reach."""
    elem = TENSOR_MAP_ELEMENT_BYTES[tmap.dtype]
    return tmap.dims[0] * elem + sum((d - 1) * s for d, s in zip(tmap.dims[1:], tmap.strides))


def relocate(address: int, buffers: Sequence[Buffer], real: Sequence[int], reach: int = 1) -> int | None:
    """The judge's address for ``address`` (+ ``reach`` bytes) in a recorded buffer, or None if it lies in none."""
    for buffer, base in zip(buffers, real):
        if buffer.base <= address and address + reach <= buffer.base + max(buffer.nbytes, 1):
            return base + (address - buffer.base)
    return None


class Replay:
    """A parsed plan bound to the judge's GPU: modules loaded, kernels found, scratch allocated."""

    def __init__(self, plan: Any, arguments: int) -> None:
        import torch

        from gemmlab.running.device import checked, driver
        from gemmlab.running.launch import load_function

        self.images, self.buffers, self.steps, self.maps = parse_plan(plan, arguments)
        self.launches = [step for step in self.steps if isinstance(step, Launch)]
        d = driver()
        self._driver = d
        device = torch.cuda.current_device()
        self._functions = {}
        for launch in self.launches:
            key = (launch.image, launch.kernel)
            if key not in self._functions:
                loaded = load_function([("module", self.images[launch.image])], launch.kernel, launch.kernel[:60],
                                       str(plan.get("arch", "")), device)
                for attribute, value in launch.kernel_attributes:
                    checked(d.cuFuncSetAttribute(loaded.function, d.CUfunction_attribute(attribute), int(value)),
                            "setting a kernel attribute the recording set")
                self._check_params(loaded.function, launch)
                self._functions[key] = loaded
        self._scratch = [torch.zeros(max(b.nbytes, 1), dtype=torch.uint8, device="cuda") if b.argument is None else None
                         for b in self.buffers]
        self.scratch_bytes = sum(b.nbytes for b in self.buffers if b.argument is None)
        self._cache: dict[tuple[int, ...], list[Any]] = {}

    def functions(self) -> list[Any]:
        """The kernels this replay loaded (:class:`gemmlab.running.launch.LoadedFunction`)."""
        return list(self._functions.values())

    def _check_params(self, function: Any, launch: Launch) -> None:
        d = self._driver
        for index, value in enumerate(launch.params):
            result, offset, size = d.cuFuncGetParamInfo(function, index)
            if int(result) != 0 or int(size) != len(value):
                raise PlanError(f"parameter {index} of {launch.kernel[:60]} has {len(value)} bytes in the plan and "
                                f"{int(size) if int(result) == 0 else 'no'} bytes in the kernel.")
        result, _offset, _size = d.cuFuncGetParamInfo(function, len(launch.params))
        if int(result) == 0:
            raise PlanError(f"the plan passes {len(launch.params)} parameters; {launch.kernel[:60]} takes more.")

    def _encode(self, tmap: TensorMap, address: int) -> bytes:
        d = self._driver
        rank = len(tmap.dims)
        result, encoded = d.cuTensorMapEncodeTiled(
            d.CUtensorMapDataType(tmap.dtype), rank, address, list(tmap.dims), list(tmap.strides), list(tmap.box),
            list(tmap.element_strides), d.CUtensorMapInterleave(tmap.interleave), d.CUtensorMapSwizzle(tmap.swizzle),
            d.CUtensorMapL2promotion(tmap.l2_promotion), d.CUtensorMapFloatOOBfill(tmap.oob_fill))
        if int(result) != 0:
            raise PlanError(f"the driver refused a recorded TMA descriptor ({result}).")
        return bytes((ctypes.c_char * TENSOR_MAP_BYTES).from_address(encoded.getPtr()))

    def _params(self, launch: Launch, real: list[int]) -> list[Any]:
        out = []
        for value in launch.params:
            if len(value) == TENSOR_MAP_BYTES and value[:8] == TENSOR_MAP_MARK:
                index = launch.first_tensor_map + struct.unpack_from("<Q", value, 8)[0]
                if not launch.first_tensor_map <= index < len(self.maps):
                    raise PlanError("a TMA descriptor parameter names no recorded descriptor.")
                tmap = self.maps[index]
                address = relocate(tmap.address, self.buffers, real, footprint(tmap))
                if address is None:
                    raise PlanError("a TMA descriptor reaches outside every buffer the call was given.")
                value = self._encode(tmap, address)
            else:
                words = bytearray(value)
                for at in range(0, len(words) - 7, 8):
                    word, = struct.unpack_from("<Q", words, at)
                    moved = relocate(word, self.buffers, real)
                    if moved is not None:
                        struct.pack_into("<Q", words, at, moved)
                value = bytes(words)
            buf = (ctypes.c_char * max(len(value), 1)).from_buffer_copy(value or b"\0")
            out.append(buf)
        return out

    def _view(self, region: Region, backing: list[Any]) -> Any:
        import torch

        owner = backing[region.buffer]
        storage = owner.untyped_storage()
        dtype = getattr(torch, region.dtype)
        size = DTYPE_BYTES[region.dtype]
        start = owner.data_ptr() - storage.data_ptr() + region.offset
        flat = torch.empty(0, dtype=dtype, device=owner.device).set_(storage, 0, (storage.nbytes() // size,), (1,))
        return flat.as_strided(region.shape, region.stride, start // size)

    def __call__(self, tensors: Sequence[Any], stream: Any = None, grid: tuple[int, int, int] | None = None) -> None:
        """Run every step, in order, on ``stream`` (torch's current stream by default). ``grid`` replaces the grid of
        every launch (a probe that runs only the first CTAs of a kernel: :mod:`gemmlab.techniques.probe`)."""
        import torch

        from gemmlab.running.device import driver
        from gemmlab.running.launch import validate_launch
        from gemmlab.running.streams import stream_handle

        backing = [tensors[b.argument] if b.argument is not None else self._scratch[i] for i, b in enumerate(self.buffers)]
        real = [t.data_ptr() for t in backing]
        key = tuple(real)
        prepared = self._cache.get(key)
        if prepared is None:
            prepared = {}
            for index, launch in enumerate(self.steps):
                if isinstance(launch, Launch):
                    buffers = self._params(launch, real)
                    pointers = (ctypes.c_void_p * max(1, len(buffers)))(*[ctypes.addressof(b) for b in buffers])
                    prepared[index] = (buffers, pointers)
            if len(self._cache) > 64:
                self._cache.clear()
            self._cache[key] = prepared
        d = driver()
        context = torch.cuda.stream(stream) if stream is not None else torch.cuda.stream(torch.cuda.current_stream())
        with context:
            for index, step in enumerate(self.steps):
                if isinstance(step, Copy):
                    dst = self._view(step.dst, backing)
                    if step.src is None:
                        dst.fill_(step.value)
                    else:
                        dst.copy_(self._view(step.src, backing))
                    continue
                loaded = self._functions[(step.image, step.kernel)]
                dims = step.grid if grid is None else tuple(int(g) for g in grid)
                validate_launch(dims, step.block, step.smem, loaded.limits, name=step.kernel[:60])
                config = d.CUlaunchConfig()
                config.gridDimX, config.gridDimY, config.gridDimZ = dims
                config.blockDimX, config.blockDimY, config.blockDimZ = step.block
                config.sharedMemBytes = step.smem
                config.hStream = d.CUstream(stream_handle(stream))
                attrs = []
                if step.cluster != (1, 1, 1):
                    attr = d.CUlaunchAttribute()
                    attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = step.cluster
                    attrs.append(attr)
                if step.cluster_policy is not None:
                    attr = d.CUlaunchAttribute()
                    attr.id = d.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE
                    attr.value.clusterSchedulingPolicyPreference = d.CUclusterSchedulingPolicy(step.cluster_policy)
                    attrs.append(attr)
                config.attrs = attrs
                config.numAttrs = len(attrs)
                (result,) = d.cuLaunchKernelEx(config, loaded.function, ctypes.addressof(prepared[index][1]), 0)
                if int(result) != 0:
                    from gemmlab.running import faults

                    raise faults.error_for(result, f"DSL kernel {step.kernel[:60]}")


class ReplayLauncher:
    """A GEMM function over recorded plans: ``fn(A, B, D)`` ("tn") or ``fn(A, B, C, alpha, beta)`` ("nn").

    Each problem size replays the plan ``plan_for(M, N, K)`` gave for it (on torch's current stream),
    with A, B and the output as the call's three tensors; what check_gemm and bench_gemm time is that.
    """

    def __init__(self, plan_for: Any, convention: str) -> None:
        self._plan_for, self._convention = plan_for, convention
        self._replays: dict[tuple[int, int, int], Replay] = {}

    def __call__(self, A: Any, B: Any, out: Any, *scalars: Any) -> None:
        M, K = A.shape
        N = B.shape[0] if self._convention == "tn" else B.shape[1]
        self.replay((int(M), int(N), int(K)), [A, B, out])

    def modules(self) -> list[Any]:
        """The CUDA modules the replays loaded so far: where a timeline's buffer address is written."""
        return list({id(f.module): f.module for r in self._replays.values() for f in r.functions()}.values())

    def replay(self, shape: tuple[int, int, int], tensors: Sequence[Any]) -> None:
        """Replay the plan recorded for ``shape`` on ``tensors``, the call's three in recorded order."""
        if shape not in self._replays:
            self._replays[shape] = Replay(self._plan_for(*shape), 3)
        self._replays[shape](tensors)


__all__ = ["Copy", "Launch", "PlanError", "Region", "Replay", "ReplayLauncher", "footprint", "parse_plan", "relocate"]
