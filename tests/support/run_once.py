"""Expensive test inputs made once per test run and shared by every test process.

Why: a session-scoped fixture is made once per process, so on CI's pytest-xdist workers a grading that
tests in two files use is made once per worker that asks. ``once(name, make)`` makes it in the first
process that asks, while the others wait on its lock, and keeps it as JSON in the run's folder
(``$GEMMLAB_TEST_RUN_DIR``, made and removed by tests/conftest.py), where the others read it.
A ``make`` that raises stores nothing: each test that asks sees the error.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
from pathlib import Path
from typing import Any, Callable

#: The folder of the current test run (shared by its processes; removed when the run ends).
RUN_DIR_ENV = "GEMMLAB_TEST_RUN_DIR"


def run_dir() -> Path:
    """The current test run's folder."""
    folder = os.environ.get(RUN_DIR_ENV)
    if not folder:
        raise RuntimeError(f"{RUN_DIR_ENV} is not set: run the tests with pytest from the repository (tests/conftest.py)")
    return Path(folder)


def once(name: str, make: Callable[[], Any]) -> Any:
    """``make()`` (a JSON value), made by the first process of this run that asks for ``name``, read by the rest."""
    if not re.fullmatch(r"[\w.-]+", name):
        raise ValueError(f"{name!r}: a name of letters, digits, '.', '-' and '_'")
    folder = run_dir() / "once"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.json"
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists():
            return json.loads(path.read_text())
        value = make()
        text = json.dumps(value)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        return json.loads(text)
