"""Notebook 07's solution kernels on a Hopper GPU: correct (fp16, bf16) on aligned, partial-tile,
odd and many-tiles-per-CTA shapes, and the deliberately
deadlocking phase-bug kernel stopped and reported by gemmlab.run_isolated. The Blackwell tile
runs only on an sm_100 GPU. Kernels come from the solutions notebook by cell tag. Their speed against
cuBLAS is benchmarks/solutions.py's table, not a test.

    pytest -m gpu tests/course/test_gpu_hopper.py -v
"""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import solution_cells  # noqa: E402

pytestmark = pytest.mark.gpu

ASSIGNMENT = "07_hopper"
TAGS = ["kernel:hopper_common", "kernel:hopper_one_tile", "kernel:hopper_pipelined", "kernel:hopper_ws",
        "kernel:hopper_bw_tile"]
#: The issue's targets for the capstone on an H100 (same-run ratio to cuBLAS, fp16 in, fp32 accumulate).
#: Shapes with partial tiles in M, N, K, many tiles per persistent CTA, and odd shapes (padded by tma_gemm).
SHAPES = [(128, 128, 64), (256, 384, 512), (1000, 1000, 1000), (129, 264, 72), (64, 136, 4096), (1, 8, 8),
          (2048, 2048, 2048), (4095, 4104, 1000), (17, 33, 9), (1000, 1001, 999), (3, 5, 7)]


@pytest.fixture(scope="module")
def ns() -> dict:
    import gemmlab

    if not gemmlab.running.gpu.current_arch().startswith("sm_90"):
        pytest.skip("the Hopper kernels need an sm_90 GPU (H100/H200)")
    return solution_cells.load_namespace(ASSIGNMENT, TAGS)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_one_tile_is_correct(ns: dict, dtype) -> None:
    import gemmlab

    result = gemmlab.check_gemm(ns["hopper_one_tile"], dtype=dtype, shapes=[(64, 128, 64)], timeout_s=60)
    assert result.passed, str(result)


@pytest.mark.parametrize("name", ["hopper_pipelined", "hopper_ws"])
@pytest.mark.parametrize("suite", ["aligned", "shapes"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_kernel_is_correct(ns: dict, name: str, suite: str, dtype) -> None:
    import gemmlab

    result = gemmlab.check_gemm(ns[name], dtype=dtype, shapes=SHAPES if suite == "shapes" else suite, timeout_s=300)
    assert result.passed, f"{name} {dtype} {suite}:\n{result}"


_CHILD = """
import sys, torch, gemmlab
sys.path.insert(0, kwargs["folder"])
import hopper_child as k
A, B, D = (torch.randn(s, device="cuda", dtype=torch.float16) for s in ((512, 512), (512, 512), (512, 512)))
gemmlab.dsl.gemm_fn(getattr(k, kwargs["fn"]))(A, B, D)
torch.cuda.synchronize()
result = float((D.float() - A.float() @ B.float().T).abs().max())
"""


def _child_module() -> str:
    folder = str(solution_cells.cell_folder("07-test"))
    source = "\n\n".join(solution_cells.cell_source(ASSIGNMENT, t) for t in TAGS[:3])
    Path(folder, "hopper_child.py").write_text(source)
    return folder


def test_phase_bug_deadlock_is_stopped_and_reported(ns: dict) -> None:
    import gemmlab
    from gemmlab.errors import KernelTimeoutError

    folder = _child_module()
    err = gemmlab.run_isolated(_CHILD, timeout_s=120, folder=folder, fn="pipelined_jit")
    assert err < 1.0, f"the correct pipelined kernel, run the same way, is wrong (max error {err})"
    with pytest.raises(KernelTimeoutError):
        gemmlab.run_isolated(_CHILD, timeout_s=30, folder=folder, fn="pipelined_phase_bug_jit")
    # this process's CUDA context is untouched
    x = torch.ones(4, device="cuda")
    assert float(x.sum()) == 4.0


def test_blackwell_tile_runs_on_blackwell() -> None:
    import gemmlab

    if not gemmlab.running.gpu.current_arch().startswith("sm_10"):
        pytest.skip("the Blackwell tile (tcgen05, TMEM) runs only on an sm_100 GPU; CI compiles it for sm_100a")
    ns = solution_cells.load_namespace(ASSIGNMENT, TAGS)
    for dtype in (torch.float16, torch.bfloat16):
        result = gemmlab.check_gemm(ns["hopper_bw_tile"], dtype=dtype, shapes=[(128, 128, 64)], timeout_s=60)
        assert result.passed, str(result)


def test_the_warp_specialised_kernels_timeline_shows_each_role_in_its_states(ns: dict) -> None:
    """gemmlab.timeline on the solution's hopper_ws (the notebook's timeline cell): the producer warp loads and waits
    for slots, the consumer warps wait for tiles, issue wgmmas, wait for them and run the epilogue; every mark is
    reached by whole warps and no warp runs out of records at 4096³."""
    import gemmlab

    roles = gemmlab.profiling.roles(producer=[0], idle=[1, 2, 3], consumers_1=range(4, 8), consumers_2=range(8, 12))
    timeline = gemmlab.timeline(ns["hopper_ws"], (4096, 4096, 4096), capacity=2048, ctas=4)
    assert timeline.source == "measured" and timeline.warps_per_cta == 12 and timeline.partial_marks == 0
    assert not [w for w in timeline.warnings() if "of the launch's" not in w], timeline.warnings()   # 4 CTAs traced
    shares = timeline.breakdown(timeline.ctas[0], roles)
    assert {"WAIT_SLOT", "LOAD"} <= set(shares["producer"])
    for group in ("consumers 1", "consumers 2"):
        assert {"WAIT_LOAD", "MMA", "WAIT_MMA", "EPILOGUE"} <= set(shares[group]), shares[group]
