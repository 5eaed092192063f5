"""Everything a hand-in controls is bounded before the grader uses it, each refusal names its limit, and one
hand-in never stops the others: reading, assembling, recording and reporting each fail for that student alone.

CPU only, no kernels: the cases a hostile student tried (a 5,000-digit number, 10**400 points, a graded cell
without points, repeated tags, a lone surrogate, JSON nested without end, a flood of probe findings).
"""
from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import nbformat
import pytest

pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
from autograder import autograde, cli  # noqa: E402
from autograder.course import MAX_JSON_DEPTH, Course, read_hand_in  # noqa: E402
from autograder.cell_metadata import grade_id  # noqa: E402
from autograder.harness.assemble import assemble  # noqa: E402
from autograder.harness.inkernel import MAX_PROBLEMS, parse_probe  # noqa: E402
from autograder.harness.kernel import CellRun  # noqa: E402
from autograder.harness.runner import MAX_SCORE_CHARS, partial_score  # noqa: E402
from autograder.reports.store import ResultStore, gradebook_scores  # noqa: E402
from autograder.harness.wellformed import MAX_CELLS, MAX_ID_CHARS, clean_notebook, clean_outputs  # noqa: E402
from autograder.records import CellResult, SubmissionResult, writable  # noqa: E402
from tests.support import grading_fixtures as gf  # noqa: E402


def _solved_tiny() -> dict:
    nb = json.loads(nbformat.writes(gf.source_notebook()))
    return nb


# --------------------------------------------------------------------------- reading a hand-in
def test_a_number_of_5000_digits_or_json_nested_past_the_limit_is_refused_naming_it(tmp_path: Path) -> None:
    nb = _solved_tiny()
    for text, words in ((gf.dumps_big_ints(dict(nb, metadata={"x": 10 ** 5000})), "4300 digits"),
                        (json.dumps(dict(nb, metadata={"d": json.loads("[" * 150 + "]" * 150)})),
                         f"nests more than {MAX_JSON_DEPTH} levels deep"),
                        ("[" * 200_000 + "]" * 200_000, f"nests more than {MAX_JSON_DEPTH} levels deep")):
        path = tmp_path / "hand_in.ipynb"
        path.write_text(text)
        hand_in = read_hand_in(path)
        assert hand_in.data is None and words in hand_in.refused and hand_in.digest, hand_in.refused


# --------------------------------------------------------------------------- what the grader keeps of it
def test_nbgrader_metadata_out_of_bounds_makes_a_plain_cell_and_says_which_bounds() -> None:
    nb = _solved_tiny()
    test = next(c for c in nb["cells"] if grade_id(c) == "test_square")
    forged = []
    for change in ({"points": 10 ** 400}, {"points": float("inf")}, {"points": -1}, {"points": None, "grade": True},
                   {"grade_id": "t" * (MAX_ID_CHARS + 1)}):
        cell = copy.deepcopy(test)
        cell["metadata"]["nbgrader"].update(change)
        if change.get("points", 0) is None:
            del cell["metadata"]["nbgrader"]["points"]
        forged.append(cell)
    cleaned = clean_notebook(json.loads(gf.dumps_big_ints(dict(nb, cells=nb["cells"] + forged))))
    kept = cleaned.notebook["cells"][-len(forged):]
    assert all("nbgrader" not in c["metadata"] for c in kept), kept
    notes = [r for r in cleaned.repairs if "nbgrader metadata" in r]
    assert len(notes) == len(forged) and "from 0 to 1,000,000" in notes[0] and "a graded cell has points" in notes[0]
    source = nbformat.reads(nbformat.writes(gf.source_notebook()), as_version=4)
    built = assemble(source, source, nbformat.from_dict(cleaned.notebook))   # no checksum of 10**400 points to fail
    assert [grade_id(c) for c in built.notebook.cells if grade_id(c).startswith("test_")] == list(gf.POINTS)


def test_tags_are_kept_once_and_a_hand_in_of_repeated_tags_is_a_valid_notebook() -> None:
    nb = _solved_tiny()
    nb["cells"][2]["metadata"]["tags"] = ["mine", "mine", "other"]
    nb["cells"][3]["metadata"]["tags"] = ["x" * (MAX_ID_CHARS + 1)]
    cleaned = clean_notebook(nb)
    assert cleaned.notebook["cells"][2]["metadata"]["tags"] == ["mine", "other"]
    assert "tags" not in cleaned.notebook["cells"][3]["metadata"]
    assert any("cell 4 has tags that are not distinct short names" in r for r in cleaned.repairs), cleaned.repairs
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbformat.validate(nbformat.from_dict(cleaned.notebook))


def test_a_hand_in_of_too_many_cells_is_refused_naming_the_limit() -> None:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "x"}] * (MAX_CELLS + 1)
    assert f"at most {MAX_CELLS:,}" in clean_notebook({"cells": cells, "nbformat": 4}).refused


def test_characters_no_file_can_hold_become_the_replacement_character() -> None:
    nb = _solved_tiny()
    nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "notes \udc80 end"})
    cleaned = clean_notebook(nb)
    assert cleaned.notebook["cells"][-1]["source"] == "notes \ufffd end"
    nbformat.writes(nbformat.from_dict(cleaned.notebook)).encode("utf-8")
    outs = clean_outputs([{"output_type": "stream", "name": "stdout", "text": "a\ud800b"},
                          {"output_type": "error", "ename": "E\udfff", "evalue": "v" * 50_000, "traceback": ["\udc80"]},
                          {"output_type": "display_data", "metadata": {},
                           "data": {"application/json": json.loads("[" * 40 + "]" * 40), "text/plain": "ok"}}])
    assert outs[0]["text"] == "a\ufffdb" and outs[1]["ename"] == "E\ufffd" and outs[1]["traceback"] == ["\ufffd"]
    assert len(outs[1]["evalue"]) < 21_000, "an error's text is kept short"
    assert outs[2]["data"] == {"text/plain": "ok"}, "JSON nested past the limit is left out"
    assert writable({"k\udc80": ("x\udc80",)}) == {"k\ufffd": ("x\ufffd",)}


# --------------------------------------------------------------------------- what the student's process answers
@pytest.mark.parametrize("text, score", [("1.5", 1.5), ("10**400", 3.0), ("1" + "0" * 400, 3.0), ("nan", 3.0),
                                         ("(" * 50 + "1" + ")" * 50, 3.0), ("-1", 3.0), (None, 3.0)])
def test_a_partial_score_is_read_only_from_a_short_number(text, score) -> None:
    assert partial_score(CellRun("ok", result_text=text), 3.0) == score
    assert MAX_SCORE_CHARS < 100


def test_the_tamper_probe_answer_is_kept_short() -> None:
    forged = {"application/json": {"nonce": "n", "problems": ["p" * 10_000] * 10_000}}
    problems = parse_probe(forged, "n")
    assert len(problems) == MAX_PROBLEMS + 1 and all(len(p) <= 200 for p in problems) and "more" in problems[-1]


# --------------------------------------------------------------------------- recording and reporting
@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Course:
    root = gf.make_course(tmp_path_factory.mktemp("course"))
    course = Course(root)
    course.ensure_gradebook("tiny")
    return course


def _result_with_surrogates(student: str) -> SubmissionResult:
    notebook = json.loads(nbformat.writes(gf.source_notebook()))
    notebook["cells"].append({"cell_type": "markdown", "metadata": {}, "source": "notes \udc80", "id": "x1"})
    cells = tuple(CellResult("tiny.ipynb", gid, float(p), float(p), "passed", "passed",
                             outputs=({"output_type": "stream", "name": "stdout", "text": "out \udc80"},))
                  for gid, p in gf.POINTS.items())
    total = float(sum(gf.POINTS.values()))
    return SubmissionResult(student, "tiny", "a1", cells, total, total, 1.0, ("tiny.ipynb: cell 9 \udc80",), (),
                            {"tiny.ipynb": notebook})


def test_a_result_with_characters_no_file_can_hold_is_recorded_again_and_again(course: Course) -> None:
    """Recorded, recorded again by a later run, reported: the gradebook, the result file, the autograded notebook,
    the feedback and the export agree, and nothing crashes (a later run crashed on such a record before)."""
    result = _result_with_surrogates("sue")
    for _ in range(2):
        course.record(result)
    assert gradebook_scores(course.db_url, "tiny")["sue"] == (6.0, 6.0)
    kept = course.results.get("tiny", "sue", "a1")
    assert kept.score == 6.0 and kept.events == ("tiny.ipynb: cell 9 \ufffd",)
    assert "notes \ufffd" in (course.autograded / "sue" / "tiny" / "tiny.ipynb").read_text(encoding="utf-8")
    outcome = autograde.run(course, autograde.Plan("tiny", ("sue", "bad"), (), (result,), (("bad", "it broke"),)),
                            autograde.Workers())
    assert outcome.results["sue"].score == 6.0 and outcome.not_graded() == {"bad": ["no result: it broke"]}


def test_a_damaged_result_file_is_graded_again_not_a_crash(tmp_path: Path) -> None:
    store = ResultStore(tmp_path)
    result = _result_with_surrogates("amy")
    path = store.put(result.writable())
    assert path.read_bytes().isascii() and store.get("tiny", "amy", "a1").score == 6.0
    path.write_text('{"student": "amy", "cells": [')
    assert store.get("tiny", "amy", "a1") is None


def test_one_hand_in_that_cannot_be_planned_or_reported_costs_that_student_alone(course: Course, monkeypatch,
                                                                                 capsys) -> None:
    for student in ("ok", "broken"):
        folder = course.submitted / student / "tiny"
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(gf.source_notebook(), folder / "tiny.ipynb")
    real_job = Course.job

    def job(self, assignment, student, limits, sandbox):
        if student == "broken":
            raise RecursionError("planted")
        return real_job(self, assignment, student, limits, sandbox)

    monkeypatch.setattr(Course, "job", job)
    plan = autograde.plan(course, "tiny", ["ok", "broken"], autograde.Limits(), sandbox=False)
    assert [j.student for j in plan.jobs] == ["ok"] and plan.failed[0][0] == "broken"
    assert "RecursionError: planted" in plan.failed[0][1]
    monkeypatch.setattr(Course, "write_feedback", lambda self, a, s: (_ for _ in ()).throw(ValueError("planted"))
                        if s == "broken" else Path("ok"))
    assert cli.main(["--course", str(course.root), "feedback", "tiny", "--student", "broken", "--student", "ok"]) == 1
    assert "broken: no feedback written (ValueError: planted)" in capsys.readouterr().err
