"""Notebook 05's solution kernels, taken from the solutions notebook by cell tag, compile for
sm_90a (CPU, so CI catches a compile break) for every vector width the launcher can pick."""
from __future__ import annotations


import pytest
import torch

import solution_cells  # noqa: E402
from tests.support.kernel_resources import read_resources

ASSIGNMENT = "05_global_gemm"
TAGS = ["kernel:gemm05_vec", "kernel:gemm05_launch"]


@pytest.fixture(scope="module")
def cpp_ns():
    return solution_cells.load_namespace(ASSIGNMENT, TAGS + ["kernel:gemm05_cpp"])


@pytest.fixture(scope="module")
def dsl_ns():
    return solution_cells.load_namespace(ASSIGNMENT, TAGS + ["kernel:gemm05_dsl"])


@pytest.mark.slow
@pytest.mark.parametrize("vec, dtype", [(8, torch.float16), (1, torch.float16), (8, torch.bfloat16)])
def test_cpp_solution_compiles(cpp_ns, vec, dtype):
    import gemmlab

    name = f"gemm05<{cpp_ns['CUTE_TYPES'][dtype]}>"
    kernel = gemmlab.compile(cpp_ns["GEMM05_CPP"], name, arch="sm_90a", options=(f"-DVEC={vec}",))
    res = read_resources(kernel.resources, name)
    assert not res.spills or vec == 1, f"VEC={vec} spills: {res}"
    ptx = kernel.ptx
    assert "mma.sync.aligned.m16n8k16" in ptx and "ldmatrix.sync.aligned" in ptx and ".trans" in ptx
    assert (".bf16.bf16" in ptx) == (dtype == torch.bfloat16), "the MMA instruction must match the element type"
    if vec == 8:
        assert "cp.async.ca.shared.global" in ptx and ", 16;" in ptx
    else:
        assert "cp.async.ca.shared.global" not in ptx  # 2-byte vectors: plain loads


@pytest.mark.parametrize("vec", [8, 4, 2, 1])
def test_dsl_solution_compiles(dsl_ns, vec):
    M, N, K = 256, 192, 96
    A, B, C = (torch.empty(s, dtype=torch.float16) for s in ((M, K), (K, N), (M, N)))
    kernel = dsl_ns["gemm05_dsl"].kernel
    kernel.arch = "sm_90a"
    kernel.compile_for(A, B, C, 1.0, 0.5, vec)
    ptx = kernel.ptx
    assert "mma.sync.aligned.m16n8k16" in ptx and "ldmatrix" in ptx
    copies = "cp.async.ca.shared.global" in ptx or "cp.async.cg.shared.global" in ptx
    assert copies == (vec >= 2), f"vec={vec}: cp.async for 4-byte vectors and wider only"


def test_dsl_solution_compiles_for_bfloat16(dsl_ns):
    A, B, C = (torch.empty(s, dtype=torch.bfloat16) for s in ((128, 64), (64, 128), (128, 128)))
    kernel = dsl_ns["gemm05_dsl"].kernel
    kernel.arch = "sm_90a"
    kernel.compile_for(A, B, C, 1.0, 0.0, 8)
    assert "bf16" in kernel.ptx


@pytest.mark.parametrize("shape, strides, expected", [
    ((1000, 1001, 999), None, 1),
    ((4096, 4096, 4096), None, 8),
    ((1000, 1002, 1004), None, 2),
    ((1000, 1004, 1000), None, 4),
])
def test_launcher_picks_the_widest_legal_vector(cpp_ns, shape, strides, expected):
    M, N, K = shape
    A = torch.empty(M, K, dtype=torch.float16)
    B = torch.empty(K, N, dtype=torch.float16)
    assert cpp_ns["load_vector_elems"](A, B) == expected


def test_launcher_sees_a_misaligned_slice(cpp_ns):
    big = torch.empty(64, 2048, dtype=torch.float16)
    A = big[:, 3:1027]                          # 6 bytes past an aligned row start
    B = torch.empty(1024, 512, dtype=torch.float16)
    assert cpp_ns["load_vector_elems"](A, B) == 1
    assert cpp_ns["load_vector_elems"](big[:, 8:1032], B) == 8


def test_launcher_rejects_bad_calls(cpp_ns):
    import gemmlab

    gemm = cpp_ns["gemm05_cpp"]
    A = torch.empty(4, 8, dtype=torch.float16)
    with pytest.raises(gemmlab.LaunchError, match="shapes do not fit"):
        gemm(A, torch.empty(9, 4, dtype=torch.float16), torch.empty(4, 4, dtype=torch.float16), 1.0, 0.0)
    with pytest.raises(gemmlab.LaunchError, match="float16"):
        gemm(A.float(), torch.empty(8, 4), torch.empty(4, 4), 1.0, 0.0)
    with pytest.raises(gemmlab.LaunchError, match="row-major"):
        gemm(torch.empty(8, 4, dtype=torch.float16).T, torch.empty(8, 4, dtype=torch.float16),
             torch.empty(4, 4, dtype=torch.float16), 1.0, 0.0)
    assert cpp_ns["CONVENTION"] == "nn"


def test_cpp_variants_compiled_ahead_are_the_ones_kernel_for_compiles(cpp_ns: dict, monkeypatch) -> None:
    import torch

    import gemmlab

    ahead, built = [], []
    monkeypatch.setattr(gemmlab, "has_gpu", lambda: True)
    monkeypatch.setattr(gemmlab, "compile_ahead", lambda src, builds, arch=None, group=None: ahead.extend(
        (src, b[0], tuple(b[1]), arch) for b in builds) or len(builds))
    monkeypatch.setattr(gemmlab, "compile", lambda src, name, arch=None, options=(), **kw:
                        built.append((src, name, tuple(options), arch)) or object())
    gemm = cpp_ns["cpp_gemm_from"](cpp_ns["GEMM05_CPP"], arch="sm_90a")
    for dtype in (torch.float16, torch.bfloat16):
        for vec in (8, 4, 2, 1):
            gemm.kernel_for(vec, dtype)
    assert sorted(ahead) == sorted(built) and len(built) == 8
