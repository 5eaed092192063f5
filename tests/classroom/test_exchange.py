"""Release -> fetch -> submit -> collect -> grade -> feedback -> LMS files, through a real Hub and nbgrader's exchange.

Three students work on notebook 02 in their own kernels (honest, wrong, hostile: the hostile one also
forges a hand-in named for a classmate); the instructor releases and grades with ``python -m
classroom``; each student fetches their own feedback; Canvas's and Moodle's files hold the grades.
Without a GPU, 02's two GPU tests are "not graded" (5 of its 8 points) and ``grade`` exits 1 saying so;
the 3 points of its layout exercise are graded here.

Where a browser test runs (CI included), tests/classroom/test_browser_class.py takes this same class, with
every check here, one student working through these same commands and two in JupyterLab: a class costs a Hub,
four servers and a grading, so it runs once. Here it runs only where no browser test can.
"""
from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from tests.classroom.running import class_env, require_class_tools, running_class
from tests.classroom.work import ASSIGNMENT, FORGE, edit, nbgrader
from tests.support import ROOT
from tests.support.browser import browser_tests_run

pytest.importorskip("jupyterhub", reason="the `class` extra: pip install -e '.[class]'")
pytestmark = [pytest.mark.slow]
KINDS = {"alice": "honest", "bob": "wrong", "carol": "hostile"}


def _classroom(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "classroom", *args], cwd=ROOT, env=class_env(), capture_output=True,
                          text=True, timeout=1200)


def test_release_fetch_submit_collect_grade_feedback_export(tmp_path: Path) -> None:
    if browser_tests_run():
        pytest.skip("tests/classroom/test_browser_class.py takes this class here, one student on the command line")
    require_class_tools()
    root = tmp_path / "class"
    with running_class(root, list(KINDS), ["teacher"]) as klass:
        done = _classroom("release", str(root), ASSIGNMENT)
        assert done.returncode == 0, done.stderr
        users = {}
        for name, kind in KINDS.items():
            users[name] = user = klass.login(name)
            user.start_server()
            out = user.run(nbgrader("fetch_assignment", ASSIGNMENT) + edit(kind) + nbgrader("submit", ASSIGNMENT))
            assert out["stdout"].count("exit 0") == 2 and "edited" in out["stdout"], out
        forged = users["carol"].run(FORGE.format(exchange=str(klass.root / "exchange")))
        assert not forged["error"] and "forged" in forged["stdout"], forged
        assert "bob+" not in forged["stdout"].replace("bob+02_tiled_copy+2099", ""), "carol sees only her own hand-ins"

        graded = _classroom("grade", str(root), ASSIGNMENT)
        text = graded.stdout + graded.stderr
        assert "collected 3 hand-in(s)" in text and "names 'bob'; it is carol's" in text, text
        assert graded.returncode == 1 and "need a GPU" in text, text       # 02's GPU tests, on a CPU
        assert "feedback for 3 student(s)" in text, text

        canvas = list(csv.DictReader(io.StringIO((root / "grades" / "canvas.csv").read_text())))
        assert canvas[0][ASSIGNMENT] == "8"
        scores = {r["SIS Login ID"]: r[ASSIGNMENT] for r in canvas[1:]}
        assert scores == {"alice": "3", "bob": "0", "carol": "0"}, scores
        moodle = list(csv.DictReader(io.StringIO((root / "grades" / "moodle.csv").read_text())))
        assert {r["Username"]: r[f"Assignment: {ASSIGNMENT} (Real)"] for r in moodle} == scores

        for name, user in users.items():
            out = user.run(nbgrader("fetch_feedback", ASSIGNMENT))
            assert "exit 0" in out["stdout"] and "Fetched feedback" in out["stdout"], (name, out)
            (html,) = (klass.root / "home" / name / ASSIGNMENT / "feedback").glob("*/*.html")
            page = html.read_text()
            assert name in page or ASSIGNMENT in page
            assert f"{scores[name]} / 8" in page.replace("  ", " ") or f"{scores[name]}/8" in page, (name, page[:2000])
