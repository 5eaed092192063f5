"""Autograded capstone notebooks for leaderboard tests: the three graded cells, the speed cell printing a record."""
from __future__ import annotations

from pathlib import Path

import nbformat

from autograder.reports import leaderboard as lb


def graded_notebook(course: Path, student: str, speed_output: str) -> None:
    """``course/autograder/autograded/<student>/09_capstone/09_capstone.ipynb``: it built, it is correct, and
    its speed cell printed ``speed_output``."""
    def cell(grade_id: str, text: str):
        c = nbformat.v4.new_code_cell("pass", metadata={"nbgrader": {"grade_id": grade_id, "grade": True}})
        c.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        return c

    nb = nbformat.v4.new_notebook(cells=[cell(lb.BUILD_CELL, ""), cell(lb.CORRECT_CELL, "correct\n"),
                                         cell(lb.SPEED_CELL, speed_output)])
    dest = course / "autograder" / "autograded" / student / lb.ASSIGNMENT
    dest.mkdir(parents=True)
    nbformat.write(nb, dest / f"{lb.ASSIGNMENT}.ipynb")
