"""What a compiled CuTe DSL function launches, written down as data by running its host code without a GPU.

Why: a CuTe DSL kernel is built by the student's Python, so a process that must run no student
Python (the grader's judge, the shared GPU pool) cannot build it. But everything it needs to launch
the kernel is data: the cubin, the kernel's name, the grid, block, cluster and shared memory, and
the bytes of each kernel parameter. The DSL exports the host code that computes them as an object
file (``export_to_c``). This module loads that object (:mod:`gemmlab.running.elf_object`) against a
CUDA runtime of its own, a handful of Python functions with the signatures of the ones the DSL's
host code calls (``cudaLibraryLoadData``, ``cudaLibraryGetKernel``, ``cudaLaunchKernelEx``,
``cuTensorMapEncodeTiled``, attribute queries). They answer queries from a table of the target
GPU's attributes, and write down the launch and every TMA descriptor instead of making them.

Nothing recorded here is trusted: the process that records also ran the student's Python. A
recording only says which device code to run and how to launch it; the judge that replays it
(:mod:`gemmlab.judge.dsl_replay`) rebuilds pointers and TMA descriptors over its own buffers and
checks every number, so a forged recording can only launch the student's own device code wrongly.
"""
from __future__ import annotations

import ctypes
import re
import struct
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..errors import GemmlabError
from gemmlab.running.contract import TENSOR_MAP_BYTES, TENSOR_MAP_MARK, TensorMapRecord
from gemmlab.running.elf_object import ElfObjectError, LoadedObject

#: cudaLaunchAttribute: 4-byte id, 4 bytes of padding, a 64-byte value union.
LAUNCH_ATTRIBUTE_BYTES = 72
#: The CUDA error the emulated runtime returns for a call it cannot answer (cudaErrorInvalidValue).
INVALID_VALUE = 1
#: Device attributes of an H100 SXM (cudaDeviceAttr numbers); used when the caller gives none.
H100_ATTRIBUTES = {
    1: 1024, 2: 1024, 3: 1024, 4: 64, 5: 2147483647, 6: 65535, 7: 65535, 8: 49152, 10: 32,
    12: 65536, 16: 132, 39: 2048, 75: 9, 76: 0, 81: 233472, 82: 65536, 97: 232448, 106: 32,
}


class HostRecordingError(GemmlabError):
    """The host code of a DSL function could not be recorded; the message says what it did that we cannot write down."""


@dataclass(frozen=True)
class LaunchRecord:
    """One kernel launch: which kernel, its geometry, launch attributes and parameter bytes."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem: int
    attributes: tuple[tuple[int, bytes], ...]
    params: tuple[bytes, ...]


@dataclass
class HostRecording:
    """Everything one call of the host code did: loaded module images, kernel attributes set, launches, TMA descriptors."""

    images: list[bytes] = field(default_factory=list)               # fatbins or cubins, as loaded
    kernels: dict[str, int] = field(default_factory=dict)          # kernel name -> index into images
    kernel_attributes: dict[str, dict[int, int]] = field(default_factory=dict)
    launches: list[LaunchRecord] = field(default_factory=list)
    tensor_maps: list[TensorMapRecord] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ kernel parameters from the PTX

_PARAM = re.compile(r"\.param\s+(?:\.align\s+(\d+)\s+)?\.(\w+)\s+[\w$]+(?:\[(\d+)\])?")
_SCALAR_BYTES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "b32": 4, "u32": 4, "s32": 4,
                 "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}


def kernel_names(ptx: str) -> list[str]:
    """Every kernel (``.entry``) the PTX defines."""
    return re.findall(r"\.entry\s+([\w$]+)\s*\(", ptx)


def kernel_param_sizes(ptx: str, kernel: str) -> list[int]:
    """The byte size of each parameter of ``.entry kernel`` in ``ptx``."""
    start = ptx.find(f".entry {kernel}(")
    if start < 0:
        raise HostRecordingError(f"the PTX has no kernel {kernel!r}.")
    end = ptx.find(")", start + len(kernel) + 8)
    sizes = []
    for align, kind, count in _PARAM.findall(ptx[start + len(kernel) + 8:end]):
        if kind not in _SCALAR_BYTES:
            raise HostRecordingError(f"kernel parameter type .{kind} is not understood.")
        sizes.append(_SCALAR_BYTES[kind] * (int(count) if count else 1))
    return sizes


FATBIN_MAGIC = 0xBA55ED50


def image_size(address: int) -> int:
    """Size of the module image at ``address``: a fatbin (its header says) or an ELF cubin (its section headers)."""
    head = ctypes.string_at(address, 64)
    magic, _version, header_bytes, fat_bytes = struct.unpack_from("<IHHQ", head, 0)
    if magic == FATBIN_MAGIC:
        size = header_bytes + fat_bytes
    elif head[:4] == b"\x7fELF" and head[4] == 2:
        shoff, = struct.unpack_from("<Q", head, 40)
        shentsize, shnum = struct.unpack_from("<HH", head, 58)
        size = shoff + shentsize * shnum
        for i in range(shnum):  # a section's data may follow the headers
            sh = ctypes.string_at(address + shoff + i * shentsize, 64)
            kind, = struct.unpack_from("<I", sh, 4)
            offset, length = struct.unpack_from("<QQ", sh, 24)
            if kind != 8:
                size = max(size, offset + length)
    else:
        raise HostRecordingError("the host code loaded a module that is neither a fatbin nor a cubin.")
    if size > 1 << 28:
        raise HostRecordingError("the host code's module image claims more than 256 MiB.")
    return size


# ------------------------------------------------------------------ the emulated runtime

_I, _U, _P, _S = ctypes.c_int, ctypes.c_uint, ctypes.c_void_p, ctypes.c_size_t
_PI, _PP = ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_void_p)
_P64, _P32 = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)


class EmulatedRuntime:
    """The CUDA calls the DSL's host code makes, answered from tables and written down in a :class:`HostRecording`."""

    def __init__(self, device_attributes: Mapping[int, int], kernel_resources: Mapping[str, Mapping[int, int]],
                 param_sizes: Mapping[str, Sequence[int]]) -> None:
        self.device_attributes = dict(device_attributes)
        self.kernel_resources = {k: dict(v) for k, v in kernel_resources.items()}
        self.param_sizes = {k: list(v) for k, v in param_sizes.items()}
        self.recording = HostRecording()
        self._handles: dict[int, str] = {}
        self._next = 0x6C0000
        self.functions = {
            "_cudaGetDevice": (ctypes.CFUNCTYPE(_I, _PI), self._get_device),
            "_cudaDeviceGetAttribute": (ctypes.CFUNCTYPE(_I, _PI, _I, _I), self._device_attribute),
            "_cudaFuncSetAttribute": (ctypes.CFUNCTYPE(_I, _P, _I, _I), self._func_set_attribute),
            "_cudaKernelSetAttributeForDevice": (ctypes.CFUNCTYPE(_I, _P, _I, _I, _I), self._kernel_set_attribute),
            "_cuKernelGetAttribute": (ctypes.CFUNCTYPE(_I, _PI, _I, _P, _I), self._kernel_get_attribute),
            "_cudaLibraryLoadData": (ctypes.CFUNCTYPE(_I, _PP, _P, _P, _P, _U, _P, _P, _U), self._library_load),
            "_cudaLibraryGetKernel": (ctypes.CFUNCTYPE(_I, _PP, _P, ctypes.c_char_p), self._library_kernel),
            "_cudaLaunchKernelEx": (ctypes.CFUNCTYPE(_I, _P, _P, _PP), self._launch_ex),
            "_cudaLaunchKernel": (ctypes.CFUNCTYPE(_I, _P, _U, _U, _U, _U, _U, _U, _PP, _S, _P), self._launch),
            "_cudaOccupancyMaxActiveBlocksPerMultiprocessor": (ctypes.CFUNCTYPE(_I, _PI, _P, _I, _S), self._occupancy),
            "_cuTensorMapEncodeTiled": (ctypes.CFUNCTYPE(_I, _P, _I, _U, _P, _P64, _P64, _P32, _P32, _I, _I, _I, _I),
                                        self._encode_tiled),
        }
        self._callbacks = {name: kind(self._guarded(name, fn)) for name, (kind, fn) in self.functions.items()}

    def addresses(self) -> dict[str, int]:
        """Symbol name → address of its emulation, for the object loader."""
        return {name: ctypes.cast(cb, ctypes.c_void_p).value or 0 for name, cb in self._callbacks.items()}

    def _guarded(self, name: str, fn: Any) -> Any:
        def call(*args: Any) -> int:
            try:
                return fn(*args)
            except Exception as exc:  # noqa: BLE001 - an exception must not unwind through native frames
                self.recording.problems.append(f"{name}: {type(exc).__name__}: {exc}")
                return INVALID_VALUE
        return call

    def _handle(self, name: str) -> int:
        self._next += 0x10
        self._handles[self._next] = name
        return self._next

    def _get_device(self, out: Any) -> int:
        out[0] = 0
        return 0

    def _device_attribute(self, out: Any, attribute: int, device: int) -> int:
        if attribute not in self.device_attributes:
            self.recording.problems.append(f"the host code asked for device attribute {attribute}, which the "
                                           "recording does not know")
            return INVALID_VALUE
        out[0] = int(self.device_attributes[attribute])
        return 0

    def _kernel_name(self, handle: Any) -> str:
        name = self._handles.get(int(handle or 0))
        if name is None or name.startswith("library:"):
            raise HostRecordingError(f"the handle {handle} is not a kernel the host code looked up.")
        return name

    def _func_set_attribute(self, func: Any, attribute: int, value: int) -> int:
        self.recording.kernel_attributes.setdefault(self._kernel_name(func), {})[int(attribute)] = int(value)
        return 0

    def _kernel_set_attribute(self, kernel: Any, attribute: int, value: int, device: int) -> int:
        return self._func_set_attribute(kernel, attribute, value)

    def _kernel_get_attribute(self, out: Any, attribute: int, kernel: Any, device: int) -> int:
        name = self._kernel_name(kernel)
        known = {**self.kernel_resources.get(name, {}), **self.recording.kernel_attributes.get(name, {})}
        if attribute not in known:
            self.recording.problems.append(f"the host code asked for attribute {attribute} of kernel {name}, which "
                                           "the recording does not know")
            return INVALID_VALUE
        out[0] = int(known[attribute])
        return 0

    def _library_load(self, library: Any, code: Any, *_options: Any) -> int:
        self.recording.images.append(ctypes.string_at(code, image_size(code)))
        library[0] = self._handle(f"library:{len(self.recording.images) - 1}")
        return 0

    def _library_kernel(self, out: Any, library: Any, name: bytes) -> int:
        owner = self._handles.get(int(library or 0), "")
        if not owner.startswith("library:"):
            raise HostRecordingError("a kernel was looked up in a library the host code never loaded.")
        text = name.decode("utf-8", "replace")
        self.recording.kernels[text] = int(owner.split(":")[1])
        out[0] = self._handle(text)
        return 0

    def _params(self, kernel: str, args: Any) -> tuple[bytes, ...]:
        if kernel not in self.param_sizes:
            raise HostRecordingError(f"no parameter list for kernel {kernel}.")
        return tuple(ctypes.string_at(args[i], size) for i, size in enumerate(self.param_sizes[kernel]))

    def _record_launch(self, func: Any, grid: tuple, block: tuple, smem: int, attributes: tuple, args: Any) -> int:
        kernel = self._kernel_name(func)
        self.recording.launches.append(LaunchRecord(kernel, tuple(int(g) for g in grid), tuple(int(b) for b in block),
                                                    int(smem), attributes, self._params(kernel, args)))
        return 0

    def _launch_ex(self, config: Any, func: Any, args: Any) -> int:
        raw = ctypes.string_at(config, 56)
        grid, block = struct.unpack_from("<3I", raw, 0), struct.unpack_from("<3I", raw, 12)
        smem, _stream, attrs = struct.unpack_from("<QQQ", raw, 24)
        count, = struct.unpack_from("<I", raw, 48)
        if count > 16:
            raise HostRecordingError(f"a launch with {count} attributes.")
        attributes = []
        for i in range(count):
            item = ctypes.string_at(attrs + i * LAUNCH_ATTRIBUTE_BYTES, LAUNCH_ATTRIBUTE_BYTES)
            attributes.append((struct.unpack_from("<I", item, 0)[0], item[8:]))
        return self._record_launch(func, grid, block, smem, tuple(attributes), args)

    def _launch(self, func: Any, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, args: Any, smem: int,
                stream: Any) -> int:
        return self._record_launch(func, (gx, gy, gz), (bx, by, bz), smem, (), args)

    def _occupancy(self, out: Any, func: Any, block: int, smem: int) -> int:
        self.recording.problems.append("the host code asked for the occupancy, which the recording cannot compute")
        return INVALID_VALUE

    def _encode_tiled(self, tensor_map: Any, dtype: int, rank: int, address: Any, dims: Any, strides: Any, box: Any,
                      element_strides: Any, interleave: int, swizzle: int, l2: int, oob: int) -> int:
        if not 1 <= rank <= 5:
            raise HostRecordingError(f"a TMA descriptor of rank {rank}.")
        self.recording.tensor_maps.append(TensorMapRecord(
            int(address or 0), int(dtype), tuple(dims[i] for i in range(rank)),
            tuple(strides[i] for i in range(rank - 1)), tuple(box[i] for i in range(rank)),
            tuple(element_strides[i] for i in range(rank)), int(interleave), int(swizzle), int(l2), int(oob)))
        mark = TENSOR_MAP_MARK + struct.pack("<Q", len(self.recording.tensor_maps) - 1)
        ctypes.memmove(tensor_map, mark + bytes(TENSOR_MAP_BYTES - len(mark)), TENSOR_MAP_BYTES)
        return 0


# ------------------------------------------------------------------ one call of the host code

_ENTRY = "_mlir_ciface_"


def export_object(compiled: Any, prefix: str) -> bytes:
    """The object file of ``compiled``'s host code, as ``export_to_c`` writes it."""
    from .env import load_runtime_library

    load_runtime_library()  # the DSL's object writer resolves the runtime's names in this process
    with tempfile.TemporaryDirectory() as folder:
        try:
            compiled.export_to_c(folder, prefix)
        except Exception as exc:  # noqa: BLE001 - the DSL's own errors, reported with what we were doing
            raise HostRecordingError(f"the CuTe DSL could not export the compiled function's host code: "
                                     f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
        return (Path(folder) / f"{prefix}.o").read_bytes()


def run_host_code(object_file: bytes, prefix: str, exe_args: Sequence[int], runtime: EmulatedRuntime) -> HostRecording:
    """Load ``object_file``, load its module and call its entry once with ``exe_args`` (the DSL's packed arguments)."""
    try:
        loaded = LoadedObject(object_file, runtime.addresses())
    except ElfObjectError as exc:
        raise HostRecordingError(f"the DSL's host code cannot be run to record its launch: {exc}") from None
    entries = [n for n in loaded.names() if n.startswith(f"_mlir_{prefix}_{_ENTRY}")]
    if len(entries) != 1:
        raise HostRecordingError(f"expected one host entry point in the exported object, found {len(entries)}.")
    library = ctypes.c_void_p(0)
    library_ptr = ctypes.pointer(library)
    status = ctypes.c_int(0)
    device = ctypes.c_int32(0)
    init_args = (ctypes.c_void_p * 2)(ctypes.addressof(library_ptr), ctypes.addressof(status))
    loaded.function(f"_mlir_{prefix}_cuda_init", None, ctypes.c_void_p)(init_args)
    load_args = (ctypes.c_void_p * 3)(ctypes.addressof(library_ptr), ctypes.addressof(device), ctypes.addressof(status))
    loaded.function(f"_mlir_{prefix}_cuda_load_to_device", None, ctypes.c_void_p)(load_args)
    if status.value:
        problems = "; ".join(runtime.recording.problems)
        raise HostRecordingError(f"loading the module failed in the recording ({problems}).")
    result = ctypes.c_int32(0)
    packed = (ctypes.c_void_p * (len(exe_args) + 1))(*[int(a) for a in exe_args], ctypes.addressof(result))
    loaded.function(entries[0], None, ctypes.c_void_p, ctypes.c_int32)(packed, len(exe_args) + 1)
    recording = runtime.recording
    if result.value and not recording.problems:
        recording.problems.append(f"the host code returned CUDA error {result.value}")
    recording.loaded = loaded  # type: ignore[attr-defined]  # keeps the code mapped while the caller reads it
    return recording


__all__ = ["EmulatedRuntime", "H100_ATTRIBUTES", "HostRecording", "LaunchRecord", "HostRecordingError",
           "TensorMapRecord", "image_size", "export_object", "kernel_names", "kernel_param_sizes", "run_host_code"]
