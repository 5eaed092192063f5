"""Notebook 06 (pipelining): the schedule simulator, the bank report, and compile-only builds of
the solution kernels (CuTe C++ and CuTe DSL) taken from the solutions notebook by cell tag.

GPU runs of the same kernels are in tests/test_gpu_pipelining.py.
"""
from __future__ import annotations

import re

import nbformat
import pytest
import torch

from tests.support import ROOT
from tests.support.kernel_resources import read_resources
import solution_cells  # noqa: E402
from autograder.cell_metadata import grade_id  # noqa: E402

ASSIGNMENT = "06_pipelining"
NOTEBOOK = ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"


def _cells(*grade_ids: str) -> dict:
    """Run the given (untagged) notebook cells, in order, in a namespace like the notebook's."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    by_id = {grade_id(c): c.source for c in nb.cells}
    ns: dict = {}
    exec("import math, numpy as np, torch\nfrom gemmlab import layout as L, banks", ns)
    for gid in grade_ids:
        exec(by_id[gid], ns)
    return ns


@pytest.fixture(scope="module")
def schedule_ns() -> dict:
    return _cells("schedule_checker", "pipeline_schedule")


@pytest.mark.parametrize("k_tiles,stages", [(1, 2), (1, 5), (7, 2), (8, 3), (8, 4), (33, 7), (3, 6)])
def test_solution_schedule_passes(schedule_ns: dict, k_tiles: int, stages: int) -> None:
    ops = schedule_ns["pipeline_schedule"](k_tiles, stages)
    assert schedule_ns["check_schedule"](ops, k_tiles, stages) == len(ops)


def _solution_like(k, s, *, sync=True, commit_empty=True, wait=None, early_load=True):
    ops = []
    for i in range(s - 1):
        if i < k:
            ops.append(("load", i, i))
        ops.append(("commit",))
    for t in range(k):
        ops.append(("wait", s - 2 if wait is None else wait))
        if sync:
            ops.append(("sync",))
        nxt = t + s - 1
        if early_load and nxt < k:
            ops.append(("load", nxt, nxt % s))
        if nxt < k or commit_empty:
            ops.append(("commit",))
        ops.append(("compute", t, t % s))
        if not early_load and nxt < k:
            ops += [("load", nxt, nxt % s), ("commit",)]
    return ops


@pytest.mark.parametrize("planted,match", [
    (dict(sync=False), "not known complete"),                # no barrier: other threads' copies unseen
    (dict(commit_empty=False), "not known complete"),        # group count out of step at the end
    (dict(wait=0), "stalls on copies"),                       # waits for everything: not pipelined
    (dict(early_load=False), "no barrier since|not pipelined"),  # refills a slot right after reading it
])
def test_planted_schedule_bugs_are_caught(schedule_ns: dict, planted: dict, match: str) -> None:
    ops = _solution_like(8, 4, **planted)
    with pytest.raises(AssertionError, match=match):
        schedule_ns["check_schedule"](ops, 8, 4)


def test_unpipelined_schedule_is_rejected(schedule_ns: dict) -> None:
    ops = []
    for t in range(6):
        ops += [("sync",), ("load", t, t % 3), ("commit",), ("wait", 0), ("sync",), ("compute", t, t % 3)]
    with pytest.raises(AssertionError, match="not pipelined"):
        schedule_ns["check_schedule"](ops, 6, 3)


def test_timeline_model_rule_of_thumb() -> None:
    import math

    nb = nbformat.read(NOTEBOOK, as_version=4)
    src = next(c.source for c in nb.cells if grade_id(c) == "timeline_model")
    ns: dict = {"math": math}
    exec(src.split("fig, axes")[0], ns)                   # the model's functions, not the drawing
    sim, busy = ns["simulate_pipeline"], ns["busy_fraction"]
    assert busy(sim(64, 1)) < 0.25                        # latency-bound without a ring
    assert busy(sim(64, 5)) > 0.9                         # 1 + ceil(0.9 / 0.24) = 5 stages hide it
    assert busy(sim(64, 3)) < busy(sim(64, 4)) < busy(sim(64, 5))


@pytest.fixture(scope="module")
def bank_ns() -> dict:
    return _cells("register_budget", "bank_report")


def test_bank_report_of_solution_configs_is_conflict_free(bank_ns: dict) -> None:
    cpp = solution_cells.cell_source(ASSIGNMENT, "kernel:gemm06_cpp")
    dsl = solution_cells.cell_source(ASSIGNMENT, "kernel:gemm06_dsl")
    configs = [eval(re.search(r"^CPP_CONFIG = (dict\(.*\))$", cpp, re.M).group(1)),
               eval(re.search(r"^CPP_FALLBACK = (dict\(.*\))$", cpp, re.M).group(1)),
               eval(re.search(r"^DSL_CONFIG = (dict\(.*\))$", dsl, re.M).group(1))]
    for cfg in configs:
        reports = bank_ns["kernel_bank_report"](cfg, show_table=False)
        assert reports and all(r.conflicts == 0 for r in reports.values()), (cfg, {k: r.conflicts for k, r in reports.items()})


def test_bank_report_sees_an_unswizzled_ring(bank_ns: dict) -> None:
    from gemmlab.seeing import banks
    from gemmlab import layout as L

    k = bank_ns["kernel_layouts"](dict(BM=128, BN=256, BK=64, STAGES=4, WARPS_M=2, WARPS_N=4))
    plain = L.Layout((128, 64), (64, 1))
    assert banks.ldmatrix_conflicts(plain, k["mma"], which="A").conflicts > 0


# --------------------------------------------------------------------------- the solution kernels


@pytest.fixture(scope="module")
def dsl_ns() -> dict:
    return solution_cells.load_namespace(ASSIGNMENT, ["kernel:gemm06_dsl"])


@pytest.fixture(scope="module")
def cpp_ns() -> dict:
    return solution_cells.load_namespace(ASSIGNMENT, ["kernel:gemm06_cpp"])


def _tn(M, N, K, dtype=torch.float16):
    return torch.empty(M, K, dtype=dtype), torch.empty(N, K, dtype=dtype), torch.empty(M, N, dtype=dtype)


@pytest.mark.parametrize("shape,dtype,vector_copies", [
    ((512, 512, 256), torch.float16, True),
    ((512, 512, 256), torch.bfloat16, True),
    ((1000, 1001, 999), torch.float16, False),   # 2-byte rows: element copies, element stores
    ((129, 257, 68), torch.bfloat16, False),     # 8-byte rows: 64-bit cp.async
    ((1, 255, 513), torch.float16, False),       # one row: its odd length, not a pitch, sets the width
    ((1, 1, 1), torch.bfloat16, False),
    ((1, 256, 512), torch.bfloat16, True),       # one row of whole 16-byte vectors
])
def test_dsl_solution_compiles_for_sm90a(dsl_ns: dict, shape, dtype, vector_copies: bool) -> None:
    import gemmlab

    k = gemmlab.dsl.compile(dsl_ns["gemm06_dsl_jit"], *_tn(*shape, dtype), arch="sm_90a")
    res = k.resources
    # At 255 registers ptxas keeps one loop-invariant in local memory on the 16-byte path (20 B, reloaded
    # once per k-tile: an L1 hit); the narrow-copy fallbacks for unaligned rows spill a few hundred bytes.
    # Bounded, so that a change which makes the main loop spill for real fails here.
    assert read_resources(res, "gemm06_dsl").spill_loads_bytes <= (32 if vector_copies else 640), res
    ptx = k.ptx
    cfg = dsl_ns["DSL_CONFIG"]
    assert "mma.sync.aligned.m16n8k16" in ptx and "ldmatrix.sync.aligned" in ptx
    assert ptx.count("cp.async.wait_group") >= 2 and "cp.async.commit_group" in ptx
    assert re.search(rf"cp\.async\.wait_group\s+{cfg['STAGES'] - 2};", ptx), "the main loop waits for STAGES-2 pending groups"
    if vector_copies:
        assert "cp.async.cg.shared.global" in ptx and "st.global.v4" in ptx
    else:  # a 16-byte vector would cross the end of a row
        assert "cp.async.cg.shared.global" not in ptx and "st.global.v4" not in ptx
    assert res.max_threads_per_block >= 32 * cfg["WARPS_M"] * cfg["WARPS_N"]


def test_dsl_configure_changes_the_kernel(dsl_ns: dict) -> None:
    import gemmlab

    before = dict(dsl_ns["DSL_CONFIG"])
    try:
        dsl_ns["configure_dsl"](STAGES=4, BK=32, BN=128, WARPS_N=2)
        k = gemmlab.dsl.compile(dsl_ns["gemm06_dsl_jit"], *_tn(256, 256, 128), arch="sm_90a")
        assert re.search(r"cp\.async\.wait_group\s+2;", k.ptx)
        assert dsl_ns["THREADS"] == 128 and k.resources.max_threads_per_block >= 128
    finally:
        dsl_ns["configure_dsl"](**before)
    assert dsl_ns["THREADS"] == 256


def test_cpp_launcher_picks_instances(cpp_ns: dict) -> None:
    inst = cpp_ns["cpp_instance"](torch.bfloat16, 8, cpp_ns["CPP_CONFIG"])
    cfg = cpp_ns["CPP_CONFIG"]
    assert inst == (f"gemm06<cute::bfloat16_t, {cfg['BM']}, {cfg['BN']}, {cfg['BK']}, {cfg['STAGES']}, "
                    f"{cfg['WARPS_M']}, {cfg['WARPS_N']}, 8>")
    assert cpp_ns["cpp_smem_bytes"](dict(BM=128, BN=256, BK=64, STAGES=4)) == 4 * 384 * 64 * 2
    assert cpp_ns["cpp_smem_bytes"](dict(BM=128, BN=256, BK=32, STAGES=1)) == 128 * 256 * 2  # epilogue tile
    assert cpp_ns["cpp_smem_bytes"](cfg) <= 227 * 1024
    with pytest.raises(ValueError, match="float16"):
        cpp_ns["gemm06_cpp"](*_tn(64, 64, 64, torch.float32))
    with pytest.raises(ValueError, match="contiguous"):
        A, B, D = _tn(64, 64, 64)
        cpp_ns["gemm06_cpp"](A.t().contiguous().t(), B, D)


@pytest.mark.slow
@pytest.mark.parametrize("dtype,vec", [(torch.float16, 8), (torch.bfloat16, 1)])
def test_cpp_solution_compiles_for_sm90a(cpp_ns: dict, dtype, vec: int) -> None:
    """The fast path (16-byte cp.async, CPP_CONFIG) and the element-copy fallback (CPP_FALLBACK)."""
    kernel, cfg = cpp_ns["cpp_kernel"](dtype, vec, arch="sm_90a")
    res = read_resources(kernel.resources, f"gemm06 {cfg}")
    assert not res.spills, f"{cfg}: {res}"
    assert res.max_threads_per_block >= 32 * cfg["WARPS_M"] * cfg["WARPS_N"]
    ptx = kernel.ptx
    assert re.search(r"mma\.sync\.aligned\.m16n8k16\.row\.col\.f32\.(f16|bf16)", ptx)
    assert "ldmatrix.sync.aligned" in ptx
    if vec == 8:
        assert "cp.async.cg.shared.global" in ptx                     # 16-byte copies, L1 bypassed
        assert re.search(r"st\.global\.v(4\.(b|u)32|2\.(b|u)64)", ptx)     # 16-byte epilogue stores
        assert re.search(rf"cp\.async\.wait_group\s+{cfg['STAGES'] - 2};", ptx)


def test_cpp_variants_compiled_ahead_are_the_ones_the_launcher_compiles(cpp_ns: dict, monkeypatch) -> None:
    import gemmlab

    ahead, built = [], []
    monkeypatch.setattr(gemmlab, "compile_ahead", lambda src, builds, arch=None, group=None: ahead.extend(
        (src, b, arch) for b in builds) or len(builds))
    monkeypatch.setattr(gemmlab, "compile", lambda src, name, arch=None, **kw: built.append((src, name, arch)) or object())
    cpp_ns["compile_cpp_ahead"]("sm_90a")
    cpp_ns["_cpp_cache"].clear()
    for dtype in (torch.float16, torch.bfloat16):
        for vec in (8, 1):
            cpp_ns["cpp_kernel"](dtype, vec, arch="sm_90a")
    cpp_ns["_cpp_cache"].clear()
    assert sorted(ahead) == sorted(built) and len(built) == 4
