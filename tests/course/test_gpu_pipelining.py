"""Notebook 06's solution kernels on a GPU: correct on odd shapes (fp16, bf16), and the notebook's graded bar
leaves them a margin. Their speed against cuBLAS is benchmarks/solutions.py's table, not a test. The kernels come
from the solutions notebook by cell tag.

    pytest -m gpu tests/course/test_gpu_pipelining.py -v
"""
from __future__ import annotations

import pytest
import torch

import solution_cells  # noqa: E402

pytestmark = pytest.mark.gpu
ASSIGNMENT = "06_pipelining"
KERNELS = ["gemm06_cpp", "gemm06_dsl"]


@pytest.fixture(scope="module", params=KERNELS)
def gemm(request):
    ns = solution_cells.load_namespace(ASSIGNMENT, [f"kernel:{request.param}"])
    return request.param, ns[request.param]


@pytest.mark.parametrize("suite", ["default", "odd", "aligned"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_solution_passes_check_gemm(gemm, suite: str, dtype) -> None:
    import gemmlab

    name, fn = gemm
    result = gemmlab.check_gemm(fn, dtype=dtype, shapes=suite)
    assert result.passed, f"{name} {dtype} suite {suite}:\n{result}"


def test_solution_on_unaligned_and_long_k_shapes(gemm) -> None:
    import gemmlab

    name, fn = gemm
    shapes = [(1, 4096, 7), (129, 3, 515), (640, 384, 4096), (4095, 4097, 4096), (257, 1000, 4104),
              (1024, 1024, 8), (130, 260, 36),
              # one row or one column: no pitch limits the vector width, the row length must
              (1, 255, 4104), (1, 256, 512), (1, 1, 4096), (300, 1, 4104), (1, 260, 36), (2, 255, 513)]
    result = gemmlab.check_gemm(fn, shapes=shapes)
    assert result.passed, f"{name}:\n{result}"


@pytest.mark.timing
def test_notebook_bar_is_below_solution(gemm) -> None:
    """The notebook's graded MIN_RATIO must leave the solution a margin on this GPU."""
    import re

    import gemmlab

    src = solution_cells.notebook_path(ASSIGNMENT).read_text()
    min_ratio = float(re.search(r"MIN_RATIO = ([0-9.]+)", src).group(1))
    name, fn = gemm
    bar = gemmlab.performance_bar(fn, min_ratio)
    assert bar.passed and bar.ratio >= min_ratio * 1.1, f"{name}: {bar}"
