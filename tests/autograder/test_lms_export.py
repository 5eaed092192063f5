"""Grades in Canvas's and Moodle's import formats, read back as each LMS reads them."""
from __future__ import annotations

import csv
import io
import json
import os
import sys
from pathlib import Path

import pytest

from autograder import cli
from autograder.reports.lms_export import ExportError, Score, canvas_csv, export, gradebook_scores, moodle_csv, read_people

SCORES = [Score("alice", "02_tiled_copy", 12.0, 14.0), Score("bob", "02_tiled_copy", 3.5, 14.0),
          Score("carol", "02_tiled_copy", 0.0, 14.0), Score("alice", "01_layouts_and_partitioning", 7.25, 10.0)]
PEOPLE = {"alice": {"name": "Alice Liddell", "email": "alice@uni.edu", "lms_user_id": "1201", "sub": "u-1"},
          "bob": {"name": "Bob Dodgson", "email": "bob@uni.edu", "lms_user_id": "1202"}}


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_canvas_has_its_header_points_possible_row_and_user_ids() -> None:
    rows = _rows(canvas_csv(SCORES, PEOPLE))
    assert list(rows[0])[:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
    assert rows[0]["Student"].strip() == "Points Possible"
    assert rows[0]["02_tiled_copy"] == "14" and rows[0]["01_layouts_and_partitioning"] == "10"
    by = {r["SIS Login ID"]: r for r in rows[1:]}
    assert by["alice@uni.edu"]["ID"] == "1201" and by["alice@uni.edu"]["Student"] == "Liddell, Alice"
    assert by["alice@uni.edu"]["02_tiled_copy"] == "12" and by["alice@uni.edu"]["01_layouts_and_partitioning"] == "7.25"
    assert by["bob@uni.edu"]["02_tiled_copy"] == "3.5" and by["bob@uni.edu"]["01_layouts_and_partitioning"] == ""
    assert by["carol"]["02_tiled_copy"] == "0" and by["carol"]["ID"] == ""   # no LTI launch: the Hub name


def test_moodle_names_each_grade_item_as_its_export_does() -> None:
    rows = _rows(moodle_csv(SCORES, PEOPLE))
    assert list(rows[0])[:4] == ["First name", "Last name", "Username", "Email address"]
    by = {r["Username"]: r for r in rows}
    assert by["alice"]["Assignment: 02_tiled_copy (Real)"] == "12" and by["alice"]["Email address"] == "alice@uni.edu"
    assert by["bob"]["Last name"] == "Dodgson" and by["carol"]["Assignment: 01_layouts_and_partitioning (Real)"] == ""


def test_a_bad_format_or_people_map_says_what_to_fix(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="canvas, moodle"):
        export("blackboard", SCORES)
    bad = tmp_path / "people.json"
    bad.write_text(json.dumps({"alice": "alice@uni.edu"}))
    with pytest.raises(ExportError, match="object of LMS fields"):
        read_people(bad)
    assert read_people(tmp_path / "missing.json") == {}


def test_the_export_command_reads_the_gradebook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real nbgrader gradebook with two students' autograded scores, exported for Canvas through the CLI."""
    from nbgrader.api import Gradebook

    monkeypatch.setenv("PATH", str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    root = tmp_path / "course"
    (root / "solutions" / "02_tiled_copy").mkdir(parents=True)
    db = f"sqlite:///{root / 'autograder' / 'gradebook.db'}"
    (root / "autograder").mkdir()
    with Gradebook(db) as gb:
        gb.add_assignment("02_tiled_copy")
        gb.add_notebook("02_tiled_copy", "02_tiled_copy")
        gb.add_grade_cell("t1", "02_tiled_copy", "02_tiled_copy", max_score=4, cell_type="code")
        gb.add_grade_cell("t2", "02_tiled_copy", "02_tiled_copy", max_score=6, cell_type="code")
        for student, (a, b) in {"alice": (4, 6), "bob": (4, 0)}.items():
            gb.add_student(student)
            gb.add_submission("02_tiled_copy", student)
            for cell, points in (("t1", a), ("t2", b)):
                grade = gb.find_grade(cell, "02_tiled_copy", "02_tiled_copy", student)
                grade.auto_score = points
            gb.db.commit()
    assert gradebook_scores(db) == [Score("alice", "02_tiled_copy", 10.0, 10.0), Score("bob", "02_tiled_copy", 4.0, 10.0)]
    people = tmp_path / "people.json"
    people.write_text(json.dumps(PEOPLE))
    out = tmp_path / "canvas.csv"
    assert cli.main(["--course", str(root), "export", "--format", "canvas", "--people", str(people),
                     "--out", str(out)]) == 0
    rows = _rows(out.read_text())
    assert [(r["ID"], r["02_tiled_copy"]) for r in rows[1:]] == [("1201", "10"), ("1202", "4")]
