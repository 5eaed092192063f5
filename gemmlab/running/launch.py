"""Loading a compiled kernel into the GPU and launching it: geometry checks, module load, launch.

The pieces a launch needs, usable without gemmlab's ``Kernel`` class: a process that receives a
cubin and a :class:`~gemmlab.running.contract.LaunchContract` can :func:`load_function`, pack the
arguments (:mod:`gemmlab.running.arguments`) and :func:`launch`. :func:`validate_launch` rejects,
before the driver sees it, a grid, block or shared-memory size the driver would refuse or run
wrongly, with a message that says why; it needs no GPU.
"""
from __future__ import annotations

import ctypes
import numbers
from dataclasses import dataclass
from typing import Any, Sequence

from gemmlab.errors import LaunchError
from gemmlab.running import faults
from gemmlab.running.arguments import PackedArgs
from gemmlab.running.device import checked, device_attributes, driver
from gemmlab.running.streams import stream_handle

#: Dynamic shared memory above this needs an explicit opt-in attribute on the function.
DEFAULT_DYNAMIC_SMEM = 48 * 1024


@dataclass(frozen=True)
class LaunchLimits:
    """What one kernel on one device allows; queried from the driver, or made up in tests."""

    max_threads_per_block: int = 1024          # the kernel's own limit (registers can lower it)
    registers: int = 0
    static_smem: int = 0
    max_smem_optin: int = 227 * 1024           # device: largest opt-in shared memory per block
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dims: tuple[int, int, int] = (2**31 - 1, 65535, 65535)


def launch_dims(value: Any, what: str) -> tuple[int, int, int]:
    """``grid``/``block`` as three ints (missing dimensions are 1), or a LaunchError saying why not."""
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
    g = launch_dims(grid, "grid")
    b = launch_dims(block, "block")
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


@dataclass
class LoadedFunction:
    """A kernel function loaded into the current context, with its launch limits on this device."""

    module: Any
    function: Any
    limits: LaunchLimits
    dynamic_smem_opt_in: int = DEFAULT_DYNAMIC_SMEM


def load_module(images: Sequence[tuple[str, bytes]], name: str, arch: str) -> Any:
    """Load the first image the driver accepts (``[("cubin", ...), ("PTX", ...)]``) into the current context.

    A sticky error raises :class:`~gemmlab.errors.ContextLostError`; when no image loads the
    LaunchError says the kernel was built for another GPU (``arch``) and how to rebuild it.
    """
    d = driver()
    errors = []
    for label, image in images:
        if not image or image == b"\0":
            continue
        buf = ctypes.create_string_buffer(bytes(image), len(image))
        result, module = d.cuModuleLoadData(ctypes.addressof(buf))
        if faults.result_name(result) == "CUDA_SUCCESS":
            return module
        fault = faults.classify(faults.result_name(result))
        if fault is not None and fault.context_lost:
            raise faults.error_for(result, f"loading kernel '{name}'")
        errors.append(f"{label}: {faults.result_text(result)}")
    from gemmlab.running.gpu import current_arch

    raise LaunchError(
        f"kernel '{name}' was compiled for {arch}, and this GPU ({current_arch()}) cannot "
        f"load it ({'; '.join(errors)}). Recompile with arch=None to target this GPU."
    )


def load_function(images: Sequence[tuple[str, bytes]], symbol: str, name: str, arch: str,
                  device_index: int) -> LoadedFunction:
    """Load a module and find kernel ``symbol`` (its lowered name) in it, with its limits on the device."""
    d = driver()
    module = load_module(images, name, arch)
    function = checked(d.cuModuleGetFunction(module, symbol.encode()), f"finding kernel '{name}' in its module")
    F = d.CUfunction_attribute

    def attr(a: Any) -> int:
        return int(checked(d.cuFuncGetAttribute(a, function), "querying the kernel"))

    dev = device_attributes(device_index)
    limits = LaunchLimits(
        max_threads_per_block=attr(F.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
        registers=attr(F.CU_FUNC_ATTRIBUTE_NUM_REGS),
        static_smem=attr(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES),
        max_smem_optin=dev.max_smem_optin,
        max_block_dims=dev.max_block_dims,
        max_grid_dims=dev.max_grid_dims,
    )
    return LoadedFunction(module, function, limits)


def launch(loaded: LoadedFunction, packed: PackedArgs, grid: Any, block: Any, smem: int = 0,
           stream: Any = None, name: str = "kernel") -> None:
    """Validate the geometry and enqueue one launch on ``stream`` (default: torch's current stream).

    Asynchronous like every launch: faults while the kernel runs surface at the next
    synchronisation (:func:`gemmlab.running.streams.synchronize`).
    """
    g, b = validate_launch(grid, block, smem, loaded.limits, name=name)
    d = driver()
    if smem > loaded.dynamic_smem_opt_in:
        checked(d.cuFuncSetAttribute(loaded.function,
                                     d.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                     int(smem)),
                f"allowing kernel '{name}' {smem:,} bytes of dynamic shared memory")
        loaded.dynamic_smem_opt_in = int(smem)
    (result,) = d.cuLaunchKernel(loaded.function, *g, *b, int(smem), stream_handle(stream), packed.address, 0)
    code = faults.result_name(result)
    if code == "CUDA_SUCCESS":
        return
    if code == "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES":
        raise LaunchError(
            f"kernel '{name}' could not launch with block={b}: it needs more registers or shared "
            f"memory than one SM has ({loaded.limits.registers} registers per thread × "
            f"{b[0] * b[1] * b[2]} threads). Use a smaller block or fewer registers."
        )
    fault = faults.classify(code)
    if fault is not None and fault.context_lost:
        raise faults.error_for(result, f"kernel '{name}'")
    raise LaunchError(f"kernel '{name}' could not launch: {faults.result_text(result)} ({code}).")


def max_active_blocks(loaded: LoadedFunction, block: Any, smem: int = 0) -> int:
    """Blocks of this size that fit on one SM at once (occupancy), from the driver."""
    b = launch_dims(block, "block")
    d = driver()
    return int(checked(d.cuOccupancyMaxActiveBlocksPerMultiprocessor(loaded.function, b[0] * b[1] * b[2], int(smem)),
                       "computing occupancy"))


__all__ = [
    "DEFAULT_DYNAMIC_SMEM", "LaunchLimits", "LoadedFunction", "launch", "launch_dims", "load_function",
    "load_module", "max_active_blocks", "validate_launch",
]
