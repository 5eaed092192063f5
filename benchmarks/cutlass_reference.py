"""NVIDIA's persistent Hopper GEMM from a CUTLASS checkout, as a gemmlab GEMM function.

The public reference the course's kernels are timed against in ``benchmarks/solutions.py
--cutlass PATH``: ``dense_gemm_persistent.py`` of the CuTe DSL's Hopper examples (TMA, wgmma, warp
specialisation, persistent tile scheduler, TMA multicast in a cluster), found where CUTLASS keeps it
now (``examples/python/CuTeDSL/cute/hopper/kernel/dense_gemm/``, since 2026) or kept it before
(``examples/python/CuTeDSL/hopper/``). It is loaded from the
checkout as it is (nothing of it is copied here) and wrapped as ``fn(A, B, D)`` with gemmlab's
"tn" convention (A M×K, B N×K, D = A·Bᵀ M×N, all row-major), so ``check_gemm`` and
``bench_gemm`` time it exactly like the course's kernels. The example needs each row to be a
multiple of 16 bytes (K and N multiples of 8 for 16-bit types).
"""
from __future__ import annotations

import importlib.util
import inspect
import sys
from pathlib import Path
from typing import Any, Callable

#: Where the example sits in a CUTLASS checkout (newest layout first), and the class it defines.
EXAMPLES = (Path("examples/python/CuTeDSL/cute/hopper/kernel/dense_gemm/dense_gemm_persistent.py"),
            Path("examples/python/CuTeDSL/hopper/dense_gemm_persistent.py"))
EXAMPLE = EXAMPLES[0]
KERNEL_CLASS = "HopperWgmmaGemmPersistentKernel"
#: The configuration the course compares against (issue 26's table): 128×256 tiles, 2×1 clusters.
TILE_MN = (128, 256)
CLUSTER_MN = (2, 1)
#: Shapes the example can take (16-byte rows), for its correctness check.
CHECK_SHAPES = [(256, 512, 256), (640, 384, 4096), (1024, 1024, 64), (4096, 4096, 4096)]
LABEL = "cutlass_persistent"


def example_path(cutlass_root: Path | str) -> Path:
    """The example's file in the checkout at ``cutlass_root`` (either layout); LookupError saying what is missing."""
    root = Path(cutlass_root).expanduser()
    for example in EXAMPLES:
        if (root / example).is_file():
            return root / example
    raise LookupError(f"neither {' nor '.join(map(str, EXAMPLES))} under {cutlass_root}: pass the root of a CUTLASS "
                      "checkout (git clone https://github.com/NVIDIA/cutlass)")


def load_example(cutlass_root: Path | str) -> Any:
    """The example's module, imported from the checkout (needs the CuTe DSL, not a GPU)."""
    path = example_path(cutlass_root)
    spec = importlib.util.spec_from_file_location("cutlass_dense_gemm_persistent", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # noqa: BLE001 - any import failure becomes a reason to skip the row
        sys.modules.pop(spec.name, None)
        raise LookupError(f"{path} did not import: {type(err).__name__}: {err}") from None
    if not callable(getattr(module, KERNEL_CLASS, None)):
        raise LookupError(f"{path} defines no {KERNEL_CLASS}: this checkout's example has changed")
    return module


def persistent_gemm(module: Any, tile_mn: tuple[int, int] = TILE_MN,
                    cluster_mn: tuple[int, int] = CLUSTER_MN) -> Callable[[Any, Any, Any], None]:
    """``fn(A, B, D)``: the example's kernel on torch CUDA tensors, on torch's current stream,
    compiled once per dtype and shape (the DSL's compile, about a second)."""
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    import cutlass.utils
    import torch
    from cutlass.cute.runtime import from_dlpack

    compiled: dict[tuple, Any] = {}
    cluster_ctas = cluster_mn[0] * cluster_mn[1]

    def as_mkl(t: Any) -> Any:
        rows, cols = t.shape
        view = t.as_strided((rows, cols, 1), (t.stride(0), 1, rows * t.stride(0)))
        return from_dlpack(view, assumed_align=16).mark_layout_dynamic(leading_dim=1)

    def gemm(A: Any, B: Any, D: Any) -> None:
        a, b, d = as_mkl(A), as_mkl(B), as_mkl(D)
        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
        key = (A.dtype, D.dtype, tuple(A.shape), tuple(B.shape))
        if key not in compiled:
            cls = getattr(module, KERNEL_CLASS)
            settings = inspect.signature(cls).parameters
            # later examples add swizzle_size and raster_along_m (1 and True are their defaults)
            kernel = (cls(cutlass.Float32, tile_mn, cluster_mn, 1, True) if "swizzle_size" in settings
                      else cls(cutlass.Float32, tile_mn, cluster_mn))
            if "max_active_clusters" in inspect.signature(cls.__call__).parameters:
                clusters = cutlass.utils.HardwareInfo().get_max_active_clusters(cluster_ctas)
                compiled[key] = cute.compile(kernel, a, b, d, clusters, stream)
            else:
                compiled[key] = cute.compile(kernel, a, b, d, stream)
        compiled[key](a, b, d, stream)

    return gemm


__all__ = ["CHECK_SHAPES", "CLUSTER_MN", "EXAMPLE", "EXAMPLES", "KERNEL_CLASS", "LABEL", "TILE_MN", "example_path",
           "load_example", "persistent_gemm"]
