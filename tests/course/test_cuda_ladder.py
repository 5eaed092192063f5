"""Notebook 08 (the raw-CUDA ladder) without a GPU: every rung's solution kernel, taken from the
solutions notebook by cell tag, compiles for sm_90a with the instructions its rung is about; the
launcher refuses calls it cannot serve; the bank exercise agrees with gemmlab's bank model; and
benchmarks/solutions.py finds each rung with the cells it depends on."""
from __future__ import annotations

import importlib.util
import sys

import nbformat
import pytest
import torch

from tests.support import ROOT
from tests.support.kernel_resources import assert_no_spills
import solution_cells  # noqa: E402
from autograder.cell_metadata import grade_id as grade_id_of  # noqa: E402

ASSIGNMENT = "08_cuda_ladder"
TAGS = ["kernel:ladder_launch", "kernel:ladder_naive", "kernel:ladder_smem", "kernel:ladder_wmma_common",
        "kernel:ladder_wmma", "kernel:ladder_pipe", "kernel:ladder_swizzle_src", "kernel:ladder_any"]
RUNGS = ["ladder_naive", "ladder_smem", "ladder_wmma", "ladder_dbuf", "ladder_swizzle", "ladder_any"]


@pytest.fixture(scope="module")
def ns():
    return solution_cells.load_namespace(ASSIGNMENT, TAGS)


def cell_by_grade_id(grade_id: str) -> str:
    nb = nbformat.read(solution_cells.notebook_path(ASSIGNMENT), as_version=4)
    hits = [c.source for c in nb.cells if grade_id_of(c) == grade_id]
    assert len(hits) == 1, f"expected one cell with grade_id {grade_id!r}"
    return hits[0]


@pytest.mark.parametrize("rung", RUNGS)
def test_rung_compiles_for_sm90a(ns, rung):
    kernel = ns[rung].build("sm_90a")
    ptx, res = kernel.ptx, kernel.resources
    assert_no_spills(res, rung)
    if rung not in ("ladder_naive", "ladder_smem"):   # the WMMA rungs: accumulators stay in registers
        assert res.stack_frame_bytes == 0, f"{rung} keeps {res.stack_frame_bytes} B in local memory: {res}"
    tensor_cores = "wmma.mma.sync" in ptx
    async_copies = "cp.async" in ptx
    assert tensor_cores == (rung not in ("ladder_naive", "ladder_smem")), f"{rung}: WMMA from rung 3 on only"
    assert async_copies == (rung in ("ladder_dbuf", "ladder_swizzle", "ladder_any")), f"{rung}: cp.async from rung 4 on"


@pytest.mark.parametrize("stages", [3, 4])
def test_ring_compiles_for_more_stages(ns, stages):
    gemm = ns["dbuf_gemm"](dict(ns["DBUF_CONFIG"], STAGES=stages))
    assert "cp.async.wait_group" in gemm.build("sm_90a").ptx
    ring = ns["any_gemm"](dict(ns["ANY_CONFIG"], STAGES=stages))
    assert_no_spills(ring.build("sm_90a").resources, f"the {stages}-stage ring")


def test_last_rung_tests_once_per_cta_and_the_ring_loader_has_fixed_trip_counts(ns):
    # The speed of the last rung rests on these two (H100, 4096^3: 0.34x without, about 0.45x with).
    assert "bool interior" in ns["ANY_SRC"] and "load_tile_aligned(A, B" in ns["ANY_SRC"]
    assert "i < BM * BK / 8 / THREADS" in ns["PIPE_SRC"] and "i < BK * BN / 8 / THREADS" in ns["PIPE_SRC"]


def test_any_rung_uses_aligned_arrays_and_a_scalar_tail(ns):
    src = ns["ANY_SRC"] + ns["WMMA_COMMON"]
    assert "__align__(16) half out[8]" in src and "% 16 == 0" in src
    ptx = ns["ladder_any"].build("sm_90a").ptx
    assert "cp.async.ca.shared.global" in ptx or "cp.async.cg.shared.global" in ptx
    assert "ld.global.u16" in ptx or "ld.global.nc.u16" in ptx or "ld.global.b16" in ptx, "no element-by-element loads"


def test_dynamic_smem_of_the_ring(ns):
    assert ns["ring_smem"](ns["DBUF_CONFIG"]) == 2 * (128 * 32 + 32 * 128) * 2
    assert ns["ring_smem"](ns["ANY_CONFIG"]) == 4 * (256 * 72 + 64 * 136) * 2   # 212 KiB: one CTA per SM
    assert ns["ANY_CONFIG"]["STAGES"] == 4 and ns["ANY_CONFIG"]["PAD"] == 8
    assert ns["warps_block"](ns["ANY_CONFIG"]) == 256          # 4 x 2 warps of 64 x 64
    assert ns["warps_block"](dict(ns["ANY_CONFIG"], WARPS_N=4)) == 512   # read at launch: configure() changes it


def test_launcher_refuses_what_a_rung_cannot_serve(ns):
    import gemmlab

    h = torch.float16
    with pytest.raises(gemmlab.LaunchError, match="whole tiles"):
        ns["ladder_wmma"](torch.empty(100, 40, dtype=h), torch.empty(40, 72, dtype=h), torch.empty(100, 72, dtype=h), 1.0, 0.0)
    with pytest.raises(gemmlab.LaunchError, match="16-byte aligned"):
        big = torch.empty(128 * 128 + 3, dtype=h)
        ns["ladder_dbuf"](big[3:].view(128, 128), torch.empty(128, 128, dtype=h), torch.empty(128, 128, dtype=h), 1.0, 0.0)
    with pytest.raises(gemmlab.LaunchError, match="shapes do not fit"):
        ns["ladder_any"](torch.empty(4, 8, dtype=h), torch.empty(9, 4, dtype=h), torch.empty(4, 4, dtype=h), 1.0, 0.0)
    with pytest.raises(gemmlab.LaunchError, match="float16"):
        ns["ladder_naive"](torch.empty(4, 8), torch.empty(8, 4), torch.empty(4, 4), 1.0, 0.0)
    assert ns["CONVENTION"] == "nn"


def test_placeholder_stops_the_build_with_a_message(ns):
    from gemmlab.notebook.nbhelpers import ExerciseNotDone

    stub = ns["PIPE_SRC"].replace("__pipeline_commit();", "# YOUR CODE HERE\nraise NotImplementedError()", 1)
    gemm = ns["ladder_gemm"]("ladder_dbuf", [("COMMON", ns["COMMON"]), ("WMMA_COMMON", ns["WMMA_COMMON"]),
                                             ("PIPE_SRC (rung 4)", stub)], grid=lambda M, N, c: 1, block=256,
                             config=ns["DBUF_CONFIG"])
    with pytest.raises(ExerciseNotDone, match="PIPE_SRC"):
        gemm.build("sm_90a")


def test_fault_demo_kernel_compiles_both_ways():
    import gemmlab

    ns: dict = {"ARCH": "sm_90a", "gemmlab": gemmlab}
    exec(cell_by_grade_id("seed_fault_kernel"), ns)
    plain = gemmlab.compile(ns["TILE_COPY_SRC"], "tile_copy", arch="sm_90a").ptx
    checked = gemmlab.compile(ns["TILE_COPY_SRC"], "tile_copy", arch="sm_90a", options=("-DCHECK_ALIGNMENT",)).ptx
    assert "cp.async" in plain and "cp.async" in checked and plain != checked


def test_row_address_solution_matches_the_bank_model():
    from gemmlab.seeing import banks

    ns: dict = {}
    exec(cell_by_grade_id("row_addresses"), ns)
    fn = ns["wmma_row_addresses"]
    assert fn(136)[:9] == [0, 272, 544, 816, 1088, 1360, 1632, 1904, 8 * 272]
    assert fn(136)[16] == 16 and fn(40, 16, 8)[0] == (16 * 40 + 8) * 2
    expected = {32: 16, 40: 4, 128: 32, 136: 4, 144: 8, 152: 4}
    got = {ld: banks.analyze(fn(ld), "ldmatrix.x4").wavefronts for ld in expected}
    assert got == expected


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_solutions_08", ROOT / "benchmarks" / "solutions.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_benchmark_registry_has_every_rung(bench):
    names = [n for a, n in bench.KERNELS if a == ASSIGNMENT]
    assert names == RUNGS
    tags = bench.tags_for(ASSIGNMENT, "ladder_any")
    assert {"kernel:ladder_pipe", "kernel:ladder_swizzle_src", "kernel:ladder_any"} <= set(tags)
    assert "kernel:ladder_dbuf" not in tags and "kernel:ladder_naive" not in tags


@pytest.mark.parametrize("rung", ["ladder_wmma", "ladder_any"])
def test_benchmark_loads_the_rung_with_its_declared_checks(bench, rung):
    fn, ns = bench.load_kernel(ASSIGNMENT, rung)
    assert bench.convention_of(fn, ns, rung) == "nn"
    assert bench.declared(ns, rung, "DTYPES", bench.DTYPES) == ["float16"]
    shapes = bench.declared(ns, rung, "CHECK_SHAPES", bench.ODD_SHAPES)
    if rung == "ladder_any":
        assert shapes == bench.ODD_SHAPES
    else:
        cfg = ns["WMMA_CONFIG"]
        assert all(m % cfg["BM"] == 0 and n % cfg["BN"] == 0 and k % cfg["BK"] == 0 for m, n, k in shapes)
    assert fn.build("sm_90a").ptx


def test_recorded_ratios_are_the_benchmark_rows_they_cite():
    """The chart's RECORDED table (shown without a GPU) holds benchmarks/solutions_best.json's 4096^3 rows of each
    rung on each GPU, with their dates: no number in it that the benchmark did not measure."""
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    ns: dict = {"np": np, "plt": plt, "show": plt.close}
    exec(cell_by_grade_id("chart"), ns)          # draws the recorded chart: it must draw without a GPU
    best = json.loads((ROOT / "benchmarks" / "solutions_best.json").read_text())["devices"]
    kernels = dict(zip(ns["RUNGS"], RUNGS))
    shown = 0
    for gpu, rows in ns["RECORDED"].items():
        for label, (ratio, tflops, cublas, date) in rows.items():
            row = best[gpu][kernels[label]]["4096x4096x4096 float16"]
            assert (ratio, tflops, cublas, date) == (row["ratio"], row["tflops"], row["cublas_tflops"], row["date"]), (gpu, label)
            shown += 1
    assert set(ns["RECORDED"]["NVIDIA H100 80GB HBM3"]) == set(ns["RUNGS"]), "every rung has its H100 ratio"
    assert shown == sum(1 for gpu in best for k in best[gpu] if k in RUNGS and "4096x4096x4096 float16" in best[gpu][k])


def test_the_readout_picker_profiles_only_the_rung_picked(capsys):
    """The readout cell profiles nothing until a rung is picked where profiling is real (a GPU or the pool, which
    counts 12 profiles per student per hour), one profile per pick, with the rung's recording named; without
    either it shows the last rung's recording at once; a rung that cannot be profiled is said so."""
    import types

    import ipywidgets as ipw
    import matplotlib

    matplotlib.use("Agg")
    import gemmlab
    from gemmlab.profiling import recorded_readout

    calls = []

    def profile(fn, shape, convention, recorded):
        calls.append((fn.kernel_name, tuple(shape), convention, recorded))
        if recorded == "ladder_naive":
            raise gemmlab.GemmlabError("ladder_naive is not written yet")
        return recorded_readout(recorded)

    fake = types.SimpleNamespace(profile=profile, GemmlabError=gemmlab.GemmlabError)
    for live in (True, False):
        calls.clear()
        shown: list = []
        ns: dict = {"gemmlab": fake, "ipw": ipw, "display": shown.append, "GPU": live, "BENCH_SHAPE": (4096,) * 3,
                    "nbh": types.SimpleNamespace(uses_pool=lambda: False), "ratio_text": lambda label: f"{label}: ratio",
                    **{name: types.SimpleNamespace(kernel_name=name) for name in RUNGS}}
        exec(cell_by_grade_id("readouts"), ns)
        picker = next(x for x in shown if isinstance(x, ipw.VBox)).children[0]
        capsys.readouterr()
        if live:
            assert calls == [] and picker.value == "(pick a rung)"
            picker.value = "3 WMMA"
            assert calls == [("ladder_wmma", (4096, 4096, 4096), "nn", "ladder_wmma")]
            picker.value = "1 naive"
            assert len(calls) == 2 and "No readout of ladder_naive: ladder_naive is not written yet" in capsys.readouterr().out
        else:
            assert calls == [("ladder_any", (4096, 4096, 4096), "nn", "ladder_any")] and picker.value == "6 any size"
