"""Notebook 09's solution on a Hopper GPU: correct (fp16, bf16) on the visible suites and on
shapes of every kind the hidden test draws; the graded speed cell, run as it is in the notebook,
prints a record the leaderboard reads, and the solution earns the full speed points (S ≥ 0.9).

    pytest -m gpu tests/test_gpu_capstone.py -v -s          # -s prints the measured ratios
"""
from __future__ import annotations

import random

import pytest
import torch

import solution_cells  # noqa: E402
from tests.course.test_capstone import cells_by_id, run_speed_cell  # noqa: E402

from autograder.reports import leaderboard as lb  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def ns() -> dict:
    import gemmlab

    if not gemmlab.running.gpu.current_arch().startswith("sm_90"):
        pytest.skip("the capstone solution is a Hopper kernel: it needs an sm_90 GPU (H100/H200)")
    return solution_cells.load_namespace("09_capstone", ["kernel:capstone"])


def _hidden_like() -> list[tuple[int, int, int]]:
    r = random.randint
    return [(r(1, 16), r(1, 16), r(1, 16)), (r(1, 8), r(500, 3000), r(100, 2000)), (r(500, 3000), r(1, 8), r(100, 2000)),
            (r(1, 1500), r(1, 1500), 2 * r(1, 700) + 1), (r(100, 1500), 2 * r(50, 700) + 1, 8 * r(1, 200)),
            (r(1, 64), r(1, 64), r(3000, 9000)), (r(2000, 4200), r(2000, 4200), r(64, 1024)),
            (8 * r(100, 500), 8 * r(100, 500), 8 * r(8, 300)), (1, 1, 1), (4095, 4097, 4096), (8192, 1024, 2048)]


@pytest.mark.parametrize("suite", ["default", "odd", "hidden-like"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_solution_is_correct(ns: dict, suite: str, dtype) -> None:
    import gemmlab

    shapes = _hidden_like() if suite == "hidden-like" else suite
    result = gemmlab.check_gemm(ns["capstone_gemm"], dtype=dtype, shapes=shapes, timeout_s=300)
    assert result.passed, f"capstone solution, {dtype}, {suite}:\n{result}"



@pytest.mark.parametrize("settings", [{"CAP_STREAM_K": 1}, {"CAP_FEWEST_CLUSTERS": 0, "CAP_STREAM_K": 1}],
                         ids=["stream-K on the fewest clusters", "every cluster that fits, stream-K (before 2026-12-07)"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_stream_k_option_stays_correct(settings: dict, dtype) -> None:
    """Stream-K is off in the solution but kept as an option: on the fewest clusters it runs where a partial wave
    follows 8 full ones (8453 x 4096: 544 items, 9 waves of 61 clusters on an H100, the last with 56), and with
    every cluster that fits at 6144³ and 8192³. Each is correct there, with its partial tiles summed."""
    import gemmlab

    if not gemmlab.running.gpu.current_arch().startswith("sm_90"):
        pytest.skip("the capstone solution is a Hopper kernel: it needs an sm_90 GPU (H100/H200)")
    ns = solution_cells.load_namespace("09_capstone", ["kernel:capstone"])
    ns.update(settings)
    shapes = [(8453, 4096, 512), (8192, 8192, 1024), (6144, 6144, 768), (4096, 4096, 4096)]
    assert any(ns["cap_uses_stream_k"](m, n) for m, n, _ in shapes), "no shape here runs the stream-K build"
    result = gemmlab.check_gemm(ns["capstone_gemm"], dtype=dtype, shapes=shapes, timeout_s=600)
    assert result.passed, f"capstone with {settings}, {dtype}:\n{result}"


def test_the_grid_is_the_fewest_clusters_for_the_waves_on_this_gpu(ns: dict) -> None:
    """On the GPU the clusters that fit come from the occupancy query: at 4096³, 6144³ and 8192³ the items make
    whole waves of the clusters launched (64 on an H100 or H200, 66 fitting)."""
    import math

    most = ns["CAP_MAX_CLUSTERS"]
    for n in (4096, 6144, 8192):
        work = math.ceil(n / 256) * math.ceil(n / 256)
        c = ns["cap_clusters"](work)
        assert math.ceil(work / c) == math.ceil(work / most) and c <= most
        print(f"{n}³: {work} items, {most} clusters fit, {c} launched, {work / c:.2f} waves")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_solution_is_correct_on_shapes_a_leaderboard_secret_draws(ns: dict, dtype) -> None:
    """The speed test times shapes drawn near 4096³ and 8192³ when the grader holds a leaderboard secret
    (gemmlab.timing.leaderboard_draw): the solution is right on such shapes (partial tiles in M, N and K)."""
    import gemmlab
    from gemmlab.timing.leaderboard_draw import draw_runs

    shapes = sorted({r.shape for secret in ("one class", "another class") for r in draw_runs(secret)})
    result = gemmlab.check_gemm(ns["capstone_gemm"], dtype=dtype, shapes=shapes, timeout_s=600)
    assert result.passed, f"capstone solution, {dtype}, drawn shapes {shapes}:\n{result}"

def _graded_namespace(ns: dict) -> dict:
    import gemmlab
    from gemmlab.notebook import nbhelpers as nbh

    g: dict = {}
    exec("import json, math, random, re, time\nimport torch", g)
    g.update(gemmlab=gemmlab, nbh=nbh, GPU=True, ARCH=nbh.arch(), capstone_gemm=ns["capstone_gemm"],
             capstone_compile=ns["capstone_compile"], CAPSTONE_DESCRIPTION=ns["CAPSTONE_DESCRIPTION"])
    exec(cells_by_id()["test_helpers"].source, g)
    return g


@pytest.mark.timing
def test_speed_cell_records_and_the_solution_earns_full_speed_points(ns: dict) -> None:
    text, points = run_speed_cell(_graded_namespace(ns))
    print("\n" + text)
    record = lb.parse_record({"outputs": [{"output_type": "stream", "name": "stdout", "text": text}]})
    assert record is not None, f"no record line in the speed cell's output:\n{text}"
    ratios = lb.ratios_of(record)
    assert set(ratios) == {(n, d) for n in (4096, 8192) for d in ("float16", "bfloat16")}
    assert record["points"] == points
    assert points == 3.0, (f"the solution scores S = {record['score']:.3f} ({points:g} of 3 speed points); "
                           f"full marks need S >= 0.9. Ratios: {ratios}")



def test_the_capstones_timeline_holds_every_cta_of_the_launch(ns: dict) -> None:
    """The notebook's last-wave cell: gemmlab.timeline on the solution at 4096³ traces every CTA of the persistent
    grid (its consumers mark per segment, so the whole launch fits one report), whole warps, no warp out of records,
    and the CTA that finished last shows the producer's and the consumers' states."""
    import gemmlab

    timeline = gemmlab.timeline(ns["capstone_gemm"], (4096, 4096, 4096), capacity=1024,
                                names={40: "store partial", 41: "add partials"})
    assert timeline.source == "measured" and timeline.partial_marks == 0 and not timeline.warnings(), timeline.warnings()
    spans = timeline.sm_spans()
    assert len(spans) == timeline.grid_ctas == len(timeline.ctas)
    shares = timeline.breakdown(max(spans, key=lambda s: s[3])[1],
                                gemmlab.profiling.roles(producer=[0], consumers=range(4, 12)))
    assert {"LOAD", "WAIT_SLOT"} <= set(shares["producer"]) and {"MMA", "EPILOGUE"} <= set(shares["consumers"])
