"""Hand-ins are read as regular files only: a link (to the instructor's solutions, to /dev/zero), a pipe
or an oversized file is refused with a reason, never followed, both when collecting and when grading,
and collecting from nbgrader's exchange stops before it would copy what a link points to."""
from __future__ import annotations

import json
import os
from pathlib import Path

import nbformat
import pytest

from autograder import cli, handin_files
from autograder.course import Course
from autograder.records import Limits
from tests.support import grading_fixtures as gf


@pytest.fixture()
def course(tmp_path: Path) -> Course:
    root = gf.make_course(tmp_path / "course")
    _notebook(root / "course" / "tiny" / "tiny.ipynb")     # a release, which a grading job names
    return Course(root)


def _notebook(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(gf.source_notebook(), path)
    return path


def test_a_regular_file_is_read_and_everything_else_refused(tmp_path: Path) -> None:
    real = _notebook(tmp_path / "real.ipynb")
    assert json.loads(handin_files.read_regular(real))["cells"]
    link = tmp_path / "link.ipynb"
    link.symlink_to(real)
    dangling = tmp_path / "dangling.ipynb"
    dangling.symlink_to(tmp_path / "nowhere.ipynb")
    zero = tmp_path / "zero.ipynb"
    zero.symlink_to("/dev/zero")
    for path in (link, dangling, zero):
        with pytest.raises(handin_files.NotAFile, match="symbolic link"):
            handin_files.read_regular(path)
    fifo = tmp_path / "fifo.ipynb"
    os.mkfifo(fifo)                      # no writer: a blocking read would wait for ever
    with pytest.raises(handin_files.NotAFile, match="not a regular file"):
        handin_files.read_regular(fifo)
    with pytest.raises(handin_files.NotAFile, match="not a regular file"):
        handin_files.read_regular(tmp_path)
    with pytest.raises(handin_files.NotAFile, match="larger than"):
        handin_files.read_regular(real, limit=100)
    with pytest.raises(FileNotFoundError):
        handin_files.read_regular(tmp_path / "missing.ipynb")


def test_collecting_copies_files_and_records_why_links_were_refused(course: Course, tmp_path: Path) -> None:
    solution = course.source / "tiny" / "tiny.ipynb"
    handins = tmp_path / "handins"
    _notebook(handins / "alice" / "tiny" / "tiny.ipynb")
    (handins / "mallory" / "tiny").mkdir(parents=True)
    (handins / "mallory" / "tiny" / "tiny.ipynb").symlink_to(solution)          # the instructor's notebook
    (handins / "eve").mkdir()
    (handins / "eve" / "tiny").symlink_to(solution.parent, target_is_directory=True)
    (handins / "trudy" / "tiny").mkdir(parents=True)
    (handins / "trudy" / "tiny" / "tiny.ipynb").symlink_to("/dev/zero")
    (handins / "oscar" / "tiny").mkdir(parents=True)
    os.mkfifo(handins / "oscar" / "tiny" / "tiny.ipynb")
    (handins / "linked_student").symlink_to(handins / "alice", target_is_directory=True)

    assert course.collect_from(handins, "tiny") == 5                # linked_student: not a student's folder
    assert course.students("tiny") == ["alice", "eve", "mallory", "oscar", "trudy"]
    assert course.handed_in("tiny", "alice")["tiny.ipynb"].data["cells"]
    secret = solution.read_bytes()
    for student, says in (("mallory", "symbolic link"), ("eve", "the folder tiny is a symbolic link"),
                          ("trudy", "symbolic link"), ("oscar", "not a regular file")):
        folder = course.submitted / student / "tiny"
        assert not (folder / "tiny.ipynb").exists(), student
        assert all(secret not in p.read_bytes() for p in folder.iterdir() if p.is_file()), student
        hand_in = course.handed_in("tiny", student)["tiny.ipynb"]
        assert hand_in.data is None and says in hand_in.refused, (student, hand_in.refused)
        job = course.job("tiny", student, Limits(), False)
        assert says in job.notebooks["tiny.ipynb"].refused


def test_a_link_placed_in_submitted_is_refused_when_graded(course: Course) -> None:
    folder = course.submitted / "mallory" / "tiny"
    folder.mkdir(parents=True)
    (folder / "tiny.ipynb").symlink_to(course.source / "tiny" / "tiny.ipynb")
    hand_in = course.handed_in("tiny", "mallory")["tiny.ipynb"]
    assert hand_in.data is None and "symbolic link" in hand_in.refused
    assert hand_in.digest                     # an attempt of its own: a later real hand-in is graded again


def test_collecting_from_the_exchange_stops_at_a_link(course: Course, tmp_path: Path, monkeypatch, capsys) -> None:
    exchange = tmp_path / "exchange"
    entry = exchange / "gemmlab" / "inbound" / "mallory+tiny+2026-11-27 01:00:00.000000 UTC"
    entry.mkdir(parents=True)
    (entry / "tiny.ipynb").symlink_to(course.source / "tiny" / "tiny.ipynb")
    _notebook(exchange / "gemmlab" / "inbound" / "alice+tiny+2026-11-27 01:00:00.000000 UTC" / "tiny.ipynb")
    monkeypatch.setattr(cli, "EXCHANGE", exchange)

    def never(*args, **kwargs):
        raise AssertionError("nbgrader collect ran over a link")

    monkeypatch.setattr(course, "nbgrader", never)
    rc = cli.cmd_collect(course, cli.parser().parse_args(["collect", "tiny"]))
    assert rc == 1
    err = capsys.readouterr().err
    assert "not collected: 1 hand-in entry is a link" in err and "mallory+tiny+" in err
    (entry / "tiny.ipynb").unlink()
    assert handin_files.unsafe_entries(exchange, "*/inbound/*+tiny+*") == []
