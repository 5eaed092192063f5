"""What a grading run reports: GPU tests are never paid out without a GPU, no hand-in breaks the
run, and every report (summary, exit status, feedback, export, events) says what really happened.

CPU only. Hand-ins are built from the course's own notebooks (solutions/ and course/), with the
GPU marks of tools/mark_gpu_cells.py applied to temporary copies.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import nbformat
import pytest

from tests.support import ROOT

pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
from tests.support import course_gradings as cg  # noqa: E402
from tests.support import grading_fixtures as gf  # noqa: E402
from autograder.harness import sandbox as sb  # noqa: E402
from autograder.cell_metadata import grade_id, is_graded, needs_gpu  # noqa: E402
from autograder.harness.wellformed import clean_notebook, clean_outputs  # noqa: E402
import mark_gpu_cells  # noqa: E402

needs_bwrap = pytest.mark.skipif(bool(sb.check_bwrap()) and os.environ.get("GEMMLAB_CI") != "1",
                                 reason=f"no usable bubblewrap: {sb.check_bwrap()}")
A = "00_gpu_and_roofline"          # the course's quickest notebook to grade
GPU_TEST = "test_naive"            # marked as needing a GPU in the temporary copies


def _marked_source() -> tuple[str, dict, dict]:
    name, source, release = gf.course_parts(A)
    return name, mark_gpu_cells.marked(source, (GPU_TEST,), A), release


# --------------------------------------------------------------------------- the marks
def test_mark_gpu_cells_lists_only_graded_cells_of_the_course_and_is_idempotent(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "solutions", tmp_path / "solutions", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    before = {p: p.read_text() for p in (tmp_path / "solutions").rglob("*.ipynb")}
    assert mark_gpu_cells.main([], tmp_path / "solutions") == 0
    assert mark_gpu_cells.main(["--check"], tmp_path / "solutions") == 0, "marking twice changes nothing"
    for path, old in before.items():
        new = json.loads(path.read_text())
        wanted = mark_gpu_cells.GPU_TESTS[path.parent.name]
        got = [c["metadata"]["nbgrader"]["grade_id"] for c in new["cells"] if needs_gpu(c)]
        assert got == list(wanted), path.name
        old_nb = json.loads(old)
        for c in new["cells"] + old_nb["cells"]:   # only that metadata may differ
            c["metadata"].pop("gemmlab", None)
        assert new == old_nb
    assert set(mark_gpu_cells.GPU_TESTS) == {p.name for p in (ROOT / "solutions").iterdir() if p.is_dir()}


def test_a_missing_grade_id_is_an_error_not_a_silent_skip() -> None:
    _, source, _ = gf.course_parts(A)
    with pytest.raises(mark_gpu_cells.MarkError, match="test_gone"):
        mark_gpu_cells.marked(source, ("test_gone",), A)


def test_a_student_cannot_mark_or_unmark_a_cell() -> None:
    """The mark is read from the instructor's source: a hand-in's metadata never reaches a test cell."""
    from autograder.harness.assemble import assemble

    def _read(data: dict) -> nbformat.NotebookNode:
        return nbformat.reads(json.dumps(data), as_version=4)

    name, source, release = _marked_source()
    hand_in = gf.solved(source, release)
    for c in hand_in["cells"]:
        c.setdefault("metadata", {})["gemmlab"] = {"needs_gpu": False}
    student = nbformat.from_dict(clean_notebook(hand_in).notebook)
    built = assemble(_read(source), _read(release), student)
    assert [c.metadata.nbgrader.grade_id for c in built.notebook.cells if needs_gpu(c)] == [GPU_TEST]


# --------------------------------------------------------------------------- any JSON
@pytest.mark.parametrize("kind", sorted(gf.MALFORMED))
def test_any_hand_in_is_a_valid_notebook_or_refused_with_a_reason(kind: str) -> None:
    name, source, release = gf.course_parts(A)
    text = gf.MALFORMED[kind](gf.solved(source, release))
    try:
        data = json.loads(text)
    except ValueError:
        assert kind in gf.MALFORMED_REFUSED
        return
    cleaned = clean_notebook(data)
    if kind in gf.MALFORMED_REFUSED:
        assert cleaned.notebook is None and gf.MALFORMED_REFUSED[kind] in cleaned.refused
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbformat.validate(nbformat.from_dict(cleaned.notebook))
        nbformat.reads(json.dumps(cleaned.notebook), as_version=4)
    assert len(cleaned.notebook["cells"]) == len(data["cells"]), "cell numbers stay the student's"
    assert clean_notebook(data) == cleaned, "the same hand-in reads the same (attempts are digests)"


def test_kernel_outputs_are_made_well_formed() -> None:
    outs = clean_outputs([{"output_type": "display_data", "data": {"text/plain": 5}, "metadata": {}},
                          {"output_type": "execute_result", "data": {"text/plain": ["4", "2"]}, "metadata": 3,
                           "execution_count": "x"},
                          {"output_type": "error", "ename": 1, "evalue": None, "traceback": [1, "t"]},
                          {"output_type": "stream", "name": "bogus", "text": 5}, "junk", None])
    assert outs == [{"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {},
                     "execution_count": None},
                    {"output_type": "error", "ename": "1", "evalue": "None", "traceback": ["t"]}]


# --------------------------------------------------------------------------- scheduling
def test_local_gpu_jobs_wait_for_a_gpu_worker_and_a_grader_bug_costs_one_student() -> None:
    from autograder import schedule
    from autograder.records import GradeJob, NotebookParts

    name, marked, release = _marked_source()
    _, plain, _ = gf.course_parts(A)
    grade = gf.placement_grader()

    def grade_or_fail(job):
        if job.student == "bug":
            raise KeyError("planted")
        return grade(job)

    jobs = [GradeJob(f"gpu{i}", A, "", {name: NotebookParts(marked, release, None)}) for i in range(3)]
    jobs += [GradeJob(f"cpu{i}", A, "", {name: NotebookParts(plain, release, None)}) for i in range(3)]
    jobs.append(GradeJob("bug", A, "", {name: NotebookParts(plain, release, None)}))
    results, errors = [], []
    schedule.grade_local(jobs, [None, "0"], results.append, grade=grade_or_fail,
                         on_error=lambda job, why: errors.append((job.student, why)))
    where = {r.student: r.worker for r in results}
    assert all(where[f"gpu{i}"] == "gpu 0" for i in range(3)), where
    assert len(where) == 6 and errors == [("bug", "the grader failed (KeyError: 'planted')")]


def test_ray_gives_gpu_notebooks_a_gpu_and_others_none() -> None:
    pytest.importorskip("ray", reason="pip install -e '.[grade]'")
    from autograder import schedule
    from autograder.records import GradeJob, NotebookParts

    name, marked, release = _marked_source()
    _, plain, _ = gf.course_parts(A)
    jobs = [GradeJob("gpu", A, "", {name: NotebookParts(marked, release, None)}),
            GradeJob("cpu", A, "", {name: NotebookParts(plain, release, None)})]
    results: list = []
    schedule.grade_ray(jobs, results.append, init_kwargs={"num_cpus": 2, "num_gpus": 1},
                       grade=gf.placement_grader())
    assert {r.student: r.worker for r in results} == {"gpu": "gpu 0", "cpu": "gpu None"}


# --------------------------------------------------------------------------- grading without a GPU
def test_gpu_tests_never_pay_without_a_gpu_whatever_the_cell_does(graded_class: dict) -> None:
    """The solution of a notebook whose test is marked, graded where the worker has no GPU (the class run below):
    the marked test is 'not graded: needs a GPU' and scores nothing, every other test passes."""
    r = graded_class["results"]["perfect"]
    name = graded_class["name"]
    by_id = {c["grade_id"]: c for c in r["cells"]}
    assert by_id[GPU_TEST]["status"] == "needs_gpu" and by_id[GPU_TEST]["score"] == 0, by_id[GPU_TEST]
    assert "needs a GPU" in by_id[GPU_TEST]["message"]
    assert all(c["status"] == "passed" for g, c in by_id.items() if g != GPU_TEST), r["cells"]
    assert r["score"] == r["max_score"] - by_id[GPU_TEST]["points"]
    assert len(r["not_graded"]) == 1 and GPU_TEST in r["not_graded"][0] and name in r["not_graded"][0]


@pytest.mark.parametrize("given, why", [(None, "this worker was given no GPU"), ("", "this worker was given no GPU"),
                                        ("99", "GPU 99 is not usable here")])
def test_a_worker_without_a_usable_gpu_says_why(given, why: str, monkeypatch) -> None:
    """A worker given no GPU, or a GPU index where none is usable (a login node; no machine has a 100th GPU)."""
    from autograder.harness.device import missing_gpu
    from gemmlab.running.gpu import HIDE_ENV

    monkeypatch.delenv(HIDE_ENV, raising=False)
    assert missing_gpu(given).startswith(why), missing_gpu(given)


@needs_bwrap
def test_a_test_for_another_gpu_family_is_not_graded_there(graded_00_on_hopper) -> None:
    """On a worker whose GPU is an sm_90, a test marked as needing an sm_80 (``needs_arch``) is not graded, whatever
    its code does (07's Hopper-only tests elsewhere), and one marked as needing an sm_90 is graded as usual."""
    by_id = {c.grade_id: c for c in graded_00_on_hopper.cells}
    other = by_id[cg.OTHER_FAMILY_TEST]
    assert other.status == "needs_gpu" and other.score == 0, other
    assert "needs an sm_80 GPU" in other.message and "sm_90" in other.message, other.message
    assert by_id[cg.HOPPER_TEST].status == "passed" and by_id[cg.HOPPER_TEST].score == by_id[cg.HOPPER_TEST].points


def test_the_cell_planted_as_display_only_would_end_its_kernel() -> None:
    """What makes the next test mean something: run, the planted cell ends the process it runs in."""
    done = subprocess.run([sys.executable, "-c", cg.ENDS_ITS_KERNEL], capture_output=True, timeout=60)
    assert done.returncode == 3


@needs_bwrap
def test_a_display_only_cell_runs_in_neither_kernel_when_graded(graded_00_on_hopper) -> None:
    """An instructor cell marked ``display_only`` is not run when graded. Here it would end the kernel (the test
    above); marked, nothing happens: no kernel ended or restarted, and the graded notebook says the cell was not run."""
    from autograder.harness.runner import NOT_RUN_WHEN_GRADED

    r = graded_00_on_hopper
    ended = [e for e in r.events if "restarted" in e or "exit" in e.lower() or "died" in e]
    assert not ended and not r.events, r.events
    (name,) = r.executed
    (cell,) = [c for c in r.executed[name]["cells"] if grade_id(c)
               == cg.DISPLAY_ONLY_CELL]
    assert "".join(o.get("text", "") for o in cell["outputs"]) == NOT_RUN_WHEN_GRADED


def test_marking_display_only_needs_an_ungraded_instructor_cell() -> None:
    _, source, _ = gf.course_parts(A)
    with pytest.raises(mark_gpu_cells.MarkError, match="DISPLAY_ONLY_CELLS"):
        mark_gpu_cells.marked(source, (), A, display_only=(GPU_TEST,))


def test_marking_an_architecture_needs_a_gpu_test() -> None:
    _, source, _ = gf.course_parts(A)
    with pytest.raises(mark_gpu_cells.MarkError, match="not GPU tests"):
        mark_gpu_cells.marked(source, (), A, {GPU_TEST: "sm_90"})


# --------------------------------------------------------------------------- the whole run
def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1500)


def _gid_index(nb: dict, gid: str) -> int:
    return next(i for i, c in enumerate(nb["cells"]) if grade_id(c) == gid)


def _hostile_metadata_and_fault_words(nb: dict) -> str:
    """What a hostile student tried against notebook 00 (each broke a whole class or an honest grade before):
    a lone surrogate in an added markdown cell, forged copies of a locked test claiming 10**400 points and
    `grade: true` without points, repeated tags, and an answer that raises with CUDA fault words (in the judge's
    test it arrives as an error's text; the judge must not be restarted for it)."""
    import copy

    nb = copy.deepcopy(nb)
    at = _gid_index(nb, "place_solution")
    nb["cells"][at]["source"] = ("def place_kernel(M, N, K, tile_m, tile_n, peak_tflops, bw_gbps):\n"
                                 "    raise RuntimeError('CUDA error: an illegal memory access was encountered "
                                 "(CUDA_ERROR_ILLEGAL_ADDRESS) ContextLostError KernelTimeoutError')\n")
    nb["cells"][at].setdefault("metadata", {})["tags"] = ["mine", "mine"]
    test = nb["cells"][_gid_index(nb, "test_naive")]
    forged = [copy.deepcopy(test), copy.deepcopy(test)]
    forged[0]["metadata"]["nbgrader"]["points"] = 10 ** 400
    del forged[1]["metadata"]["nbgrader"]["points"]
    marks = {"cell_type": "markdown", "metadata": {"tags": ["mine", "mine"]}, "source": "my notes \udc80 end"}
    nb["cells"][at + 1:at + 1] = [marks, *forged]
    return gf.dumps_big_ints(nb)


def _describes_without_end(nb: dict) -> str:
    """A cell that makes the student's kernel describe its answers as JSON nested 200,000 deep."""
    import copy

    nb = copy.deepcopy(nb)
    nb["cells"].insert(_gid_index(nb, "naive_solution") + 1, {
        "cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
        "source": "import gemmlab.answers.serving as _a\n_a.describe = lambda namespace, names: '[' * 200000\n"})
    return json.dumps(nb)


#: Hand-ins of notebook 00 a hostile student made: kind -> (file text from the solved notebook, tests it loses
#: besides the GPU test, or None when it is refused, and words its refusal or an event must hold).
HOSTILE_00 = {
    "digits5000": (lambda nb: gf.dumps_big_ints(dict(nb, metadata={**nb.get("metadata", {}), "x": 7 * 10 ** 5000})),
                   None, "4300 digits"),
    "nested150": (lambda nb: json.dumps(dict(nb, metadata={"deep": json.loads("[" * 150 + "]" * 150)})), None,
                  "nests more than 100 levels"),
    "hostile_metadata": (_hostile_metadata_and_fault_words, ("test_place",), "plain cell"),
    "describes_without_end": (_describes_without_end, ("test_tiled", "test_place"), "nested more than 8 levels"),
}


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory) -> dict:
    """The instructor's CLI grading notebook 00 (its test_naive marked as needing a GPU) for a class on a worker
    without a GPU: a perfect hand-in, every malformed one of grading_fixtures.MALFORMED and the hostile ones
    of HOSTILE_00."""
    if sb.check_bwrap() and os.environ.get("GEMMLAB_CI") != "1":
        pytest.skip(f"no usable bubblewrap: {sb.check_bwrap()}")
    tmp_path = tmp_path_factory.mktemp("class")
    name, source, release = _marked_source()
    root = tmp_path / "course"
    for folder, nb in (("solutions", source), ("course", release)):
        (root / folder / A).mkdir(parents=True)
        (root / folder / A / name).write_text(json.dumps(nb))
    handins = tmp_path / "handins"
    solved = gf.solved(source, release)
    files = {"perfect": json.dumps(solved), **{k: make(solved) for k, make in gf.MALFORMED.items()},
             **{k: make(solved) for k, (make, _, _) in HOSTILE_00.items()}}
    for student, text in files.items():
        (handins / student / A).mkdir(parents=True)
        (handins / student / A / name).write_text(text)
    proc = _cli("--course", str(root), "grade", A, "--from", str(handins), "--workers", "2", "--cell-timeout", "40",
                "--answer-cell-timeout", "8", "--out", str(tmp_path / "grades.csv"))
    results = {p.parent.name: json.loads(p.read_text()) for p in (root / "autograder" / "results" / A).glob("*/*.json")}
    return {"proc": proc, "results": results, "root": root, "tmp": tmp_path, "name": name, "source": source,
            "solved": solved, "files": files}


@needs_bwrap
def test_no_hand_in_breaks_the_run_and_every_report_tells_the_truth(graded_class: dict) -> None:
    proc, root, tmp_path = graded_class["proc"], graded_class["root"], graded_class["tmp"]
    name, source, solved, files = (graded_class[k] for k in ("name", "source", "solved", "files"))
    out = proc.stdout
    assert proc.returncode == 1, "tests were not graded: the exit status must say so\n" + out + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr[-3000:]
    assert all(line.startswith(f"autograde {A} [") for line in proc.stderr.replace("\r", "\n").splitlines() if line), \
        f"only the progress bar on stderr:\n{proc.stderr[-3000:]}"
    results = graded_class["results"]
    assert set(results) == set(files), "every student has a result"
    for student, why in gf.MALFORMED_REFUSED.items():
        r = results[student]
        assert r["score"] == 0 and why in r["not_graded"][0] and not r["events"], (student, r["not_graded"], r["events"])
        assert f"{student}: {name}: the hand-in was refused: it is" in out, out
    full = results["perfect"]["max_score"]
    gpu_points = next(c["points"] for c in results["perfect"]["cells"] if c["grade_id"] == GPU_TEST)
    cells = source["cells"]
    last_answer = gf.answer_index({"cells": cells[::-1]})
    lost = next(c["metadata"]["nbgrader"]["points"] for c in cells[len(cells) - last_answer:]
                if is_graded(c))     # the test after the answer that is a number
    for student in ("perfect", *gf.MALFORMED_GRADED):
        r = results[student]
        want = full - gpu_points - (lost if student == "number_source" else 0)
        # publish_number needs autograder/harness/kernel.py to build outputs with wellformed.clean_outputs:
        # nbformat's output_from_msg raises on {'text/plain': 5} and the notebook is then not graded
        assert r["score"] == want, (student, r["score"], want, [(c["grade_id"], c["message"]) for c in r["cells"]])
        assert any(GPU_TEST in n for n in r["not_graded"]), r["not_graded"]
        assert not any("deleted" in e for e in r["events"]), (student, r["events"])
    assert any("cell " in e and "source that is not text" in e for e in results["number_source"]["events"])
    assert any("cell 2 is not a cell (a string)" in e for e in results["string_cell"]["events"])
    assert any("nbformat 5" in e for e in results["nbformat5"]["events"])
    hang = next(e for e in results["added_cell_hangs"]["events"] if "time limit" in e)
    added = gf.answer_index(solved) + 2
    assert f"{name}, your cell {added}:" in hang and "time limit of 8 s" in hang, hang   # the student's own cell's limit
    for student in files:
        assert (root / "autograder" / "feedback" / student / A / "feedback.html").exists(), student
    rows = {r["student"]: r for r in csv.DictReader((tmp_path / "grades.csv").open())}
    assert set(rows) == set(files) and "refused" in rows["json_list"]["not_graded"]
    only = tmp_path / "one.csv"
    proc = _cli("--course", str(root), "export", "--out", str(only), "--student", "json_list")
    assert proc.returncode == 0 and [r["student"] for r in csv.DictReader(only.open())] == ["json_list"]
    _hostile_hand_ins_hurt_only_themselves(root, name, results, full - gpu_points)
    # a later run reuses and records every earlier result again (one holds a character no file can hold) without
    # a crash, and leaves the gradebook as the results say
    proc = _cli("--course", str(root), "autograde", A, "--workers", "2")
    assert proc.returncode == 1 and "unchanged attempts reused" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    from autograder.reports.store import gradebook_scores

    scores = gradebook_scores(f"sqlite:///{root / 'autograder' / 'gradebook.db'}", A)
    assert {s: scores[s][0] for s in results} == {s: r["score"] for s, r in results.items()}, "gradebook = results"


def _hostile_hand_ins_hurt_only_themselves(root: Path, name: str, results: dict, graded_full: float) -> None:
    """Each hostile hand-in of notebook 00 is refused with its limit named, or graded losing only the tests its
    answers fail, with its notebook recorded and its feedback written."""
    cells = json.loads((root / "solutions" / A / name).read_text())["cells"]
    points = {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"].get("points", 0) for c in cells
              if is_graded(c)}
    for student, (_, lost, words) in HOSTILE_00.items():
        r = results[student]
        if lost is None:
            assert r["score"] == 0 and words in r["not_graded"][0], (student, r["not_graded"])
            continue
        by_id = {c["grade_id"]: c for c in r["cells"]}
        assert r["score"] == graded_full - sum(points[g] for g in lost), (student, [(c["grade_id"], c["status"],
                                                                                     c["message"]) for c in r["cells"]])
        assert all(by_id[g]["status"] == "failed" for g in lost), by_id
        assert any(words in e for e in r["events"]), (student, r["events"])
        assert not any("restarted" in e or "left the GPU context" in e for e in r["events"]), (student, r["events"])
        assert (root / "autograder" / "autograded" / student / A / name).exists()
        assert (root / "autograder" / "feedback" / student / A / "feedback.html").exists()
    marks = (root / "autograder" / "autograded" / "hostile_metadata" / A / name).read_text(encoding="utf-8")
    assert "my notes \ufffd end" in marks, "the lone surrogate is kept as U+FFFD"
    fault = {c["grade_id"]: c for c in results["hostile_metadata"]["cells"]}
    assert "illegal memory access" in fault["test_place"]["evalue"] and fault["test_tiled"]["status"] == "passed", fault
    nested = {c["grade_id"]: c for c in results["describes_without_end"]["cells"]}["test_tiled"]
    assert "nested more than 8 levels" in nested["evalue"], nested


def _exit_on_first_attempt(marks: str, job):
    """A picklable grading function: the first attempt at each job kills its worker process."""
    folder = Path(marks) / job.student
    folder.mkdir(parents=True, exist_ok=True)
    if not any(folder.iterdir()):
        (folder / f"attempt-{os.getpid()}").touch()
        os._exit(17)
    if job.student == "bug":
        raise KeyError("planted")
    return job.student, os.getpid()


def test_local_workers_grade_in_their_own_processes_and_a_dead_one_is_retried(tmp_path: Path) -> None:
    """Each local job runs in a worker process (as on Ray): a worker that dies is retried, not the run lost,
    and an exception of the grader is reported for that student alone."""
    import functools

    from autograder import schedule
    from autograder.records import GradeJob

    jobs = [GradeJob(s, "a", "", {}) for s in ("s1", "s2", "bug")]
    results, errors = [], []
    schedule.grade_local(jobs, [None, None], results.append,
                         grade=functools.partial(_exit_on_first_attempt, str(tmp_path)),
                         on_error=lambda job, why: errors.append((job.student, why)))
    assert sorted(student for student, _ in results) == ["s1", "s2"], results
    assert all(pid != os.getpid() for _, pid in results), "graded in the driver's own process"
    assert errors == [("bug", "the grader failed (KeyError: 'planted')")], errors
    assert len(list(tmp_path.rglob("attempt-*"))) == 3, "each first attempt died once"


def test_marking_a_judged_test_needs_a_graded_cell() -> None:
    _, source, _ = gf.course_parts(A)
    with pytest.raises(mark_gpu_cells.MarkError, match="no graded cell no_such_test to judge"):
        mark_gpu_cells.marked(source, (), A, None, ("no_such_test",))
    marked = mark_gpu_cells.marked(source, (GPU_TEST,), A, None, (GPU_TEST,))
    from autograder.cell_metadata import judged_launches

    assert [c["metadata"]["nbgrader"]["grade_id"] for c in marked["cells"] if judged_launches(c)] == [GPU_TEST]
