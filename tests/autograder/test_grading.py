"""The class-scale grader (autograder/): sandbox, integrity, limits, gradebook, feedback, Ray.

CPU only. Planted hostile submissions of every kind in tests/support/grading_fixtures.py go through the
instructor CLI exactly as autograder/README.md says; each must lose only the points of the tests
it breaks or cheats on, the others must grade normally, and the gradebook must stay intact.
Needs bubblewrap (`apt-get install -y bubblewrap`; scripts/test.sh installs it where it can).
"""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.support import ROOT
# A GPU node set up from the wheelhouse's gpu-test profile has no nbgrader: `pytest -m gpu` skips this
# file there instead of failing to collect it (the gpu-grade profile carries nbgrader).
pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
from tests.support import grading_fixtures as gf  # noqa: E402
from autograder.harness import sandbox as sb  # noqa: E402
from autograder.cell_metadata import grade_id  # noqa: E402
from autograder.harness.assemble import assemble  # noqa: E402

# CI sets GEMMLAB_CI=1 (.ci/run): there a missing sandbox fails these tests instead of skipping them.
needs_bwrap = pytest.mark.skipif(bool(sb.check_bwrap()) and os.environ.get("GEMMLAB_CI") != "1",
                                 reason=f"no usable bubblewrap: {sb.check_bwrap()} "
                                 "(scripts/test.sh installs it with apt-get where it can)")
CELL_S = "8"
MEMORY = str(int(1.5 * 2**30))


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = gf.make_course(tmp_path_factory.mktemp("course"))
    from autograder.course import Course

    Course(root).ensure_gradebook("tiny")
    return root


def _release(course: Path) -> nbformat.NotebookNode:
    return nbformat.read(course / "autograder" / "release" / "tiny" / "tiny.ipynb", as_version=4)


def test_release_has_no_hidden_tests_or_answers(course: Path) -> None:
    text = (course / "autograder" / "release" / "tiny" / "tiny.ipynb").read_text()
    assert gf.HIDDEN_MARKER not in text and "x * x" not in text


# --------------------------------------------------------------------------- sandbox
@needs_bwrap
def test_sandbox_sees_no_secrets_no_network_and_writes_only_scratch(tmp_path: Path, course: Path) -> None:
    scratch, run = tmp_path / "scratch", tmp_path / "run"
    scratch.mkdir()
    run.mkdir()
    os.chmod(scratch, 0o777)
    probe = r"""
import json, os, socket, sys
paths = json.loads(sys.argv[1])
seen = {p: os.path.exists(p) for p in paths}
writable = {}
for d in ["/usr", "/etc", os.path.dirname(sys.executable), os.getcwd(), "/tmp"]:
    try:
        open(os.path.join(d, "probe-file"), "w").close(); writable[d] = True
    except OSError:
        writable[d] = False
try:
    socket.create_connection(("1.1.1.1", 80), timeout=2); net = True
except OSError:
    net = False
import gemmlab
print(json.dumps({"seen": seen, "writable": writable, "net": net, "uid": os.getuid(), "pids": sum(p.isdigit() for p in os.listdir("/proc"))}))
"""
    secrets = [str(course / "autograder" / "gradebook.db"), str(course / "solutions"), str(ROOT / "solutions"),
               str(ROOT / ".git"), str(ROOT / "tests"), str(ROOT / "autograder"), str(Path.home() / ".ssh")]
    cmd = sb.bwrap_prefix(sb.SandboxSpec(scratch, run)) + [sys.executable, "-c", probe, json.dumps(secrets)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not any(report["seen"].values()), f"the sandbox can see {[p for p, v in report['seen'].items() if v]}"
    assert report["writable"].pop(str(scratch)) is True, "scratch must be writable"
    assert report["writable"].pop("/tmp") is True
    assert not any(report["writable"].values()), f"writable outside scratch: {report['writable']}"
    assert report["net"] is False, "the sandbox reached the network"
    assert report["uid"] == 65534
    assert report["pids"] <= 3, "the sandbox sees the host's processes"


def test_site_folders_on_pythonpath_are_bound_but_never_the_repository(tmp_path: Path, monkeypatch) -> None:
    """Carried wheels in a PYTHONPATH folder (a GPU node without network) must reach the kernel;
    the checkout, or a folder around it, must not, and neither may a folder with no installed packages."""
    site_dir = tmp_path / "site"
    (site_dir / "pkg-1.0.dist-info").mkdir(parents=True)
    (site_dir / "inner").mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    repo = sb.GEMMLAB_DIR.parent
    monkeypatch.setattr(sys, "path", [str(repo), str(repo.parent), str(site_dir), str(site_dir / "inner"),
                                      str(plain), *sys.path])
    assert sb.extra_site_dirs()[:2] == [str(site_dir), str(site_dir / "inner")]
    bound = sb.python_dirs()
    assert str(site_dir) in bound and str(site_dir / "inner") not in bound, "bind the site root once"
    assert not any(d in (str(repo), str(repo.parent), str(plain)) for d in bound)
    env = sb.sandbox_env(sb.SandboxSpec(tmp_path, tmp_path))
    assert env["PYTHONPATH"].split(os.pathsep)[:3] == [str(repo), str(site_dir), str(site_dir / "inner")]


# --------------------------------------------------------------------------- integrity (no kernel)
@pytest.mark.parametrize("kind", gf.SURGERY)
def test_tests_cannot_be_edited_deleted_skipped_or_retagged(course: Path, kind: str) -> None:
    source = nbformat.read(course / "solutions" / "tiny" / "tiny.ipynb", as_version=4)
    built = assemble(source, _release(course), gf.submission(_release(course), kind))
    src_tests = {grade_id(c): c for c in source.cells if grade_id(c).startswith("test_")}
    run_tests = [c for c in built.notebook.cells if grade_id(c).startswith("test_")]
    assert [grade_id(c) for c in run_tests] == list(src_tests), "every instructor test runs, once, in order"
    for c in run_tests:
        assert c.source == src_tests[grade_id(c)].source, f"{grade_id(c)} must run as the instructor wrote it"
        assert c.metadata == src_tests[grade_id(c)].metadata, f"{grade_id(c)}: metadata/tags must be the instructor's"
    for c in built.notebook.cells:
        if not grade_id(c):
            assert not c.metadata.get("tags") and "nbgrader" not in c.metadata
    assert built.tampered, "the change must be reported"
    answers = {grade_id(c): c.source for c in built.notebook.cells if grade_id(c) in gf.ANSWERS}
    assert "return 0" in answers["square"], "the student's own answer runs"
    assert gf.HIDDEN_MARKER in "".join(c.source for c in run_tests), "hidden tests run"


def test_missing_answer_runs_as_released_and_solutions_never_run(course: Path) -> None:
    source = nbformat.read(course / "solutions" / "tiny" / "tiny.ipynb", as_version=4)
    student = _release(course)
    student.cells = [c for c in student.cells if grade_id(c) != "square"]
    built = assemble(source, _release(course), student)
    square = next(c for c in built.notebook.cells if grade_id(c) == "square")
    assert "BEGIN SOLUTION" not in square.source and "x * x" not in square.source
    assert built.missing_answers == ["square"]


# --------------------------------------------------------------------------- GEMM anti-cheat (CPU)
def test_check_gemm_rejects_torch_computation_in_grading_mode(monkeypatch) -> None:
    """In grading mode only the student's kernel may compute: a library GEMM and a product built
    from elementwise torch operators fail alike (the issue's broadcast-multiply-and-sum passed)."""
    torch = pytest.importorskip("torch")
    import gemmlab

    cheats = {"matmul": lambda A, B, D: D.copy_(torch.matmul(A, B.T)),
              "einsum": lambda A, B, D: D.copy_(torch.einsum("mk,nk->mn", A, B)),
              "linear": lambda A, B, D: D.copy_(torch.nn.functional.linear(A, B)),
              "mm_out": lambda A, B, D: torch.mm(A, B.T, out=D),
              "broadcast": lambda A, B, D: D.copy_((A[:, None, :].float() * B[None, :, :].float()).sum(-1)),
              "rows": lambda A, B, D: D.copy_(torch.stack([(A.float() * b.float()).sum(1) for b in B], 1))}
    kw = dict(device="cpu", dtype=torch.bfloat16, shapes=[(8, 8, 8), (5, 7, 3)])
    monkeypatch.setenv("GEMMLAB_GRADING", "1")
    for name, fn in cheats.items():
        res = gemmlab.check_gemm(fn, **kw)
        assert not res.passed, f"{name} passed a graded check"
        assert "instead of computing the product in your own kernel" in res.rows[0].message, res.rows[0].message
    monkeypatch.setenv("GEMMLAB_GRADING", "0")
    for name in ("matmul", "broadcast"):
        assert gemmlab.check_gemm(cheats[name], **kw).passed, "outside grading torch functions may be checked"
    assert not gemmlab.check_gemm(cheats["matmul"], forbid_library=True, **kw).passed


# --------------------------------------------------------------------------- feedback
def test_feedback_shows_results_heatmap_roofline_and_no_hidden_source() -> None:
    from autograder.reports import feedback
    from autograder.records import SubmissionResult
    from gemmlab.results import BenchResult
    from gemmlab.timing.perfbar import PerfBarResult
    from gemmlab.checking.report import RESULT_MIME, payload

    bench = BenchResult((4096, 4096, 4096), "tn", "float16", "float16", 0.327, 420.1, 0.200, 686.4, 0.612,
                        "NVIDIA H100", 50)
    perf = str(PerfBarResult(bench, 0.30))
    published = [payload("bench", bench), payload("perf_bar", PerfBarResult(bench, 0.30))]
    result = {"student": "ann", "assignment": "tiny", "attempt": "a1", "score": 3, "max_score": 6, "seconds": 12,
              "events": ["tiny.ipynb, test_square: the cell did not finish within its time limit of 8 s"],
              "flags": [], "cells": [
                  {"notebook": "tiny.ipynb", "grade_id": "test_square", "points": 2, "score": 0, "status": "timeout",
                   "message": "the cell did not finish within its time limit of 8 s", "outputs": [
                       {"output_type": "error", "ename": "AssertionError", "evalue": "square(3) should be 9",
                        "traceback": []}]},
                  {"notebook": "tiny.ipynb", "grade_id": "test_gemm", "points": 3, "score": 3, "status": "passed",
                   "message": "passed", "outputs": [
                       {"output_type": "display_data", "data": {"text/plain": perf, "text/html":
                        "<b>table</b><img src='data:image/png;base64,AAAA'/><script>alert(1)</script>"}}],
                   "results": published}]}
    result = SubmissionResult.from_dict(result)
    page = feedback.render(result)
    assert "3 / 6 points" in page and "did not finish within its time limit" in page
    assert "Your kernels on the roofline" in page and "0.61× cuBLAS" not in page  # in the picture, not as text
    assert "<script>" not in page, "notebook HTML must be escaped into a sandboxed frame"
    assert "<iframe" not in page and "srcdoc" not in page
    assert len(feedback.perf_points(result)) == 1, "the bar's own timing is one point, not two"
    assert feedback.perf_points(result)[0].ratio == pytest.approx(0.612)
    assert RESULT_MIME not in page


# --------------------------------------------------------------------------- the whole flow
@needs_bwrap
def test_instructor_cli_grades_hostile_class(course: Path, tmp_path: Path) -> None:
    """README's commands: collect → autograde → feedback → export, 19 planted submissions, 2 workers."""
    handins = tmp_path / "handins"
    paths = [str(course / "autograder" / "gradebook.db"), str(course / "solutions"),
             str(course / "autograder" / "submitted"), str(ROOT / ".git")]
    for kind in gf.EXPECTED:
        folder = handins / kind / "tiny"
        folder.mkdir(parents=True)
        nbformat.write(gf.submission(_release(course), kind, paths), folder / "tiny.ipynb")
    (handins / "garbage" / "tiny").mkdir(parents=True)
    (handins / "garbage" / "tiny" / "tiny.ipynb").write_text("{not json")
    opts = ["--workers", "2", "--cell-timeout", CELL_S, "--memory-limit", MEMORY]
    c = str(course)
    proc = _cli("--course", c, "collect", "tiny", "--from", str(handins))
    assert proc.returncode == 0, proc.stderr
    proc = _cli("--course", c, "autograde", "tiny", *opts)
    # the garbage hand-in is refused (not graded): the exit status says so, and the summary names only it
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "NOT GRADED, in part or whole, for 1 student(s):\n  garbage: tiny.ipynb: the hand-in was refused: it is " \
           "not a notebook: not valid JSON" in proc.stdout, proc.stdout[-3000:]
    assert "student" in proc.stdout and "honest" in proc.stdout and "autograde tiny [" in proc.stderr
    from autograder.reports.store import gradebook_scores

    scores = gradebook_scores(f"sqlite:///{course / 'autograder' / 'gradebook.db'}", "tiny")
    wrong = {k: (scores.get(k), v) for k, v in gf.EXPECTED.items() if scores.get(k, (None,))[0] != v}
    assert not wrong, f"(got, expected) per kind: {wrong}\n{proc.stdout}"
    assert scores["garbage"][0] == 0
    assert all(m == 6 for _, m in scores.values())
    results = course / "autograder" / "results" / "tiny"
    snoop = json.loads(next((results / "snoop").glob("*.json")).read_text())
    seen = snoop["executed"]["tiny.ipynb"]["cells"][2]["outputs"][0]["text"]
    assert "True" not in seen, f"the sandbox let a submission see grading files: {seen}"
    loop = json.loads(next((results / "loop").glob("*.json")).read_text())
    assert any("time limit" in e for e in loop["events"])
    # idempotent: grading again reuses the recorded attempts and leaves the gradebook as it was
    proc = _cli("--course", c, "autograde", "tiny", *opts)
    assert proc.returncode == 1 and "unchanged attempts reused" in proc.stdout, proc.stdout[-2000:]
    assert gradebook_scores(f"sqlite:///{course / 'autograder' / 'gradebook.db'}", "tiny") == scores
    assert all(len(list((results / k).glob("*.json"))) == 1 for k in gf.EXPECTED)
    proc = _cli("--course", c, "feedback", "tiny")
    assert proc.returncode == 0, proc.stderr
    for kind in gf.EXPECTED:
        page = (course / "autograder" / "feedback" / kind / "tiny" / "feedback.html").read_text()
        assert gf.HIDDEN_MARKER not in page and "BEGIN HIDDEN" not in page and "x * x" not in page
    page = (course / "autograder" / "feedback" / "exit" / "tiny" / "feedback.html").read_text()
    assert "exited with status 3" in page
    out = tmp_path / "grades.csv"
    proc = _cli("--course", c, "export", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert float(rows["honest"]["score"]) == 6 and float(rows["wrong"]["score"]) == 4
    assert set(rows) == set(gf.EXPECTED) | {"garbage"}


@needs_bwrap
def test_ray_workers_retry_infrastructure_failures_without_double_counting(course: Path, tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="pip install -e '.[grade]' (scripts/test.sh does)")
    from autograder import schedule
    from autograder.course import Course
    from autograder.reports.store import gradebook_scores
    from autograder.records import Limits

    c = Course(course)
    kinds = ["honest", "wrong", "exit", "kill", "torch_matmul", "sys_exit"]
    jobs = []
    for i, kind in enumerate(kinds):
        student = f"ray_{kind}"
        folder = c.submitted / student / "tiny"
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(gf.submission(_release(course), kind), folder / "tiny.ipynb")
        jobs.append(c.job("tiny", student, Limits(cell_s=float(CELL_S), memory_bytes=int(MEMORY)), True))
    # the first attempt of two jobs fails like lost infrastructure: an exception, a dead worker
    grade = gf.flaky_grader(tmp_path / "faults", {"ray_honest": "raise", "ray_wrong": "exit"})
    results, errors = [], []

    def on_result(r) -> None:
        results.append(r)
        c.record(r)

    schedule.grade_ray(jobs, on_result, init_kwargs={"num_cpus": 2, "num_gpus": 2},
                       on_error=lambda job, why: errors.append((job.student, why)), grade=grade)
    assert not errors, errors
    assert sorted(r.student for r in results) == sorted(f"ray_{k}" for k in kinds), "one result per job"
    assert len(list((tmp_path / "faults").rglob("attempt-*"))) == 2, "both injected failures happened once"
    assert {r.worker.split("gpu ")[-1] for r in results} == {"None"}, "tiny has no GPU test: no GPU asked for"
    scores = gradebook_scores(c.db_url, "tiny")
    for kind in kinds:
        assert scores[f"ray_{kind}"][0] == gf.EXPECTED[kind], (kind, scores[f"ray_{kind}"])
    for r in results:
        assert len(c.results.attempts("tiny", r.student)) == 1


@needs_bwrap
def test_real_course_notebook_solved_loses_nothing_to_false_alarms(graded_00_on_hopper) -> None:
    """Notebook 00 through the sandboxed grader (the run's shared grading, tests.support.course_gradings): the
    release with the solutions' answers filled in earns every point it can there (all but the test marked for
    another GPU family), with no false tamper alarm or other event from the course's own setup."""
    from tests.support.course_gradings import OTHER_FAMILY_TEST

    r = graded_00_on_hopper
    bad = [(c.grade_id, c.status, c.message) for c in r.cells if c.status != "passed" and c.grade_id != OTHER_FAMILY_TEST]
    other = next(c for c in r.cells if c.grade_id == OTHER_FAMILY_TEST)
    assert not bad and not r.events and not r.flags, (bad, r.events, r.flags)
    assert r.score == r.max_score - other.points > 0


@needs_bwrap
def test_real_course_notebook_untouched_release_scores_zero() -> None:
    from autograder.harness.runner import grade_submission
    from autograder.records import GradeJob, NotebookParts

    name, source, release = gf.course_parts("00_gpu_and_roofline")
    r = grade_submission(GradeJob("untouched", "00_gpu_and_roofline", "t", {name: NotebookParts(source, release, release)}))
    assert r.max_score > 0 and r.score == 0, r.cells


def test_grade_local_never_drops_a_job_silently() -> None:
    """A job whose retries run out is reported: to on_error when given, else raised at the end."""
    from autograder import schedule
    from autograder.harness.runner import InfraError
    from autograder.records import GradeJob

    def grade(job):
        if job.student == "broken":
            raise InfraError("kernel did not start")
        return job.student

    jobs = [GradeJob(s, "a", "", {}) for s in ("ok1", "broken", "ok2")]
    graded: list = []
    with pytest.raises(InfraError, match="a/broken: kernel did not start"):
        schedule.grade_local(jobs, [None], graded.append, retries=1, grade=grade)
    assert sorted(graded) == ["ok1", "ok2"]
    errors: list = []
    schedule.grade_local(jobs, [None, None], lambda r: None, retries=0, on_error=lambda j, why: errors.append(why),
                         grade=grade)
    assert errors == ["kernel did not start"]


@pytest.mark.parametrize("kind", ["source", *sorted(gf.GPU_KERNELS)])
def test_gpu_fixture_kernels_compile(kind: str) -> None:
    """The GPU grading test's kernels compile (for sm_90a, no GPU needed), so that on the GPU a
    submission loses points for what its kernel does at run time, never for a broken fixture."""
    import ast

    from gemmlab.compiling import compiler

    if kind == "source":
        cell = next(c for c in gf.gpu_source_notebook().cells if "SRC = " in c.source)
    else:
        release = gf.gpu_source_notebook()
        cell = next(c for c in gf.gpu_submission(release, kind).cells if "SRC = " in c.source)
    assign = next(n for n in ast.parse(cell.source).body if isinstance(n, ast.Assign))
    compiler.compile_to(ast.literal_eval(assign.value), "gemm_tn", arch="sm_90a")
