"""The trusted launcher: a compiled kernel made into a GEMM function by the judge, not by a student.

Why: ``check_gemm`` and ``bench_gemm`` take a Python function. In a notebook that function is
the student's launcher; in the judge it is this one, built from the kernel spec (geometry as
expressions, or the launches recorded per size) and the kernel's parameter names or recorded
roles (binding), on the public runtime (load, pack, launch). So every launch of a judged kernel
is one the judge made: a launcher that calls a library, leaves work on another stream or returns
before its kernel finishes (late work) cannot be written here by construction. Needs a GPU and torch.
"""
from __future__ import annotations

from typing import Any

from gemmlab.compiling.record import Compiled
from gemmlab.running.arguments import bind_arguments
from gemmlab.running.device import torch_device
from gemmlab.running.launch import LoadedFunction, launch, load_function
from . import binding
from .spec import KernelSpec


class TrustedLauncher:
    """``fn(A, B, D)`` ("tn") or ``fn(A, B, C, alpha, beta)`` ("nn") that launches the compiled kernel once.

    Launches go to torch's current stream, which ``check_gemm`` and ``bench_gemm`` choose.
    """

    def __init__(self, compiled: Compiled, spec: KernelSpec) -> None:
        binding.check_launches(compiled.params, spec.convention, compiled.name, spec.launches)
        self.compiled = compiled
        self.spec = spec
        self._loaded: dict[int, LoadedFunction] = {}

    def _function(self, index: int) -> LoadedFunction:
        if index not in self._loaded:
            c = self.compiled
            images = (("cubin", c.cubin), ("PTX", (c.ptx or "").encode() + b"\0"))
            self._loaded[index] = load_function(images, c.lowered_name, c.name, c.arch, index)
        return self._loaded[index]

    def modules(self) -> list[Any]:
        """The CUDA modules loaded so far (one per device used): where a timeline's buffer address is written."""
        return [loaded.module for loaded in self._loaded.values()]

    def __call__(self, A: Any, B: Any, out: Any, alpha: float = 1.0, beta: float = 0.0) -> None:
        M, K = (int(v) for v in A.shape)
        N = int(B.shape[0] if self.spec.convention == "tn" else B.shape[1])
        self.launch(binding.Operands(A, B, out, M, N, K, float(alpha), float(beta)))

    def launch(self, operands: binding.Operands) -> None:
        """One launch for the problem size ``operands`` names (for a copy kernel: M, N and K = 1)."""
        M, N, K = operands.M, operands.N, operands.K
        grid, block, smem = self.spec.geometry(M, N, K)
        device = torch_device()
        if self.spec.launches:  # recorded from a launcher: its arguments by position, as recorded for this size
            args = binding.positional_arguments(self.spec.launch_for(M, N, K).args, operands)
        else:
            args = binding.arguments(self.compiled.params, self.spec.convention, operands, self.compiled.name)
        packed = bind_arguments(self.compiled.params, args, device=device, name=self.compiled.name)
        launch(self._function(device.index), packed, grid, block, smem, None, name=self.compiled.name)


__all__ = ["TrustedLauncher"]
