"""Every solution kernel of the course passes the checks as the grader runs them.

In grading mode a GEMM call may only move and allocate memory around the student's kernel: any
torch arithmetic fails the check (gemmlab.checking.integrity.DATA_MOVEMENT is an allow-list). These tests
make sure that the course's own launchers (C++ and CuTe DSL alike) stay inside it, and that a
verified timing accepts them.
"""
from __future__ import annotations

import pytest

import solutions as bench_solutions

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("assignment,name", bench_solutions.KERNELS, ids=[k for _, k in bench_solutions.KERNELS])
def test_solution_launcher_passes_the_graded_check(assignment: str, name: str) -> None:
    import torch

    import gemmlab

    fn, ns = bench_solutions.load_kernel(assignment, name)
    base = bench_solutions.VARIANTS.get(name, (name,))[0]
    conv = bench_solutions.convention_of(fn, ns, base)
    shapes = bench_solutions.declared(ns, base, "CHECK_SHAPES", bench_solutions.ODD_SHAPES)
    if name in bench_solutions.FIXED_SHAPE:
        shapes = [bench_solutions.FIXED_SHAPE[name]]
    result = gemmlab.check_gemm(fn, convention=conv, dtype=torch.float16, shapes=shapes, forbid_library=True)
    assert result.passed, str(result)


@pytest.mark.timing  # its "nothing left running" check times the whole GPU: alone on it, like every timing
@pytest.mark.parametrize("assignment,name", bench_solutions.KERNELS, ids=[k for _, k in bench_solutions.KERNELS])
def test_solution_launcher_passes_a_verified_timing(assignment: str, name: str) -> None:
    import torch

    import gemmlab

    fn, ns = bench_solutions.load_kernel(assignment, name)
    conv = bench_solutions.convention_of(fn, ns, bench_solutions.VARIANTS.get(name, (name,))[0])
    M, N, K = bench_solutions.FIXED_SHAPE.get(name, (512, 512, 512))
    timed = gemmlab.bench_gemm(fn, shape=(M, N, K), convention=conv, dtype=torch.float16, verify=True,
                               rep=5, label=name)
    assert timed.ratio > 0


def test_torch_elementwise_product_fails_the_graded_check() -> None:
    """A "kernel" that is torch broadcasting (no library GEMM, no kernel of its own) earns nothing."""
    import gemmlab

    def broadcast(A, B, D):
        D.copy_((A.float()[:, None, :] * B.float()[None, :, :]).sum(-1))

    result = gemmlab.check_gemm(broadcast, forbid_library=True, shapes=[(64, 48, 32)])
    assert not result.passed and "aten::mul" in str(result) and "aten::sum" in str(result)
    with pytest.raises(gemmlab.timing.bench.BenchIntegrityError, match="aten::"):  # refused before any timing
        gemmlab.bench_gemm(broadcast, shape=(256, 256, 256), verify=True, rep=3)
