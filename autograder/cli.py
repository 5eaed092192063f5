"""Instructor command line: ``python -m autograder {collect,autograde,feedback,export,grade}``.

Run it from the repository root (or pass ``--course DIR``); the course layout is described in
:mod:`autograder.course`. This module only reads the arguments and calls the modules that do
the work: :mod:`autograder.course`, :mod:`autograder.autograde` and :mod:`autograder.console`.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from . import autograde, handin_files
from .console import Progress, table
from .course import EXCHANGE, REPO, Course, CourseError
from .records import Limits


def cmd_collect(course: Course, args: argparse.Namespace) -> int:
    """Copy hand-ins into submitted/: from a folder (``--from DIR``) or from nbgrader's exchange."""
    if args.source is None:
        # nbgrader's collect copies the exchange's hand-ins following links, with the grader's rights:
        # a link there would hand in whatever it points to (the solutions, another student's work).
        unsafe = handin_files.unsafe_entries(EXCHANGE, f"*/inbound/*+{args.assignment}+*")
        if unsafe:
            print(f"not collected: {len(unsafe)} hand-in entr{'y is' if len(unsafe) == 1 else 'ies are'} a link or "
                  "not a regular file, and nbgrader would copy what they point to. Delete them from the exchange "
                  "(the student then hands in again), or collect with --from:\n"
                  + "\n".join(f"  {p}" for p in unsafe[:20]), file=sys.stderr)
            return 1
        proc = course.nbgrader("collect", args.assignment, "--update")
        print(proc.stdout + proc.stderr)
        return proc.returncode
    n = course.collect_from(args.source, args.assignment)
    print(f"collected {n} submissions of {args.assignment} into {course.submitted}")
    return 0


def cmd_autograde(course: Course, args: argparse.Namespace) -> int:
    from .harness.sandbox import check_bwrap

    sandbox = not args.no_sandbox
    if sandbox and (why := check_bwrap()):
        print(f"cannot sandbox submissions: {why}. (--no-sandbox grades without one: trusted notebooks only.)",
              file=sys.stderr)
        return 2
    course.ensure_gradebook(args.assignment)
    limits = Limits().with_overrides(**{k: getattr(args, k) for k in
                                        ("cell_s", "slow_cell_s", "answer_cell_s", "submission_s", "output_bytes",
                                         "notebook_output_bytes", "memory_bytes")})
    plan = autograde.plan(course, args.assignment, args.student or course.students(args.assignment), limits,
                          sandbox, force=args.force)
    workers = autograde.Workers(autograde.local_gpus(args.gpus), args.workers, args.ray)
    bar = Progress(len(plan.jobs), f"autograde {args.assignment}")
    with warnings.catch_warnings(record=True) as caught:   # shown after the bar, not through it
        warnings.simplefilter("default")
        outcome = autograde.run(course, plan, workers, on_step=bar.step)
    bar.close()
    for message in sorted({f"{w.category.__name__}: {w.message}" for w in caught}):
        print(f"warning while grading: {message}", file=sys.stderr)
    print(table(outcome.rows(), ["student", "score", "max", "seconds", "notes"]))
    if summary := outcome.summary():
        print(summary)
    return 0 if outcome.complete else 1


def cmd_feedback(course: Course, args: argparse.Namespace) -> int:
    students = args.student or course.students(args.assignment)
    n = 0
    for s in students:
        try:
            written = course.write_feedback(args.assignment, s)
        except CourseError:
            raise
        except Exception as exc:  # noqa: BLE001 - one student's report never stops the others'
            print(f"{s}: no feedback written ({type(exc).__name__}: {str(exc)[:300]})", file=sys.stderr)
            continue
        if written is None:
            print(f"{s}: no result for the current hand-in of {args.assignment} (autograde grades it, or says "
                  "why it could not)", file=sys.stderr)
            continue
        n += 1
    print(f"wrote {n} feedback reports under {course.feedback}")
    return 0 if n == len(students) else 1


def cmd_export(course: Course, args: argparse.Namespace) -> int:
    if getattr(args, "format", "csv") != "csv":   # an LMS's gradebook import file (reports/lms_export.py)
        from .reports import lms_export

        scores = [s for s in lms_export.gradebook_scores(course.db_url)
                  if not args.student or s.student in args.student]
        Path(args.out).write_text(lms_export.export(args.format, scores, lms_export.read_people(args.people)))
        print(f"wrote {len({s.student for s in scores})} students' grades for {args.format} to {args.out}")
        return 0
    n = course.export_grades(Path(args.out), args.student)
    print(f"wrote {n} grades to {args.out}")
    return 0


def cmd_grade(course: Course, args: argparse.Namespace) -> int:
    """collect, autograde, feedback, export: the later steps run whatever happened in the earlier ones
    (an instructor always gets the reports there are); non-zero when any step was not complete."""
    rcs = []
    steps = ([cmd_collect] if args.source is not None else []) + [cmd_autograde, cmd_feedback, cmd_export]
    for step in steps:
        try:
            rcs.append(step(course, args))
        except CourseError as err:
            print(err, file=sys.stderr)
            rcs.append(1)
    return max(rcs)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m autograder", description="Grade gemmlab submissions at class scale.")
    p.add_argument("--course", type=Path, default=REPO, help="course root (default: this repository)")
    sub = p.add_subparsers(dest="command", required=True)

    def grading_opts(q: argparse.ArgumentParser) -> None:
        q.add_argument("--student", action="append", help="only this student (repeatable)")
        q.add_argument("--gpus", help="GPU indices for one worker each, e.g. 0,1 (default: every GPU)")
        q.add_argument("--workers", type=int, help="parallel workers without GPUs (default 1)")
        q.add_argument("--ray", nargs="?", const="auto", help="grade on Ray: 'auto' (running cluster), an address, "
                                                            "or 'local' (start one here)")
        q.add_argument("--force", action="store_true", help="grade again even if this attempt has a result")
        q.add_argument("--no-sandbox", action="store_true", help="no bubblewrap (trusted notebooks only)")
        q.add_argument("--cell-timeout", dest="cell_s", type=float)
        q.add_argument("--slow-cell-timeout", dest="slow_cell_s", type=float)
        q.add_argument("--answer-cell-timeout", dest="answer_cell_s", type=float,
                       help="seconds per cell of the student's own code (default 60)")
        q.add_argument("--submission-timeout", dest="submission_s", type=float)
        q.add_argument("--output-limit", dest="output_bytes", type=int, help="bytes a cell may send (default 4 MB)")
        q.add_argument("--notebook-output-limit", dest="notebook_output_bytes", type=int,
                       help="bytes of output kept of one notebook, all cells together (default 32 MB)")
        q.add_argument("--memory-limit", dest="memory_bytes", type=int)

    q = sub.add_parser("collect", help="copy hand-ins into autograder/submitted")
    q.add_argument("assignment")
    q.add_argument("--from", dest="source", type=Path)
    q = sub.add_parser("autograde", help="grade every submission of an assignment in sandboxes")
    q.add_argument("assignment")
    grading_opts(q)
    q = sub.add_parser("feedback", help="write each student's HTML report")
    q.add_argument("assignment")
    q.add_argument("--student", action="append")
    q = sub.add_parser("export", help="grades from the gradebook as CSV (or an LMS's import file)")
    q.add_argument("--out", default="grades.csv")
    q.add_argument("--student", action="append", help="only this student (repeatable)")
    q.add_argument("--format", choices=("csv", "canvas", "moodle"), default="csv",
                   help="canvas/moodle: the LMS's gradebook import file (autograder/reports/lms_export.py)")
    q.add_argument("--people", type=Path, help="Hub name -> LMS identity (classroom writes it from LTI launches)")
    q = sub.add_parser("grade", help="collect (with --from), autograde, feedback and export in one go")
    q.add_argument("assignment")
    q.add_argument("--from", dest="source", type=Path)
    q.add_argument("--out", default="grades.csv")
    grading_opts(q)
    return p


COMMANDS = {"collect": cmd_collect, "autograde": cmd_autograde, "feedback": cmd_feedback, "export": cmd_export,
            "grade": cmd_grade}


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return COMMANDS[args.command](Course(args.course), args)
    except CourseError as err:
        print(err, file=sys.stderr)
        return 1
