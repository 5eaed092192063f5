"""Notebook 09 (capstone) and the leaderboard, without a GPU: the solution kernel compiles for sm_90a
with the Hopper features it claims; the graded speed cell's record line is what the leaderboard
reads, and its points follow the scale the notebook documents; the leaderboard ranks synthetic
autograded notebooks (fast, slow, tied, incorrect, failed, graded without a GPU, forged records in
other cells, not graded, never handed in) and writes its table, CSV and chart."""
from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import types
from pathlib import Path

import nbformat
import pytest

from tests.support import ROOT
from tests.support.kernel_resources import assert_no_spills
import solution_cells  # noqa: E402
from tests.support.timeline_marks import marks_in, without_marks

from autograder.reports import leaderboard as lb  # noqa: E402
from gemmlab.dtypes import dtype_name  # noqa: E402
from autograder.cell_metadata import grade_id  # noqa: E402

ASSIGNMENT = "09_capstone"
NOTEBOOK = ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
RELEASE = ROOT / "course" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"


def cells_by_id(path: Path = NOTEBOOK) -> dict:
    """The capstone notebook's cells by nbgrader grade_id (also used by test_gpu_capstone.py)."""
    nb = nbformat.read(path, as_version=4)
    return {grade_id(c): c for c in nb.cells}


# ------------------------------------------------------------------ the notebook itself

def test_graded_cells_points_and_leaderboard_names_match_the_notebook() -> None:
    cells = cells_by_id()
    points = {gid: c.metadata["nbgrader"].get("points") for gid, c in cells.items()
              if gid and c.metadata["nbgrader"].get("grade")}
    assert points == {lb.BUILD_CELL: 1, lb.CORRECT_CELL: 6, lb.SPEED_CELL: 3}
    assert lb.PREFIX.strip() in cells[lb.SPEED_CELL].source
    assert "BEGIN HIDDEN TESTS" in cells[lb.CORRECT_CELL].source
    release = cells_by_id(RELEASE)
    assert "raise NotImplementedError()" in release["capstone"].source
    assert "capstone_jit" not in release["capstone"].source, "the release must not contain the solution kernel"


#: The stream-K option of the solution's cell switched on (it is off: section 3 of the notebook says why).
STREAM_K_OFF = "CAP_STREAM_K, CAP_SK_MIN_WAVES = 0, 8"


def _stream_k_on() -> dict[str, str]:
    source = solution_cells.cell_source(ASSIGNMENT, "kernel:capstone")
    assert source.count(STREAM_K_OFF) == 1, "the solution's stream-K setting moved: update STREAM_K_OFF"
    return {"kernel:capstone": source.replace(STREAM_K_OFF, STREAM_K_OFF.replace("0, 8", "1, 8"))}


def test_solution_compiles_for_sm90a_with_its_hopper_features() -> None:
    """Both builds per input type with the stream-K option on (the whole-item build alone with it off, as the
    solution ships): TMA loads with B multicast, 4 wgmma per k-tile, a TMA-store epilogue, the register split."""
    ns = solution_cells.load_namespace(ASSIGNMENT, ["kernel:capstone"])
    assert ns["CAPSTONE_DESCRIPTION"], "the solution must describe itself for the leaderboard"
    assert len(ns["capstone_compile"]("sm_90a")) == 2, "per input type (fp16, bf16): the whole-item build"
    kernels = solution_cells.load_namespace(ASSIGNMENT, ["kernel:capstone"], _stream_k_on())["capstone_compile"]("sm_90a")
    assert len(kernels) == 4, "per input type (fp16, bf16): the whole-item build and the stream-K build"
    assert sum("ld.acquire.gpu" in k.ptx for k in kernels) == 2, "the stream-K builds wait on partial-tile flags"
    for k in kernels:
        ptx = k.ptx
        assert k.compiled_arch == "sm_90a"
        assert ptx.count("wgmma.mma_async") == 4, "4 wgmma 64x256x16 per k-tile"
        assert "cp.async.bulk.tensor" in ptx and ".multicast::cluster" in ptx, "TMA loads, B multicast"
        assert "cp.async.bulk.tensor.2d.global.shared" in ptx, "TMA-store epilogue"
        assert "setmaxnreg.dec" in ptx and "setmaxnreg.inc" in ptx, "producer/consumer register split"
        assert_no_spills(k.resources, f"capstone build {k.name}")
        from gemmlab.compiling.sass import disassembler, wgmma_waits

        if disassembler() is not None:  # a gemmlab dependency; without it the PTX checks above still run
            assert wgmma_waits(k.sass()) == (4, 1), "ptxas serialized the wgmmas (25% slower in bf16 on an H100)"



def _launched_grids(ns: dict, shape: tuple[int, int, int], dtype) -> list[list[int]]:
    """The grids capstone_gemm launches for ``shape``, recorded as the grader's judge records them (nothing runs)."""
    import torch

    from gemmlab.dsl.host_recording import H100_ATTRIBUTES
    from gemmlab.dsl.recording import probe, recording

    M, N, K = shape
    tensors = [probe((M, K), (K, 1), dtype, 0), probe((N, K), (K, 1), dtype, 0), probe((M, N), (N, 1), dtype, 0)]
    with recording("sm_90a", H100_ATTRIBUTES, tensors) as recorder:
        ns["capstone_gemm"](*tensors)
    return [s["grid"] for s in recorder.plan()["steps"] if s["op"] == "launch"]


def test_the_persistent_grid_is_the_fewest_clusters_that_keep_the_waves() -> None:
    """W work items need w = ceil(W / C) waves on the C clusters that fit (66 on an H100); the solution launches
    ceil(W / w) clusters: no more waves, and no fewer clusters would do. At 4096³, 6144³ and 8192³ that is 64
    clusters (128 CTAs), whole waves, so no stream-K build would run there even with the option on; with every
    cluster that fits (the solution before 2026-12-07) it launched 132 CTAs and cut 6144³ and 8192³ with stream-K."""
    import math

    import torch

    ns = solution_cells.load_namespace(ASSIGNMENT, ["kernel:capstone"])
    most, cluster = ns["CAP_MAX_CLUSTERS"], ns["CAP_CLUSTER"]
    assert (most, cluster) == (66, 2), "without a GPU the solution assumes an H100's 132 SMs in clusters of 2"
    for work in range(1, 3000):
        c = ns["cap_clusters"](work)
        waves = math.ceil(work / most)
        assert c <= most and math.ceil(work / c) == waves, (work, c)
        assert c == 1 or math.ceil(work / (c - 1)) > waves, f"{work} items: {c - 1} clusters would need no more waves"
    for n in (4096, 6144, 8192):
        for dtype in (torch.float16, torch.bfloat16):
            assert _launched_grids(ns, (n, n, n), dtype) == [[128, 1, 1]], (n, dtype)
        assert ns["cap_uses_stream_k"](n, n) == 0
    for shape, items in (((1000, 1001, 999), 4 * 4), ((129, 264, 72), 1 * 2), ((8453, 4096, 512), 34 * 16)):
        waves = math.ceil(items / most)
        assert _launched_grids(ns, shape, torch.float16) == [[cluster * math.ceil(items / waves), 1, 1]], shape
    ns["CAP_STREAM_K"] = 1                           # the option: only where a partial wave follows 8 full ones
    assert [ns["cap_uses_stream_k"](n, n) for n in (4096, 6144, 8192)] == [0, 0, 0]
    assert ns["cap_uses_stream_k"](8453, 4096) == 1  # 544 items: 9 waves of 61 clusters, the last with 56
    ns["CAP_FEWEST_CLUSTERS"] = 0                    # every cluster that fits, as before
    assert [ns["cap_uses_stream_k"](n, n) for n in (4096, 6144, 8192)] == [0, 1, 1]
    assert _launched_grids(ns, (4096, 4096, 4096), torch.float16) == [[132, 1, 1]]


def test_the_timeline_marks_change_nothing_outside_a_timeline() -> None:
    """The capstone's marks (its warps' states for section 5's timeline) compile to nothing in the checked and timed
    builds: each build's SASS is the same as without them. With a timeline recording, each mark is one record."""
    from gemmlab.profiling import switch
    from gemmlab.compiling.sass import disassembler

    marked = _stream_k_on()["kernel:capstone"]         # the stream-K builds hold its fix-up's two marks
    assert marks_in(marked) == 8 and "tracer = marks.begin()" in marked
    plain = solution_cells.load_namespace(ASSIGNMENT, ["kernel:capstone"], {"kernel:capstone": marked})[
        "capstone_compile"]("sm_90a")
    bare = solution_cells.load_namespace(ASSIGNMENT, ["kernel:capstone"],
                                         {"kernel:capstone": without_marks(marked)})["capstone_compile"]("sm_90a")
    assert len(plain) == len(bare) == 4
    for k, b in zip(plain, bare):
        assert "globaltimer" not in k.ptx and k.resources == b.resources
        if disassembler() is not None:
            assert k.sass() == b.sass(), "the marks changed the machine code of a plain build"
    with switch.tracing():
        traced = solution_cells.load_namespace(ASSIGNMENT, ["kernel:capstone"], {"kernel:capstone": marked})[
            "capstone_compile"]("sm_90a")
    # begin's START, the producer's 3 marks, MMA and EPILOGUE, DONE; the stream-K builds also both fix-up states
    assert [k.ptx.count("%globaltimer") for k in traced] == [7, 9, 7, 9]

def _namespace(fake_gemmlab, gpu: bool, monkeypatch: pytest.MonkeyPatch, submission: bool = True) -> dict:
    """The names the graded cells use, as the notebook's setup and helper cells define them. The graded
    cells check correctness with nbhelpers.require_correct, which calls gemmlab.check_gemm: the fake's
    check_gemm stands in for it there too."""
    import gemmlab
    from gemmlab.notebook import nbhelpers as nbh

    monkeypatch.setattr(gemmlab, "check_gemm", fake_gemmlab.check_gemm)
    from gemmlab import techniques
    monkeypatch.setattr(nbh, "gpu_graded", lambda points, what, pool=False: gpu)    # GPU or not, as the test says

    ns: dict = {}
    exec("import json, math, random, re, time\nimport torch", ns)
    ns.update(gemmlab=fake_gemmlab, nbh=nbh, T=techniques, GPU=gpu, ARCH="sm_90a",
              CAPSTONE_DESCRIPTION="test kernel | fast", capstone_gemm=None, capstone_compile=None)
    if submission:
        def capstone_gemm(A, B, D):
            D.copy_(A)  # never called: the fake check and bench do not run it

        ns.update(capstone_gemm=capstone_gemm, capstone_compile=lambda arch: ["a kernel the build test never reads"])
    cells = cells_by_id()
    exec(cells["test_helpers"].source, ns)
    exec(cells["scoring"].source.split("for _ratios")[0], ns)
    return ns


def _fake_gemmlab(ratios: dict, passed: bool = True, benched: list | None = None):
    """check_gemm passing (or not) and bench_gemm answering ``ratios[(nominal size, dtype)]``; ``benched`` collects
    each timed call's (shape, dtype, seed)."""
    def check_gemm(fn, dtype=None, shapes=None, timeout_s=None, **_):
        return types.SimpleNamespace(passed=passed, __str__=lambda self: "table")

    def bench_gemm(fn, shape, dtype, label="", seed=None):
        name = dtype_name(dtype)
        if benched is not None:
            benched.append((tuple(shape), name, seed))
        r = ratios[(lb.nominal_size({"shape": list(shape)}), name)]
        return types.SimpleNamespace(shape=tuple(shape), dtype=name, ratio=r, tflops=600 * r, cublas_tflops=600.0,
                                     device="NVIDIA H100 80GB HBM3", ratio_low=r - 0.005, ratio_high=r + 0.006,
                                     rounds=12, spread_text=lambda: "96% interval, 12 rounds")

    from gemmlab import GemmlabError

    return types.SimpleNamespace(check_gemm=check_gemm, bench_gemm=bench_gemm, GemmlabError=GemmlabError)


def run_speed_cell(ns: dict) -> tuple[str, object]:
    """Run the graded speed cell like IPython: its last expression is the cell's value."""
    import ast

    source = cells_by_id()[lb.SPEED_CELL].source
    tree = ast.parse(source)
    last = tree.body.pop()
    assert isinstance(last, ast.Expr), "the speed cell must end with its points as an expression"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(tree, "speed_cell", "exec"), ns)
        value = eval(compile(ast.Expression(last.value), "speed_cell", "eval"), ns)
    return out.getvalue(), value


@pytest.mark.parametrize("r4096,r8192", [(0.62, 0.58), (0.8, 0.74), (1.05, 1.01), (0.3, 0.45), (0.9, 0.9)])
def test_speed_cell_points_follow_the_documented_scale_and_the_record_parses(r4096, r8192, monkeypatch) -> None:
    ratios = {(4096, "float16"): r4096, (4096, "bfloat16"): r4096 * 0.98,
              (8192, "float16"): r8192, (8192, "bfloat16"): r8192 * 0.97}
    ns = _namespace(_fake_gemmlab(ratios), gpu=True, monkeypatch=monkeypatch)
    text, points = run_speed_cell(ns)
    score = math.exp(sum(math.log(v) for v in ratios.values()) / 4)
    assert points == ns["speed_points"](score), "graded cell and section 2's scale disagree"
    cell = {"outputs": [{"output_type": "stream", "name": "stdout", "text": text},
                        {"output_type": "execute_result", "data": {"text/plain": repr(points)},
                         "metadata": {}, "execution_count": 1}]}
    record = lb.parse_record(cell)
    assert record is not None, text
    assert lb.ratios_of(record) == pytest.approx(ratios, abs=1e-4)
    assert record["score"] == pytest.approx(score, abs=1e-4) and record["points"] == points
    assert record["description"] == "test kernel | fast" and "H100" in record["device"]



def test_speed_cell_times_the_shapes_and_inputs_drawn_from_the_graders_secret(monkeypatch) -> None:
    """With GEMMLAB_LEADERBOARD_SECRET (the grader's judge alone has it) the four timed problems are the drawn shapes,
    each timed on inputs from its drawn seed; the record names each run's nominal size, which the leaderboard groups
    by. The same secret draws the same problems (every student of one grading run, and a regrade)."""
    from gemmlab.timing.leaderboard_draw import SECRET_ENV, draw_runs

    monkeypatch.setenv(SECRET_ENV, "the secret of this grading run")
    drawn = draw_runs("the secret of this grading run")
    assert all(r.shape != (r.nominal,) * 3 and r.seed is not None for r in drawn)
    ratios = {(4096, "float16"): 0.95, (4096, "bfloat16"): 0.93, (8192, "float16"): 1.01, (8192, "bfloat16"): 0.99}
    benched: list = []
    ns = _namespace(_fake_gemmlab(ratios, benched=benched), gpu=True, monkeypatch=monkeypatch)
    text, points = run_speed_cell(ns)
    assert benched == [(r.shape, r.dtype, r.seed) for r in drawn]
    record = lb.parse_record({"outputs": [{"output_type": "stream", "name": "stdout", "text": text}]})
    assert [(run["shape"], run["nominal"]) for run in record["runs"]] == [(list(r.shape), r.nominal) for r in drawn]
    assert lb.ratios_of(record) == pytest.approx(ratios, abs=1e-4)
    assert points == ns["speed_points"](math.exp(sum(map(math.log, ratios.values())) / 4))
    benched.clear()
    monkeypatch.delenv(SECRET_ENV)
    run_speed_cell(_namespace(_fake_gemmlab(ratios, benched=benched), gpu=True, monkeypatch=monkeypatch))
    assert benched == [((n,) * 3, d, None) for n in (4096, 8192) for d in ("float16", "bfloat16")]   # a student's run


def _compiled(tmp_path: Path, body: str, name: str = "kern") -> object:
    """A small CuTe DSL kernel with ``body`` (over mA, mB, mD and m, n, K), compiled for sm_90a without a GPU."""
    import importlib.util
    import textwrap

    import torch

    import gemmlab

    source = "\n".join([
        "import cuda.bindings.driver as cuda", "import cutlass", "import cutlass.cute as cute", "", "",
        "@cute.kernel",
        f"def {name}_kernel(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor):",
        "    tx, ty, _ = cute.arch.thread_idx()", "    m, n = ty, tx", "    M, K = mA.shape", "    N = mB.shape[0]",
        textwrap.indent(textwrap.dedent(body), "    "), "", "",
        "@cute.jit",
        f"def {name}(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor, stream: cuda.CUstream):",
        f"    {name}_kernel(mA, mB, mD).launch(grid=[1, 1, 1], block=[16, 16, 1], stream=stream)", ""])
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    args = [torch.empty(s, dtype=torch.float16) for s in ((16, 32), (16, 32), (16, 16))]
    return gemmlab.dsl.compile(getattr(module, name), *args, arch="sm_90a")


NOT_GEMMS = {
    "an empty kernel": "pass",
    "a copy": "if m < M and n < N:\n    mD[m, n] = mA[m, n]",
    "one product, no loop over K": "if m < M and n < N:\n    mD[m, n] = (mA[m, 0].to(cutlass.Float32) * "
                                   "mB[n, 0].to(cutlass.Float32)).to(mD.element_type)",
    "sums K products, never stores them": "acc = cutlass.Float32(0.0)\nfor k in range(K):\n"
                                          "    acc += mA[m, k].to(cutlass.Float32) * mB[n, k].to(cutlass.Float32)",
}


@pytest.mark.parametrize("what", NOT_GEMMS)
def test_the_build_test_refuses_a_kernel_that_is_not_a_gemm(what: str, tmp_path: Path, monkeypatch) -> None:
    kernel = _compiled(tmp_path, NOT_GEMMS[what], name=f"k{list(NOT_GEMMS).index(what)}")
    ns = _namespace(_fake_gemmlab({}), gpu=False, monkeypatch=monkeypatch)
    ns["capstone_compile"] = lambda arch: [kernel]
    assert ns["gemm_kernel_problems"](kernel)
    with pytest.raises(AssertionError, match="none of the kernels capstone_compile returned is a GEMM kernel"):
        exec(cells_by_id()[lb.BUILD_CELL].source, dict(ns))
    ns["capstone_compile"] = lambda arch: ["not a kernel", kernel]
    with pytest.raises(AssertionError, match="not a compiled kernel"):
        exec(cells_by_id()[lb.BUILD_CELL].source, dict(ns))


def test_the_build_test_takes_any_real_gemm_kernel(tmp_path: Path, monkeypatch) -> None:
    """A plain SIMT GEMM (fp32 FMAs in its K loop) and the solution's TMA + wgmma kernels are GEMM kernels; beside
    them a helper kernel that is not one (a copy) does no harm."""
    simt = _compiled(tmp_path, "if m < M and n < N:\n    acc = cutlass.Float32(0.0)\n    for k in range(K):\n"
                               "        acc += mA[m, k].to(cutlass.Float32) * mB[n, k].to(cutlass.Float32)\n"
                               "    mD[m, n] = acc.to(mD.element_type)", name="simt")
    copy = _compiled(tmp_path, NOT_GEMMS["a copy"], name="copy")
    ns = _namespace(_fake_gemmlab({}), gpu=False, monkeypatch=monkeypatch)
    assert ns["gemm_kernel_problems"](simt) == []
    solution = solution_cells.load_namespace(ASSIGNMENT, ["kernel:capstone"])["capstone_compile"]("sm_90a")
    assert [ns["gemm_kernel_problems"](k) for k in solution] == [[]] * 2
    ns["capstone_compile"] = lambda arch: [copy, simt]
    exec(cells_by_id()[lb.BUILD_CELL].source, dict(ns))

def test_speed_cell_without_gpu_passes_with_no_value_and_no_record(monkeypatch) -> None:
    ns = _namespace(_fake_gemmlab({}), gpu=False, monkeypatch=monkeypatch)
    text, points = run_speed_cell(ns)
    assert points is None and lb.PREFIX not in text and "without a GPU" in text


def test_graded_cells_fail_on_the_untouched_release(monkeypatch) -> None:
    ns = _namespace(_fake_gemmlab({}), gpu=False, monkeypatch=monkeypatch, submission=False)
    for gid in (lb.BUILD_CELL, lb.CORRECT_CELL, lb.SPEED_CELL):
        with pytest.raises(AssertionError, match="capstone_gemm is not defined"):
            exec(cells_by_id()[gid].source, dict(ns))


def test_speed_cell_refuses_a_fast_wrong_kernel(monkeypatch) -> None:
    ratios = {(n, d): 1.2 for n in (4096, 8192) for d in ("float16", "bfloat16")}
    ns = _namespace(_fake_gemmlab(ratios, passed=False), gpu=True, monkeypatch=monkeypatch)
    with pytest.raises(AssertionError, match=r"fresh random shapes\) is wrong on some shapes"):
        run_speed_cell(ns)


# ------------------------------------------------------------------ the leaderboard

def _record_line(ratios: tuple[float, float, float, float], device="NVIDIA H100 80GB HBM3", desc="kernel") -> str:
    runs = [{"shape": [n, n, n], "dtype": d, "ratio": r, "tflops": 600 * r, "cublas_tflops": 600.0}
            for (n, d), r in zip([(n, d) for n in (4096, 8192) for d in ("float16", "bfloat16")], ratios)]
    score = math.exp(sum(math.log(r) for r in ratios) / 4)
    return lb.PREFIX + json.dumps({"version": 1, "device": device, "score": score, "points": 3, "description": desc,
                                   "runs": runs}) + "\n"


def _stream(text: str) -> dict:
    return {"output_type": "stream", "name": "stdout", "text": text}


def _error(ename: str, evalue: str) -> dict:
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}


def _autograded(folder: Path, student: str, outputs: dict[str, list]) -> None:
    """An autograded notebook: the solutions notebook with the given outputs per grade_id."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            gid = grade_id(cell)
            cell.outputs = [nbformat.from_dict(o) for o in outputs.get(gid, [])]
    dest = folder / "autograder" / "autograded" / student / ASSIGNMENT
    dest.mkdir(parents=True)
    nbformat.write(nb, dest / f"{ASSIGNMENT}.ipynb")


OK = [_stream("correct on the default and odd suites, fp16 and bf16\n")]


@pytest.fixture()
def course(tmp_path: Path) -> Path:
    _autograded(tmp_path, "ada", {lb.CORRECT_CELL: OK,
                                  lb.SPEED_CELL: [_stream("4096³ ...\n" + _record_line((1.06, 1.04, 1.01, 0.99),
                                                                                        desc="CuTe DSL | WS")),
                                                  {"output_type": "execute_result", "data": {"text/plain": "3.0"},
                                                   "metadata": {}, "execution_count": 3}]})
    _autograded(tmp_path, "bob", {lb.CORRECT_CELL: OK, lb.SPEED_CELL: [_stream(_record_line((0.64, 0.61, 0.6, 0.58)))]})
    # the same score as bob: a shared rank
    _autograded(tmp_path, "bea", {lb.CORRECT_CELL: OK, lb.SPEED_CELL: [_stream(_record_line((0.58, 0.6, 0.61, 0.64)))]})
    # forged records printed by the student's own cell and inside the speed cell before the real one
    _autograded(tmp_path, "eve", {"capstone": [_stream(_record_line((9.0, 9.0, 9.0, 9.0)))],
                                  lb.CORRECT_CELL: OK,
                                  lb.SPEED_CELL: [_stream(_record_line((8.0, 8.0, 8.0, 8.0))
                                                          + "4096³ ...\n" + _record_line((0.3, 0.3, 0.3, 0.3)))]})
    # fast but wrong: a record from the speed cell, but the correctness test failed
    _autograded(tmp_path, "fay", {lb.CORRECT_CELL: [_error("AssertionError", "capstone_gemm is wrong on hidden random "
                                                           "shapes with float16 inputs.\n(1, 2049, 9) ...")],
                                  lb.SPEED_CELL: [_stream(_record_line((1.5, 1.5, 1.5, 1.5)))]})
    _autograded(tmp_path, "gus", {lb.CORRECT_CELL: OK,
                                  lb.SPEED_CELL: [_error("BenchIntegrityError", "the output changed after the function "
                                                         "returned")]})
    _autograded(tmp_path, "hal", {lb.CORRECT_CELL: [_stream("No GPU: the submission builds\n")],
                                  lb.SPEED_CELL: [_stream("No GPU: the speed test and the leaderboard record need "
                                                          "the grading GPU.\n")]})
    _undefined = [_error("AssertionError", "capstone_gemm is not defined: write ...")]
    _autograded(tmp_path, "ivy", {lb.BUILD_CELL: _undefined, lb.CORRECT_CELL: _undefined, lb.SPEED_CELL: _undefined})
    (tmp_path / "autograder" / "submitted" / "joe" / ASSIGNMENT).mkdir(parents=True)
    bad = tmp_path / "autograder" / "autograded" / "kim" / ASSIGNMENT
    bad.mkdir(parents=True)
    (bad / f"{ASSIGNMENT}.ipynb").write_text("{not json")
    return tmp_path


def test_leaderboard_ranks_correct_records_and_explains_the_rest(course: Path) -> None:
    entries = lb.collect(course, roster=["ada", "zed"])
    by = {e.student: e for e in entries}
    order = [e.student for e in entries]
    assert order[:4] == ["ada", "bea", "bob", "eve"], order
    assert [by[s].rank for s in ("ada", "bea", "bob", "eve")] == [1, 2, 2, 4], "equal scores share a rank"
    assert by["ada"].score == pytest.approx((1.06 * 1.04 * 1.01 * 0.99) ** 0.25)
    assert by["ada"].ratio_at(4096) == pytest.approx((1.06 * 1.04) ** 0.5)
    assert by["ada"].description == "CuTe DSL | WS" and by["ada"].points == 3
    assert by["eve"].score == pytest.approx(0.3), "only the last record of the speed cell counts"
    assert by["fay"].status == "failed" and by["fay"].rank is None and by["fay"].reason.startswith("incorrect")
    assert "BenchIntegrityError" in by["gus"].reason
    assert "without a GPU" in by["hal"].reason and by["hal"].correct is None
    assert by["ivy"].reason.startswith("did not build: AssertionError: capstone_gemm is not defined")
    assert by["kim"].status == "failed" and "unreadable" in by["kim"].reason
    assert by["joe"].status == "not graded" and by["zed"].status == "no submission"
    assert order[-2:] == ["joe", "zed"]
    assert set(order[4:-2]) == {"fay", "gus", "hal", "ivy", "kim"}


def test_leaderboard_table_csv_chart_and_cli(course: Path, capsys) -> None:
    import csv

    out = course / "board"
    roster = course / "roster.txt"
    roster.write_text("# class list\nada\nzed\n")
    assert lb.main(["--course", str(course), "--out", str(out), "--roster", str(roster)]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].startswith("| rank | student | S |")
    assert "| 1 | ada | 1.025 |" in table and "CuTe DSL \\| WS" in table
    rows = list(csv.reader((out / "leaderboard.csv").open()))
    assert rows[0] == lb.COLUMNS and [r[1] for r in rows[1:5]] == ["ada", "bea", "bob", "eve"]
    assert rows[-1][1] == "zed" and "no submission" in rows[-1][-1]
    png = (out / "leaderboard.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert (out / "leaderboard.md").read_text() == table
    assert lb.main(["--course", str(course), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == ",".join(lb.COLUMNS)


def test_leaderboard_notes_mixed_gpus_and_handles_an_empty_course(tmp_path: Path, capsys) -> None:
    _autograded(tmp_path, "a", {lb.CORRECT_CELL: OK, lb.SPEED_CELL: [_stream(_record_line((1, 1, 1, 1)))]})
    _autograded(tmp_path, "b", {lb.CORRECT_CELL: OK,
                                lb.SPEED_CELL: [_stream(_record_line((1, 1, 1, 0.9), device="NVIDIA H200"))]})
    assert "different GPUs" in lb.markdown(lb.collect(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert lb.main(["--course", str(empty)]) == 1
    assert "no submissions" in capsys.readouterr().err


def test_a_record_without_a_ratio_or_with_junk_is_not_ranked(tmp_path: Path) -> None:
    junk = lb.PREFIX + json.dumps({"runs": [{"shape": [4096], "dtype": "float16", "ratio": -1}]}) + "\n"
    _autograded(tmp_path, "x", {lb.CORRECT_CELL: OK, lb.SPEED_CELL: [_stream(junk + lb.PREFIX + "{broken\n")]})
    (e,) = lb.collect(tmp_path)
    assert e.status == "failed" and e.rank is None and "no ratios" in e.reason


def test_cell_outputs_as_lists_of_lines_are_read(tmp_path: Path) -> None:
    # nbformat may store text as a list of lines on disk
    line = _record_line((0.7, 0.7, 0.7, 0.7))
    cell = {"outputs": [{"output_type": "stream", "name": "stdout", "text": ["x\n", line[:20], line[20:]]}]}
    assert lb.ratios_of(lb.parse_record(cell))[(8192, "bfloat16")] == pytest.approx(0.7)
    assert copy.deepcopy(cell) == cell
