"""Grades out of the gradebook in the files an LMS imports: Canvas's gradebook CSV and Moodle's grade import CSV.

Why two formats and a people map: a class on JupyterHub knows students by their Hub name, an LMS
by its own ids. When students log in from the LMS (LTI 1.3, classroom/lti.py) the launch names
both, and classroom keeps them in ``people.json`` (Hub name -> ``{"name", "email", "lms_user_id",
"sis_user_id", "login_id", "sub"}``); without it the Hub name stands in as the login id. Each format
is what the LMS's own export writes, so an instructor imports it without mapping columns by hand:

- Canvas (Grades > Import): ``Student, ID, SIS User ID, SIS Login ID, Section``, one column per
  assignment (``"<name>"``; Canvas creates an assignment for a header it does not know), and the
  ``Points Possible`` row under the header, as Canvas's own export has it. Canvas matches a row by
  ``ID`` (its user id), else ``SIS User ID``, else ``SIS Login ID``.
- Moodle (Grades > Import > CSV file): ``First name, Last name, Username, Email address``, one
  column per assignment (``"Assignment: <name> (Real)"``, the header Moodle's export gives a grade
  item); the import page maps ``Email address`` or ``Username`` to the user and each column to a
  grade item.

A student the gradebook has no score for is left blank (Canvas and Moodle then keep what they have);
a score is the gradebook's points, written with up to three decimals.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

FORMATS = ("canvas", "moodle")


@dataclass(frozen=True)
class Score:
    """One student's points for one assignment, as the gradebook holds them."""

    student: str
    assignment: str
    score: float
    max_score: float


class ExportError(ValueError):
    """The people map or the request cannot be turned into an LMS file; the message says what to fix."""


def gradebook_scores(db_url: str, assignments: Iterable[str] | None = None) -> list[Score]:
    """Every submission's score in nbgrader's gradebook at ``db_url`` (only ``assignments`` when given)."""
    from nbgrader.api import Gradebook

    from .store import gradebook_scores as assignment_scores

    with Gradebook(db_url) as gb:
        names = [a.name for a in gb.assignments]
    wanted = set(assignments) if assignments else set(names)
    return sorted((Score(student, name, score, max_score) for name in names if name in wanted
                   for student, (score, max_score) in assignment_scores(db_url, name).items()),
                  key=lambda s: (s.assignment, s.student))


def read_people(path: str | Path | None) -> dict[str, dict[str, str]]:
    """The people map (Hub name -> LMS identity fields); empty when ``path`` is None or missing."""
    if path is None or not Path(path).exists():
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(f"cannot read the people map {path}: {exc}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ExportError(f"{path} must map each Hub name to an object of LMS fields (name, email, lms_user_id...).")
    return {str(k): {str(f): str(v) for f, v in fields.items() if v is not None} for k, fields in data.items()}


def _points(value: float) -> str:
    return f"{round(value, 3):g}"


def _table(scores: list[Score]) -> tuple[list[str], dict[str, float], dict[str, dict[str, float]]]:
    """(assignments in order, their points possible, student -> assignment -> score)."""
    assignments = sorted({s.assignment for s in scores})
    possible: dict[str, float] = {}
    by_student: dict[str, dict[str, float]] = {}
    for s in scores:
        possible[s.assignment] = max(possible.get(s.assignment, 0.0), s.max_score)
        by_student.setdefault(s.student, {})[s.assignment] = s.score
    return assignments, possible, by_student


def _split_name(full: str) -> tuple[str, str]:
    first, _, last = full.strip().partition(" ")
    return first, last


def canvas_csv(scores: list[Score], people: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """Canvas's gradebook import file for ``scores``."""
    people = people or {}
    assignments, possible, by_student = _table(scores)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *assignments])
    w.writerow(["    Points Possible", "", "", "", "", *(_points(possible[a]) for a in assignments)])
    for student in sorted(by_student):
        p = people.get(student, {})
        name = p.get("name") or student
        last_first = f"{_split_name(name)[1]}, {_split_name(name)[0]}".strip(", ") if " " in name else name
        w.writerow([last_first, p.get("lms_user_id", ""), p.get("sis_user_id", ""),
                    p.get("login_id") or p.get("email") or student, p.get("section", ""),
                    *(_points(by_student[student][a]) if a in by_student[student] else "" for a in assignments)])
    return out.getvalue()


def moodle_csv(scores: list[Score], people: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """Moodle's grade import file for ``scores``."""
    people = people or {}
    assignments, _, by_student = _table(scores)
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["First name", "Last name", "Username", "Email address",
                *(f"Assignment: {a} (Real)" for a in assignments)])
    for student in sorted(by_student):
        p = people.get(student, {})
        first, last = _split_name(p.get("name") or student)
        w.writerow([first, last, p.get("login_id") or student, p.get("email", ""),
                    *(_points(by_student[student][a]) if a in by_student[student] else "" for a in assignments)])
    return out.getvalue()


def export(fmt: str, scores: list[Score], people: Mapping[str, Mapping[str, str]] | None = None) -> str:
    """The file text of ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "canvas":
        return canvas_csv(scores, people)
    if fmt == "moodle":
        return moodle_csv(scores, people)
    raise ExportError(f"no LMS format {fmt!r}: choose one of {', '.join(FORMATS)}.")


__all__ = ["ExportError", "FORMATS", "Score", "canvas_csv", "export", "gradebook_scores", "moodle_csv", "read_people"]
