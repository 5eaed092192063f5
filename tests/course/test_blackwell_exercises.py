"""Notebook 07's Blackwell appendix without a Blackwell GPU: the solution kernels compile for sm_100a and
pass every test cell (visible and hidden), read from their machine code; the events the notebook shows are
the ring's, named as the text names them; the run on many CTAs is a demonstration, not a graded test; and,
on an sm_100 GPU only, the GEMM is correct."""
from __future__ import annotations

import json

import pytest
import torch

from tests.support import hopper07
from autograder.cell_metadata import grade_id


@pytest.fixture(scope="module")
def ns() -> dict:
    return hopper07.blackwell_namespace()


@pytest.mark.parametrize("test_cell", ["test_bw_tile", "test_bw_grid", "test_bw_kloop", "test_bw_tmem"])
def test_solution_passes_the_blackwell_test_cells(ns: dict, test_cell: str) -> None:
    hopper07.run(ns, [test_cell])


def test_solution_events_are_the_rings(ns: dict) -> None:
    events = ns["bw_gemm_events"]
    k, stages = ns["BW_TEST_K_TILES"], ns["BW_STAGES"]
    assert [e for e in events if e.startswith("init")] == [f"init {b}" for b in ns["bw_gemm_barriers"](stages)]
    waits = [e for e in events if e.startswith("wait ")]
    assert waits == ([f"wait empty[{t % stages}] {((t // stages) % 2) ^ 1}" for t in range(k)]      # producer
                     + [f"wait full[{t % stages}] {(t // stages) % 2}" for t in range(k)]         # MMA warp
                     + ["wait acc_full 0"])                                                     # epilogue
    assert [e for e in events if e.startswith("commit")] == [f"commit empty[{t % stages}]" for t in range(k)] + \
        ["commit acc_full"]
    assert [e for e in events if e.startswith("expect-tx")] == [f"expect-tx full[{t % stages}]" for t in range(k)]
    assert events.count("mma off") == 1 and events.count("mma on") == 4 * k - 1 and events.count("tma") == 2 * k
    assert [e for e in events if e.startswith(("alloc", "relinquish", "dealloc", "ld."))] == [
        "alloc 128", *["ld.x32"] * 4, "relinquish", "dealloc 128"]


def test_the_tile_shows_one_event_per_instruction(ns: dict) -> None:
    """Exercise 7's kernel as the notebook prints it: a wait ptxas retries (inline or after the EXIT) and the retried
    TMEM allocation show once."""
    assert ns["bw_events"](ns["bw_built"], ns["BW_TILE_BARRIERS"]) == [
        "init tma_bar", "init mma_bar", "alloc 128", "bar.sync", "expect-tx tma_bar", "tma", "tma", "wait tma_bar 0",
        "mma off", "mma on", "mma on", "mma on", "commit mma_bar", "wait mma_bar 0", *["ld.x32"] * 4, "bar.sync",
        "relinquish", "dealloc 128"]


def test_the_run_on_many_ctas_is_a_demonstration_and_exercise_10_keeps_its_points() -> None:
    """The many-CTA run paid again for what test_bw_grid checks and could be graded on an sm_100 GPU only, so every
    Hopper grader reported 07 as not all graded: it is now an ungraded cell the grader does not run, and the grid test
    carries Exercise 10's two points (30 in all, as before)."""
    nb = json.loads(hopper07.NOTEBOOK.read_text())
    meta = {grade_id(c): c["metadata"] for c in nb["cells"]}
    assert "test_bw_many_ctas" not in meta
    assert meta["bw_many_ctas"]["nbgrader"]["grade"] is False and meta["bw_many_ctas"]["gemmlab"] == {"display_only": True}
    assert meta["test_bw_grid"]["nbgrader"]["points"] == 2
    assert sum(m["nbgrader"].get("points", 0) for m in meta.values() if m.get("nbgrader", {}).get("grade")) == 30
    assert not any(m.get("gemmlab", {}).get("needs_arch", "sm_90") != "sm_90" for m in meta.values())
    assert "Exercise 10 (2 points)" in hopper07.cells()["md_bw_ex10"]


def test_the_demonstration_says_it_needs_a_blackwell_gpu(ns: dict, capsys) -> None:
    hopper07.run(ns, ["bw_many_ctas"])
    assert "sm_100 GPU (B200, GB200) only" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_blackwell_gemm_is_correct_on_sm100(dtype) -> None:
    import gemmlab

    if not gemmlab.running.gpu.current_arch().startswith("sm_10"):
        pytest.skip("the Blackwell GEMM runs only on an sm_100 GPU (B200, GB200)")
    ns = hopper07.blackwell_namespace()
    shapes = [(128, 128, 64), (128, 128, 64 * 9), (256, 384, 512), (1000, 1001, 999), (2048, 2048, 1024)]
    result = gemmlab.check_gemm(ns["blackwell_gemm"], dtype=dtype, shapes=shapes, timeout_s=300)
    assert result.passed, str(result)
