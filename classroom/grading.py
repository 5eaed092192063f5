"""``python -m classroom grade``: from the deadline to grades in the LMS, each step the grader's own.

collect (classroom/exchange.py) -> autograde and feedback (``python -m autograder`` on the class's
course: sandboxed, judged) -> feedback released to each student's exchange folder -> the gradebook
exported for Canvas and Moodle (autograder/reports/lms_export.py) into ``<class>/grades/`` -> scores sent
through LTI AGS where the LMS offers it (classroom/ags.py). Every step runs whatever happened
before it; the exit status is non-zero when any step was incomplete.
"""
from __future__ import annotations

import sys

from autograder import cli as grader_cli
from autograder.reports import lms_export

from .ags import AgsError, send_grades
from .exchange import collect, course, release_feedback
from .settings import ClassDir


def grade(where: ClassDir, assignment: str, sandbox: bool = True, gpus: str | None = None,
          workers: int | None = None) -> int:
    rcs = []
    report = collect(where, assignment)
    print(report.text(), flush=True)
    common = ["--course", str(where.course)]
    options = (["--no-sandbox"] if not sandbox else []) + (["--gpus", gpus] if gpus else []) + \
              (["--workers", str(workers)] if workers else [])
    rcs.append(grader_cli.main([*common, "autograde", assignment, *options]))
    rcs.append(grader_cli.main([*common, "feedback", assignment]))
    served = release_feedback(where, assignment)
    print(f"feedback for {len(served)} student(s) is ready to fetch: {', '.join(served) or '-'}")
    out = where.root / "grades"
    out.mkdir(exist_ok=True)
    scores = lms_export.gradebook_scores(course(where).db_url)
    people = lms_export.read_people(where.people)
    for fmt in lms_export.FORMATS:
        path = out / f"{fmt}.csv"
        path.write_text(lms_export.export(fmt, scores, people))
        print(f"{fmt}: {path}")
    rcs.append(grader_cli.main([*common, "export", "--out", str(out / "grades.csv")]))
    try:
        for line in send_grades(where, assignment, scores):
            print(line)
    except AgsError as exc:
        print(f"grades not sent to the LMS: {exc}", file=sys.stderr)
        rcs.append(1)
    return max(rcs)


__all__ = ["grade"]
