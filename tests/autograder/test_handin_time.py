"""When a hand-in was submitted, as the gradebook records it: the formgrader calls a submission autograded only
when the gradebook's time is the hand-in's ``timestamp.txt``."""
from __future__ import annotations

import datetime
from pathlib import Path

from autograder.course import Course


def test_the_hand_in_time_is_read_from_its_timestamp_file_and_nothing_else(tmp_path: Path) -> None:
    course = Course(tmp_path)
    folder = course.submitted / "ann" / "02_tiled_copy"
    folder.mkdir(parents=True)
    assert course.handed_in_at("02_tiled_copy", "ann") is None
    (folder / "timestamp.txt").write_text("2026-12-07 02:41:32.714286 UTC\n")
    assert course.handed_in_at("02_tiled_copy", "ann") == datetime.datetime(2026, 12, 7, 2, 41, 32, 714286)
    (folder / "timestamp.txt").write_text("tomorrow, probably")
    assert course.handed_in_at("02_tiled_copy", "ann") is None
    (folder / "timestamp.txt").unlink()
    (folder / "timestamp.txt").symlink_to(tmp_path / "elsewhere.txt")
    (tmp_path / "elsewhere.txt").write_text("2026-12-07 02:41:32 UTC")
    assert course.handed_in_at("02_tiled_copy", "ann") is None   # a link is never followed
