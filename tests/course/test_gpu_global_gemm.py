"""Notebook 05 on a GPU: the solution kernels (C++ and DSL, from the solutions notebook by cell
tag) on odd/unaligned shapes, padded rows and beta = 0; their speed against the target; and
gemmlab.running.isolate with a kernel that really faults (misaligned address) or hangs in the child."""
from __future__ import annotations

import random

import pytest

import solution_cells  # noqa: E402
from tests.support.graded_cells import cells_by_grade_id, run_cells  # noqa: E402
from tests.support.nn_gemm_cases import check_padded_rows  # noqa: E402

pytestmark = pytest.mark.gpu
ASSIGNMENT = "05_global_gemm"
SHAPES = [(1, 1, 1), (3, 5, 7), (17, 33, 9), (129, 257, 65), (255, 1, 300), (1, 255, 513), (1000, 1001, 999),
          (1, 4096, 7), (129, 3, 515), (128, 128, 32), (256, 384, 64), (1000, 1002, 1004), (1000, 1004, 1000),
          (64, 1000, 1024), (1024, 1024, 1024)]
#: What the lead's brief asks of the solutions; the notebook's graded bar is 0.2.
TARGET_RATIO = 0.25


@pytest.fixture(scope="module", params=["cpp", "dsl"])
def gemm(request):
    ns = solution_cells.load_namespace(
        ASSIGNMENT, ["kernel:gemm05_vec", "kernel:gemm05_launch", f"kernel:gemm05_{request.param}"])
    return request.param, ns[f"gemm05_{request.param}"]


def test_correct_on_odd_and_unaligned_shapes(gemm):
    import gemmlab

    name, fn = gemm
    rnd = random.Random()
    shapes = SHAPES + [(rnd.randint(1, 1500), rnd.randint(1, 1500), rnd.randint(1, 1500)) for _ in range(6)]
    import torch

    for dtype in (torch.float16, torch.bfloat16):
        for beta in (0.5, 0.0, -1.0):
            result = gemmlab.check_gemm(fn, convention="nn", shapes=shapes, dtype=dtype,
                                        alpha=rnd.choice([1.0, -0.75]), beta=beta)
            assert result.passed, f"{name}, {dtype}, beta={beta}:\n{result}"


def test_beta_zero_does_not_read_c(gemm):
    import torch

    name, fn = gemm
    A = torch.randn(1000, 999, device="cuda").half()
    B = torch.randn(999, 1001, device="cuda").half()
    C = torch.full((1000, 1001), float("nan"), device="cuda").half()
    fn(A, B, C, 1.0, 0.0)
    torch.cuda.synchronize()
    assert torch.isfinite(C).all(), f"{name}: beta = 0 read C"


def test_without_step_5_4_the_dsl_kernel_is_right_for_one_k_tile_only():
    """Step 5.3's test runs the kernel before its K loop is written: the given kernel then multiplies the one
    (partial) k-tile, right for every K <= 32 and wrong beyond."""
    import gemmlab

    source = solution_cells.cell_source(ASSIGNMENT, "kernel:gemm05_dsl")
    head, loop = source.split("def k_loop(cta):", 1)
    stub = head + "def k_loop(cta):\n    raise NotImplementedError()\n"
    ns = solution_cells.load_namespace(ASSIGNMENT, ["kernel:gemm05_vec", "kernel:gemm05_launch", "kernel:gemm05_dsl"],
                                       sources={"kernel:gemm05_dsl": stub})
    fn = ns["gemm05_dsl"]
    one_tile = gemmlab.check_gemm(fn, "nn", shapes=[(300, 200, 32), (129, 257, 7), (1000, 1001, 17)], beta=0.5)
    assert one_tile.passed, str(one_tile)
    assert not gemmlab.check_gemm(fn, "nn", shapes=[(256, 256, 64)], beta=0.5).passed


@pytest.mark.parametrize("pad", [1, 3, 8])
def test_padded_rows(gemm, pad):
    name, fn = gemm
    check_padded_rows(fn, name, pad)


@pytest.mark.timing
def test_speed_against_cublas(gemm):
    import gemmlab

    name, fn = gemm
    bar = gemmlab.performance_bar(fn, TARGET_RATIO, convention="nn", beta=0.0, label=f"gemm05_{name}")
    print(bar)
    bar.raise_if_failed()


def _naive():
    """The notebook's own naive kernel and the child's job (section 2), as its cell defines them."""
    ns = run_cells(ASSIGNMENT, ["setup", "faulty_kernel"])
    return ns["VEC8_SRC"], ns["NAIVE_JOB"]


def test_isolated_fault_is_named_and_this_process_survives():
    import torch

    import gemmlab
    from gemmlab.running import faults
    from gemmlab.running.isolate import IsolatedJobError

    naive, job = _naive()
    x = torch.arange(8.0, device="cuda")          # this process has a live context before...
    assert gemmlab.run_isolated(job, naive, (256, 256, 256)) < 0.1
    with pytest.raises(IsolatedJobError) as info:
        gemmlab.run_isolated(job, naive, (1000, 1001, 999), timeout_s=120)
    assert info.value.cuda_error == "misaligned address", str(info.value)
    assert faults.lost_reason() is None
    assert (x * 2).sum().item() == 56.0             # ...and after the child's fault


def test_isolated_hang_is_killed():
    import gemmlab

    hang = '''
import torch, gemmlab
src = r"""
__global__ void spin(int* flag) { while (atomicAdd(flag, 0) == 0) { } }
"""
kernel = gemmlab.compile(src, "spin")
flag = torch.zeros(1, dtype=torch.int32, device="cuda")
kernel(flag, grid=1, block=1)
torch.cuda.synchronize()                     # never returns: the parent must kill us
'''
    with pytest.raises(gemmlab.KernelTimeoutError, match="killed"):
        gemmlab.run_isolated(hang, timeout_s=20)


# ------------------------------------------------------------------ step 5.1's tile order, measured from the kernel
#
# The CPU part of step 5.1's test reads tile_of; the GPU part measures the tile each CTA of the kernel really
# writes (gemmlab.techniques.probe_tile_order). Three ways around the CPU part, each through the notebook's own
# test cells: option A's step 5.2 cell overwriting m_tile and n_tile after tile_of; a DSL tile_of_dsl that answers
# plain integers in grouped order and the kernel's integers in row-major order; tile_of_dsl rebound to row-major
# order after step 5.1's test (the performance bar's test measures the order of the kernel it timed).

CONTEXT = ["setup", "launchers", "vector_bytes"]
CPP = ["gemm_cpp_tiles", "gemm_cpp_load_tile", "gemm_cpp_setup", "gemm_cpp", "gemm_cpp_partitions", "gemm_cpp_first_tile",
       "gemm_cpp_k_loop", "gemm_cpp_whole", "build_cpp"]
DSL = ["gemm_dsl_load_tile", "gemm_dsl_host", "gemm_dsl_kernel", "gemm_dsl_first_tile", "gemm_dsl", "build_dsl",
       "dsl_step_facts"]


def _edit(gid: str, old: str, new: str) -> dict[str, str]:
    source = cells_by_grade_id(ASSIGNMENT)[gid]
    assert source.count(old) == 1, f"{gid} no longer holds {old!r}: update the test"
    return {gid: source.replace(old, new)}


def _tile_order_test(tmp_path, option_cells, replace=None):
    return run_cells(ASSIGNMENT, CONTEXT + option_cells + ["step_checks", "test_tile_order"], replace, folder=tmp_path)


@pytest.mark.parametrize("option", ["cpp", "dsl"])
def test_step_5_1_measures_the_solutions_order_on_the_gpu(tmp_path, option):
    ns = _tile_order_test(tmp_path, CPP if option == "cpp" else DSL)
    assert ns["_probed"], "the GPU part measured no option"


ROW_MAJOR_CPP = ("    // ### BEGIN SOLUTION\n    // global -> shared",
                 "    m_tile = int(blockIdx.x) / ((N + BN - 1) / BN);     // row-major after all, tiles and all\n"
                 "    n_tile = int(blockIdx.x) % ((N + BN - 1) / BN);\n"
                 "    gA = local_tile(mA, tileA, make_coord(m_tile, _));\n"
                 "    gB = local_tile(mB, tileB, make_coord(n_tile, _));\n"
                 "    cA = local_tile(make_identity_tensor(shape(mA)), tileA, make_coord(m_tile, _));\n"
                 "    cB = local_tile(make_identity_tensor(shape(mB)), tileB, make_coord(n_tile, _));\n"
                 "    // ### BEGIN SOLUTION\n    // global -> shared")
TWO_FACED_DSL = ("    per_group = group * tiles_n\n",
                 "    if not isinstance(pid, int):           # the kernel's integers: row-major\n"
                 "        return pid // tiles_n, pid % tiles_n\n    per_group = group * tiles_n\n")


def test_step_5_1_rejects_a_cpp_kernel_that_overwrites_its_tile_after_tile_of(tmp_path):
    with pytest.raises(AssertionError, match="CTA 1 computes tile"):
        _tile_order_test(tmp_path, CPP, _edit("gemm_cpp", *ROW_MAJOR_CPP))


def test_step_5_1_rejects_a_dsl_tile_of_that_answers_plain_integers_in_another_order(tmp_path):
    with pytest.raises(AssertionError, match="CTA 1 computes tile"):
        _tile_order_test(tmp_path, DSL, _edit("gemm_dsl_load_tile", *TWO_FACED_DSL))


@pytest.mark.timing
def test_the_performance_bar_measures_the_order_of_the_kernel_it_timed(tmp_path):
    ns = _tile_order_test(tmp_path, DSL)
    rebind = tmp_path / "rebind.py"        # a cell of the student's after step 5.1's test
    rebind.write_text("def tile_of_dsl(pid, tiles_m, tiles_n, group):\n    return pid // tiles_n, pid % tiles_n\n")
    exec(compile(rebind.read_text(), str(rebind), "exec"), ns)
    with pytest.raises(AssertionError, match="CTA 1 computes tile"):
        run_cells(ASSIGNMENT, ["perf_measure_slow", "test_perf_bar_slow"], namespace=ns, folder=tmp_path)
