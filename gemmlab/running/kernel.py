"""A compiled kernel you can call like a function on torch tensors.

``Kernel`` is the student's handle on what :func:`gemmlab.compile` produced: inspect it (``.ptx``,
``.resources``, ``.sass()``) or launch it (``kernel(A, B, D, grid=..., block=...)``). The work
is done by :mod:`gemmlab.running`: argument checking and packing (``arguments``), module loading
and launch (``launch``), streams and waiting (``streams``), and the one classification of GPU
faults (``faults``). A kernel whose PTX calls ``printf`` is synchronised after each launch so its
output appears in the notebook cell (``runtime.printf``).
"""
from __future__ import annotations

import html
from typing import Any

from gemmlab.running.gpu import require_gpu
from gemmlab.running import faults
from gemmlab.running.arguments import bind_arguments, signature_text
from gemmlab.running.contract import LaunchContract
from gemmlab.running.device import torch_device
from gemmlab.running.launch import LaunchLimits, LoadedFunction, launch, launch_dims, load_function, max_active_blocks
from gemmlab.running.printf import forward_device_printf, uses_printf
from gemmlab.running.streams import DEFAULT_TIMEOUT_S, synchronize


class Kernel:
    """A compiled kernel: inspect it (``.ptx``, ``.resources``, ``.sass()``) or launch it."""

    def __init__(self, compiled: Any) -> None:
        self.compiled = compiled
        self._loaded: dict[int, LoadedFunction] = {}

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
    def _load(self) -> tuple[Any, LoadedFunction]:
        device = torch_device()
        index = device.index
        if index not in self._loaded:
            images = (("cubin", self.cubin), ("PTX", (self.ptx or "").encode() + b"\0"))
            self._loaded[index] = load_function(images, self.lowered_name, self.name, self.arch, index)
        return device, self._loaded[index]

    def limits(self) -> LaunchLimits:
        """This kernel's launch limits on the current GPU (loads the module)."""
        require_gpu(f"Loading kernel '{self.name}'")
        faults.raise_if_lost()
        return self._load()[1].limits

    def contract(self, grid: Any, block: Any, smem: int = 0) -> LaunchContract:
        """One launch of this kernel as data (JSON through ``to_dict``), for a process that runs the cubin alone."""
        return LaunchContract(self.name, self.lowered_name, self.arch, tuple(self.params),
                              launch_dims(grid, "grid"), launch_dims(block, "block"), int(smem))

    # ---- launching
    def __call__(self, *args: Any, grid: Any, block: Any, smem: int = 0, stream: Any = None,
                 sync: bool = False, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Launch on torch's current stream (or ``stream``); ``sync=True`` waits and reports errors.

        A kernel that calls ``printf`` is always waited for, so that what it printed shows here.
        """
        require_gpu(f"Running kernel '{self.name}'")
        faults.raise_if_lost()
        device, loaded = self._load()
        packed = bind_arguments(self.params, args, device=device, name=self.name)
        launch(loaded, packed, grid, block, smem, stream, name=self.name)
        what = f"kernel '{self.name}'"
        if uses_printf(self.ptx):
            forward_device_printf(lambda: synchronize(timeout_s=timeout_s, stream=stream, what=what,
                                                          flush_printf=True))
        elif sync:
            synchronize(timeout_s=timeout_s, stream=stream, what=what)

    # ---- inspection
    def max_active_blocks(self, block: Any, smem: int = 0) -> int:
        """Blocks of this size that fit on one SM at once (occupancy), from the driver."""
        require_gpu("Computing occupancy")
        faults.raise_if_lost()
        return max_active_blocks(self._load()[1], block, smem)

    def sass(self) -> str:
        """The GPU machine code (SASS) of the cubin (gemmlab.compiling.sass: nvdisasm or cuobjdump)."""
        from gemmlab.compiling.sass import disassemble

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


__all__ = ["Kernel"]
