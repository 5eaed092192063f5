"""Notebook 05's solution kernels, taken from the solutions notebook by cell tag, compile for
sm_90a (CPU, so CI catches a compile break) for every vector width the launcher can pick, and their machine
code holds what the notebook's step tests ask of each variant (its own ``kernel_checks``)."""
from __future__ import annotations


import pytest
import torch

import solution_cells  # noqa: E402
from gemmlab import techniques as T
from tests.support.graded_cells import run_cells
from tests.support.kernel_resources import read_resources

ASSIGNMENT = "05_global_gemm"
TAGS = ["kernel:gemm05_vec", "kernel:gemm05_launch"]


@pytest.fixture(scope="module")
def kernel_checks():
    """The notebook's own list of what a variant's machine code holds (cell ``step_checks``)."""
    return run_cells(ASSIGNMENT, ["setup", "launchers", "step_checks"])["kernel_checks"]


@pytest.fixture(scope="module")
def cpp_ns():
    return solution_cells.load_namespace(ASSIGNMENT, TAGS + ["kernel:gemm05_cpp"])


@pytest.fixture(scope="module")
def dsl_ns():
    return solution_cells.load_namespace(ASSIGNMENT, TAGS + ["kernel:gemm05_dsl"])


@pytest.mark.slow
@pytest.mark.parametrize("vec, dtype", [(8, torch.float16), (1, torch.float16), (8, torch.bfloat16)])
def test_cpp_solution_compiles(cpp_ns, kernel_checks, vec, dtype):
    import gemmlab

    name = f"gemm05<{cpp_ns['CUTE_TYPES'][dtype]}>"
    kernel = gemmlab.compile(cpp_ns["GEMM05_CPP"], name, arch="sm_90a", options=(f"-DVEC={vec}",))
    res = read_resources(kernel.resources, name)
    assert not res.spills or vec == 1, f"VEC={vec} spills: {res}"
    T.require(kernel, kernel_checks(vec, dtype), what=f"C++ VEC={vec} {dtype}")


@pytest.mark.parametrize("vec", [8, 4, 2, 1])
def test_dsl_solution_compiles(dsl_ns, kernel_checks, vec):
    M, N, K = 256, 192, 96
    A, B, C = (torch.empty(s, dtype=torch.float16) for s in ((M, K), (K, N), (M, N)))
    kernel = dsl_ns["gemm05_dsl"].kernel
    kernel.arch = "sm_90a"
    kernel.compile_for(A, B, C, 1.0, 0.5, vec)
    T.require(kernel, kernel_checks(vec, torch.float16), what=f"DSL vec={vec}")


def test_dsl_solution_compiles_for_bfloat16(dsl_ns, kernel_checks):
    A, B, C = (torch.empty(s, dtype=torch.bfloat16) for s in ((128, 64), (64, 128), (128, 128)))
    kernel = dsl_ns["gemm05_dsl"].kernel
    kernel.arch = "sm_90a"
    kernel.compile_for(A, B, C, 1.0, 0.0, 8)
    T.require(kernel, kernel_checks(8, torch.bfloat16), what="DSL bf16")


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
