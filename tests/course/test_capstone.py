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

from autograder import leaderboard as lb  # noqa: E402

ASSIGNMENT = "09_capstone"
NOTEBOOK = ROOT / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
RELEASE = ROOT / "course" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"


def _by_id(path: Path = NOTEBOOK) -> dict:
    nb = nbformat.read(path, as_version=4)
    return {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}


# ------------------------------------------------------------------ the notebook itself

def test_graded_cells_points_and_leaderboard_names_match_the_notebook() -> None:
    cells = _by_id()
    points = {gid: c.metadata["nbgrader"].get("points") for gid, c in cells.items()
              if gid and c.metadata["nbgrader"].get("grade")}
    assert points == {lb.BUILD_CELL: 1, lb.CORRECT_CELL: 6, lb.SPEED_CELL: 3}
    assert lb.PREFIX.strip() in cells[lb.SPEED_CELL].source
    assert "BEGIN HIDDEN TESTS" in cells[lb.CORRECT_CELL].source
    release = _by_id(RELEASE)
    assert "raise NotImplementedError()" in release["capstone"].source
    assert "capstone_jit" not in release["capstone"].source, "the release must not contain the solution kernel"


def test_solution_compiles_for_sm90a_with_its_hopper_features() -> None:
    ns = solution_cells.load_namespace(ASSIGNMENT, ["kernel:capstone"])
    assert ns["CAPSTONE_DESCRIPTION"], "the solution must describe itself for the leaderboard"
    kernels = ns["capstone_compile"]("sm_90a")
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
        from gemmlab.sass import disassembler, wgmma_waits

        if disassembler() is not None:  # a gemmlab dependency; without it the PTX checks above still run
            assert wgmma_waits(k.sass()) == (4, 1), "ptxas serialized the wgmmas (25% slower in bf16 on an H100)"


def _namespace(fake_gemmlab, gpu: bool, monkeypatch: pytest.MonkeyPatch, submission: bool = True) -> dict:
    """The names the graded cells use, as the notebook's setup and helper cells define them. The graded
    cells check correctness with nbhelpers.require_correct, which calls gemmlab.check_gemm: the fake's
    check_gemm stands in for it there too."""
    import gemmlab
    from gemmlab import nbhelpers as nbh

    monkeypatch.setattr(gemmlab, "check_gemm", fake_gemmlab.check_gemm)
    monkeypatch.setattr(nbh, "gpu_graded", lambda points, what, pool=False: gpu)    # GPU or not, as the test says

    ns: dict = {}
    exec("import json, math, random, time\nimport torch", ns)
    ns.update(gemmlab=fake_gemmlab, nbh=nbh, GPU=gpu, ARCH="sm_90a", CAPSTONE_DESCRIPTION="test kernel | fast",
              capstone_gemm=None, capstone_compile=None)
    if submission:
        def capstone_gemm(A, B, D):
            D.copy_(A)  # never called: the fake check and bench do not run it

        ns.update(capstone_gemm=capstone_gemm, capstone_compile=lambda arch: [types.SimpleNamespace(ptx=".entry x")])
    cells = _by_id()
    exec(cells["test_helpers"].source, ns)
    exec(cells["scoring"].source.split("for _ratios")[0], ns)
    return ns


def _fake_gemmlab(ratios: dict, passed: bool = True):
    def check_gemm(fn, dtype=None, shapes=None, timeout_s=None, **_):
        return types.SimpleNamespace(passed=passed, __str__=lambda self: "table")

    def bench_gemm(fn, shape, dtype, label=""):
        name = str(dtype).replace("torch.", "")
        r = ratios[(shape[0], name)]
        return types.SimpleNamespace(shape=tuple(shape), dtype=name, ratio=r, tflops=600 * r, cublas_tflops=600.0,
                                     device="NVIDIA H100 80GB HBM3", ratio_low=r - 0.005, ratio_high=r + 0.006,
                                     rounds=12, spread_text=lambda: "96% interval, 12 rounds")

    return types.SimpleNamespace(check_gemm=check_gemm, bench_gemm=bench_gemm)


def _run_speed_cell(ns: dict) -> tuple[str, object]:
    """Run the graded speed cell like IPython: its last expression is the cell's value."""
    import ast

    source = _by_id()[lb.SPEED_CELL].source
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
    text, points = _run_speed_cell(ns)
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


def test_speed_cell_without_gpu_passes_with_no_value_and_no_record(monkeypatch) -> None:
    ns = _namespace(_fake_gemmlab({}), gpu=False, monkeypatch=monkeypatch)
    text, points = _run_speed_cell(ns)
    assert points is None and lb.PREFIX not in text and "without a GPU" in text


def test_graded_cells_fail_on_the_untouched_release(monkeypatch) -> None:
    ns = _namespace(_fake_gemmlab({}), gpu=False, monkeypatch=monkeypatch, submission=False)
    for gid in (lb.BUILD_CELL, lb.CORRECT_CELL, lb.SPEED_CELL):
        with pytest.raises(AssertionError, match="capstone_gemm is not defined"):
            exec(_by_id()[gid].source, dict(ns))


def test_speed_cell_refuses_a_fast_wrong_kernel(monkeypatch) -> None:
    ratios = {(n, d): 1.2 for n in (4096, 8192) for d in ("float16", "bfloat16")}
    ns = _namespace(_fake_gemmlab(ratios, passed=False), gpu=True, monkeypatch=monkeypatch)
    with pytest.raises(AssertionError, match=r"fresh random shapes\) is wrong on some shapes"):
        _run_speed_cell(ns)


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
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
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
