"""Notebook 08 on a GPU: every rung's solution kernel (from the solutions notebook by cell tag) is
correct on the shapes it accepts (rungs 1, 2 and 6 any shape, any pitch, any alignment; rungs 3-5
whole tiles, also with other STAGES / GROUP_M), beta = 0 never reads C, the tutorial's loading rule
really faults at 1000 x 999 in a child process while the aligned rule does not, WMMA loads become
ldmatrix, and the graded tile-order cell measures the order from the kernel (the raster probe): the solution
passes it, a row-major order written so that the CPU cannot read it fails it. The rungs' speed against cuBLAS is
benchmarks/solutions.py's table (and test_ladder_table's print), not a test."""
from __future__ import annotations

import random

import pytest

import solution_cells  # noqa: E402
from tests.support.nn_gemm_cases import check_padded_rows  # noqa: E402
from tests.course.test_cuda_ladder import ASSIGNMENT, TAGS, cell_by_grade_id  # noqa: E402
from tests.support.notebook08 import graded, swizzle_body  # noqa: E402

pytestmark = pytest.mark.gpu
ANY_SHAPE_RUNGS = ["ladder_naive", "ladder_smem", "ladder_any"]
TILE_RUNGS = {"ladder_wmma": "WMMA_CONFIG", "ladder_dbuf": "DBUF_CONFIG", "ladder_swizzle": "SWIZZLE_CONFIG"}
ODD = [(1, 1, 1), (3, 5, 7), (17, 33, 9), (129, 257, 65), (255, 1, 300), (1, 255, 513), (1000, 1001, 999),
       (1, 4096, 7), (129, 3, 515), (1000, 1002, 1004), (1000, 1004, 1000), (64, 1000, 1024)]


@pytest.fixture(scope="module")
def ns():
    return solution_cells.load_namespace(ASSIGNMENT, TAGS)


def check(fn, name, shapes, beta):
    import gemmlab

    result = gemmlab.check_gemm(fn, convention="nn", shapes=shapes, alpha=random.choice([1.0, -0.75]), beta=beta)
    assert result.passed, f"{name}, beta={beta}:\n{result}"


@pytest.mark.parametrize("rung", ANY_SHAPE_RUNGS)
def test_any_shape_rungs(ns, rung):
    rnd = random.Random()
    shapes = ODD + [(rnd.randint(1, 1500), rnd.randint(1, 1500), rnd.randint(1, 1500)) for _ in range(5)]
    if rung == "ladder_any":
        shapes += [(4095, 4097, 255), (2048, 2048, 2048)]
    for beta in (0.5, 0.0, -1.0):
        check(ns[rung], rung, shapes, beta)


def tile_shapes(cfg, count):
    rnd = random.Random()
    return [(cfg["BM"] * rnd.randint(1, 16), cfg["BN"] * rnd.randint(1, 16), cfg["BK"] * rnd.randint(1, 40))
            for _ in range(count)]


@pytest.mark.parametrize("rung", list(TILE_RUNGS))
def test_whole_tile_rungs(ns, rung):
    cfg = ns[TILE_RUNGS[rung]]
    shapes = [(cfg["BM"], cfg["BN"], cfg["BK"]), (cfg["BM"] * 11, cfg["BN"] * 3, cfg["BK"] * 2),
              (1024, 1024, 1024), (2048, 1024, 4096)] + tile_shapes(cfg, 4)
    for beta in (0.5, 0.0):
        check(ns[rung], rung, shapes, beta)


@pytest.mark.parametrize("stages", [3, 4])
def test_ring_with_more_stages(ns, stages):
    cfg = dict(ns["DBUF_CONFIG"], STAGES=stages)
    shapes = [(128, 128, 32), (128, 256, 64), (256, 128, 32 * stages), (256, 256, 32 * (stages + 3))] + tile_shapes(cfg, 3)
    check(ns["dbuf_gemm"](cfg), f"ladder_dbuf STAGES={stages}", shapes, 0.5)
    check(ns["any_gemm"](dict(ns["ANY_CONFIG"], STAGES=stages)), f"ladder_any STAGES={stages}", ODD, 0.5)


@pytest.mark.parametrize("group", [1, 3, 5])
def test_swizzle_with_other_groups(ns, group):
    cfg = dict(ns["SWIZZLE_CONFIG"], GROUP_M=group)
    check(ns["swizzle_gemm"](cfg), f"ladder_swizzle GROUP_M={group}",
          [(128 * (2 * group + 1), 384, 64), (128 * 7, 128 * 9, 96)] + tile_shapes(cfg, 2), 0.5)


def test_beta_zero_does_not_read_c(ns):
    import torch

    for rung in ["ladder_naive", "ladder_smem", "ladder_any"]:
        A = torch.randn(1000, 999, device="cuda").half()
        B = torch.randn(999, 1001, device="cuda").half()
        C = torch.full((1000, 1001), float("nan"), device="cuda").half()
        ns[rung](A, B, C, 1.0, 0.0)
        torch.cuda.synchronize()
        assert torch.isfinite(C).all(), f"{rung}: beta = 0 read C"


@pytest.mark.parametrize("pad", [1, 3, 8])
def test_padded_rows(ns, pad):
    for rung in ANY_SHAPE_RUNGS:
        check_padded_rows(ns[rung], rung, pad)


@pytest.mark.parametrize("shift", [1, 3, 4])
def test_misaligned_operands(ns, shift):
    import torch

    M, N, K = 513, 384, 640
    A = torch.randn(M * K + shift, device="cuda").half()[shift:].view(M, K)
    B = torch.randn(K * N + shift, device="cuda").half()[shift:].view(K, N)
    C = torch.randn(M * N + shift, device="cuda").half()[shift:].view(M, N)
    ref = A.double() @ B.double() - C.double()
    ns["ladder_any"](A, B, C, 1.0, -1.0)
    torch.cuda.synchronize()
    err = float((C.double() - ref).norm() / ref.norm())
    assert err < 1e-3, f"ladder_any with operands {2 * shift} bytes off 16-byte alignment: relative error {err:.2e}"


def test_tutorial_rule_faults_and_the_aligned_rule_does_not():
    import gemmlab

    demo: dict = {"ARCH": gemmlab.current_arch(), "gemmlab": gemmlab}
    exec(cell_by_grade_id("seed_fault_kernel"), demo)
    src, job = demo["TILE_COPY_SRC"], demo["TILE_COPY_JOB"]
    assert gemmlab.run_isolated(job, src, (), (1024, 1024), timeout_s=120) is True
    with pytest.raises(gemmlab.running.isolate.IsolatedJobError) as fault:
        gemmlab.run_isolated(job, src, (), (1000, 999), timeout_s=120)
    assert "misaligned" in (fault.value.cuda_error or ""), fault.value
    assert gemmlab.run_isolated(job, src, ("-DCHECK_ALIGNMENT",), (1000, 999), timeout_s=120) is True


def test_wmma_loads_become_ldmatrix(ns):
    sass = ns["ladder_any"].build().sass()
    assert "LDSM" in sass and "HMMA" in sass and "LDGSTS" in sass


@pytest.mark.timing
def test_ladder_table(ns):
    """Not a pass/fail on speed: prints every rung's TFLOPS and ratio at 4096^3 (the notebook's chart)."""
    import gemmlab

    for rung in ["ladder_naive", "ladder_smem", "ladder_wmma", "ladder_dbuf", "ladder_swizzle", "ladder_any"]:
        r = gemmlab.bench_gemm(ns[rung], shape=(4096, 4096, 4096), convention="nn", beta=0.0, label=rung)
        print(f"{rung:15s} {r.tflops:7.1f} TFLOPS  cuBLAS {r.cublas_tflops:6.1f}  ratio {r.ratio:.3f}")
        assert r.tflops > 0


@pytest.mark.slow
def test_the_tile_order_cell_probes_the_solution_on_the_gpu():
    printed = graded("test_swizzle_order")
    assert "ladder_swizzle on the GPU: the grouped order on a 11 x 3 grid of tiles (GROUP_M = 8)" in printed, printed
    assert "on the GPU: the grouped order on a 7 x 4 grid of tiles (GROUP_M = 3)" in printed, "the hidden test probes another band"


#: Row-major orders a hostile student hides from the CPU's reading of the source: the probe must find them.
ROW_MAJOR_HIDDEN = {
    "behind a macro": "#define ORDER make_int2(pid / tiles_n, pid % tiles_n)\n    return ORDER;\n",
    "behind a branch": "    if (pid >= 0) { return make_int2(pid / tiles_n, pid % tiles_n); }\n    return make_int2(0, 0);\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ROW_MAJOR_HIDDEN))
def test_a_row_major_order_the_cpu_cannot_read_fails_the_probe(name):
    with pytest.raises(AssertionError, match=r"CTA 1 computes tile \(0, 1\) of the 11 x 3 grid"):
        graded("test_swizzle_order", {"swizzle_src": swizzle_body(ROW_MAJOR_HIDDEN[name])})
