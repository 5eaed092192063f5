"""Notebooks 04's and 04b's tensor-core solution kernels, taken from their solutions notebooks by cell tag (no copy).

Shared by tests/test_mma04.py (compile only, CPU) and tests/test_gpu_mma04.py (check_gemm on
the GPU). The DSL needs its functions' source in a file, so the DSL cells are written to a
module and imported.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

from solution_cells import cell_source, load_namespace  # noqa: E402

ASSIGNMENT = "04_mma"              # the one-warp tile kernel
CTA_ASSIGNMENT = "04b_tiled_mma"   # the 64x64 CTA kernel
CTA_TILE = 64
#: The threads of the CTA kernel's launch (its host function and launcher take them as an argument).
CTA_THREADS = 128


def cpp_sources() -> dict[str, str]:
    """{kernel name: CuTe C++ source} of the two C++ solutions."""
    tile = load_namespace(ASSIGNMENT, ["kernel:mma04_tile_cpp"])["MMA_TILE_CPP"]
    cta = load_namespace(CTA_ASSIGNMENT, ["kernel:mma04_cta_cpp"])["CTA_CPP"]
    return {"mma_tile": tile, "cta_gemm": cta}


def dsl_module(tmp_dir: Path):
    """The two DSL solution cells as one imported module (mma_tile_dsl, cta_gemm_dsl)."""
    source = "\n\n".join([cell_source(ASSIGNMENT, "kernel:mma04_tile_dsl"),
                           cell_source(CTA_ASSIGNMENT, "kernel:mma04_cta_dsl")])
    path = tmp_dir / "mma04_dsl_solutions.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("mma04_dsl_solutions", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tile_example(device: str = "cpu"):
    import torch

    return (torch.empty(16, 16, dtype=torch.float16, device=device), torch.empty(8, 16, dtype=torch.float16, device=device),
            torch.empty(16, 8, dtype=torch.float32, device=device))


def cta_example(M: int = 128, N: int = 64, K: int = 64, device: str = "cpu"):
    """Example arguments of the CTA kernel's host function: A, B, D and the number of threads."""
    import torch

    return (torch.empty(M, K, dtype=torch.float16, device=device), torch.empty(N, K, dtype=torch.float16, device=device),
            torch.empty(M, N, dtype=torch.float32, device=device), CTA_THREADS)
