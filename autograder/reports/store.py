"""Where grades go: a result file per (assignment, student, attempt), and nbgrader's gradebook.

Both writes are idempotent: a result file is replaced atomically (write, then rename) and a
gradebook grade is set, not added. So a task that is retried after an infrastructure failure,
or a whole run started again, rewrites the same values instead of counting them twice, and a
submission whose result file exists is not graded again unless asked (``--force``).
``attempt`` is a digest of the handed-in notebooks: a new hand-in is a new attempt.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ..records import SubmissionResult


def attempt_id(notebooks: dict[str, Any]) -> str:
    """A short digest of what was handed in (notebook name → any JSON value, None when missing)."""
    h = hashlib.sha256()
    for name in sorted(notebooks):
        h.update(name.encode() + b"\0")
        h.update(json.dumps(notebooks[name], sort_keys=True).encode() if notebooks[name] is not None else b"-")
    return h.hexdigest()[:16]


class ResultStore:
    """``root/<assignment>/<student>/<attempt>.json``."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def path(self, assignment: str, student: str, attempt: str) -> Path:
        return self.root / assignment / student / f"{attempt}.json"

    def put(self, result: SubmissionResult) -> Path:
        path = self.path(result.assignment, result.student, result.attempt)
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(result.to_dict())       # ASCII: any character is written as an escape
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(text)
        os.replace(tmp, path)
        return path

    def get(self, assignment: str, student: str, attempt: str) -> SubmissionResult | None:
        """The recorded result, or None when there is none or it cannot be read (then the attempt is graded
        again: a damaged record never stops a run)."""
        path = self.path(assignment, student, attempt)
        if not path.exists():
            return None
        try:
            return SubmissionResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            return None

    def attempts(self, assignment: str, student: str) -> list[str]:
        folder = self.root / assignment / student
        return sorted(p.stem for p in folder.glob("*.json")) if folder.exists() else []


def write_gradebook(db_url: str, result: SubmissionResult, timestamp: Any = None) -> None:
    """Set every autograded score of ``result`` in nbgrader's gradebook (overwriting, never adding).

    ``timestamp`` (a datetime): when the graded hand-in was submitted; the formgrader shows a submission as
    autograded only when the gradebook's time equals its ``timestamp.txt``."""
    import warnings

    from nbgrader.api import Gradebook

    with Gradebook(db_url) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore")   # SQLAlchemy's autoflush notes from inside nbgrader
        gb.update_or_create_student(result.student)
        gb.update_or_create_submission(result.assignment, result.student,
                                       **({"timestamp": timestamp} if timestamp is not None else {}))
        for cell in result.cells:
            notebook = Path(cell.notebook).stem
            grade = gb.find_grade(cell.grade_id, notebook, result.assignment, result.student)
            if cell.score is None:
                grade.auto_score = None
                grade.needs_manual_grade = True
            else:
                grade.auto_score = float(cell.score)
                grade.needs_manual_grade = False
        gb.db.commit()


def gradebook_scores(db_url: str, assignment: str) -> dict[str, tuple[float, float]]:
    """{student: (score, max_score)} for ``assignment`` as the gradebook has them."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(db_url) as gb:
        for sub in gb.assignment_submissions(assignment):
            out[sub.student.id] = (float(sub.score), float(sub.max_score))
    return out
