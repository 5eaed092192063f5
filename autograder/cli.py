"""Instructor command line: ``python -m autograder {collect,autograde,feedback,export,grade}``.

Run it from the repository root (or pass ``--course DIR``). The course layout is nbgrader's,
as ``autograder/nbgrader_config.py`` sets it: ``solutions/<assignment>/`` (source),
``course/<assignment>/`` (what students got), ``autograder/submitted/<student>/<assignment>/``,
``autograder/autograded/``, ``autograder/feedback/``, ``autograder/gradebook.db``, plus
``autograder/results/`` (one JSON per graded attempt).
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from .harness import feedback as _feedback
from .harness import store as _store
from .harness.kernel import Limits

REPO = Path(__file__).resolve().parent.parent


class Course:
    def __init__(self, root: Path) -> None:
        # nbgrader's Gradebook runs `alembic` from PATH: make it this environment's.
        bindir = str(Path(sys.executable).parent)
        if bindir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
        self.root = Path(root).resolve()
        self.ag = self.root / "autograder"
        self.source = self.root / "solutions"
        self.release = self.root / "course"
        self.submitted = self.ag / "submitted"
        self.autograded = self.ag / "autograded"
        self.feedback = self.ag / "feedback"
        self.db_url = f"sqlite:///{self.ag / 'gradebook.db'}"
        self.results = _store.ResultStore(self.ag / "results")

    def notebooks(self, assignment: str) -> list[str]:
        names = sorted(p.name for p in (self.source / assignment).glob("*.ipynb"))
        if not names:
            raise SystemExit(f"no notebooks in {self.source / assignment}")
        return names

    def students(self, assignment: str) -> list[str]:
        if not self.submitted.exists():
            return []
        return sorted(p.name for p in self.submitted.iterdir() if (p / assignment).is_dir())

    def release_notebook(self, assignment: str, name: str) -> Path:
        for folder in (self.release / assignment, self.ag / "release" / assignment):
            if (folder / name).exists():
                return folder / name
        raise SystemExit(f"no student release of {assignment}/{name}: run tools/release.py")


def _nbgrader(course: Course, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    cmd = [sys.executable, "-m", "nbgrader", *args, f"--NbGrader.config_file={REPO / 'autograder' / 'nbgrader_config.py'}",
           f"--CourseDirectory.root={course.root}", f"--CourseDirectory.db_url={course.db_url}",
           f"--CourseDirectory.release_directory={course.ag / 'release'}",
           f"--CourseDirectory.submitted_directory={course.submitted}"]
    return subprocess.run(cmd, cwd=course.root, env=env, capture_output=True, text=True)


def ensure_gradebook(course: Course, assignment: str) -> None:
    """Put the assignment (notebooks, graded cells, checksums) into the gradebook if it is not there."""
    from nbgrader.api import Gradebook, MissingEntry

    course.ag.mkdir(parents=True, exist_ok=True)
    with Gradebook(course.db_url) as gb:
        try:
            a = gb.find_assignment(assignment)
            if {nb.name for nb in a.notebooks} == {Path(n).stem for n in course.notebooks(assignment)}:
                return
        except MissingEntry:
            pass
    proc = _nbgrader(course, "generate_assignment", assignment, "--force")
    if proc.returncode != 0:
        raise SystemExit(f"nbgrader generate_assignment {assignment} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


# --------------------------------------------------------------------------- progress and tables
class Progress:
    def __init__(self, total: int, what: str, stream=sys.stderr) -> None:
        self.total, self.done, self.what, self.stream, self.t0 = total, 0, what, stream, time.monotonic()
        self.draw("")

    def draw(self, last: str) -> None:
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        took = time.monotonic() - self.t0
        self.stream.write(f"\r{self.what} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                          f"{took:6.0f} s  {last[:40]:<40}")
        self.stream.flush()

    def step(self, last: str) -> None:
        self.done += 1
        self.draw(last)
        if self.done >= self.total:
            self.stream.write("\n")


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


# --------------------------------------------------------------------------- commands
def cmd_collect(course: Course, args) -> int:
    """Copy hand-ins into submitted/: from a folder (``--from DIR`` holding DIR/<student>/<assignment>/
    or DIR/<student>/*.ipynb) or from nbgrader's exchange (nbgrader collect)."""
    if args.source is None:
        proc = _nbgrader(course, "collect", args.assignment, "--update")
        print(proc.stdout + proc.stderr)
        return proc.returncode
    n = 0
    for student_dir in sorted(Path(args.source).iterdir()):
        if not student_dir.is_dir():
            continue
        src = student_dir / args.assignment if (student_dir / args.assignment).is_dir() else student_dir
        nbs = sorted(src.glob("*.ipynb"))
        if not nbs:
            continue
        dest = course.submitted / student_dir.name / args.assignment
        if dest.exists():
            shutil.rmtree(dest)
        dest.mkdir(parents=True)
        for nb in nbs:
            shutil.copy2(nb, dest / nb.name)
        n += 1
    print(f"collected {n} submissions of {args.assignment} into {course.submitted}")
    return 0


def _job(course: Course, assignment: str, student: str, limits: Limits, sandbox: bool) -> dict:
    notebooks, handed = {}, {}
    for name in course.notebooks(assignment):
        path = course.submitted / student / assignment / name
        student_nb = None
        if path.exists():
            try:
                student_nb = json.loads(path.read_text())
                nbformat.from_dict(student_nb).cells  # noqa: B018 - must look like a notebook
            except (ValueError, AttributeError):
                student_nb = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        handed[name] = student_nb
        notebooks[name] = {"source": json.loads((course.source / assignment / name).read_text()),
                           "release": json.loads(course.release_notebook(assignment, name).read_text()),
                           "student": student_nb}
    return {"student": student, "assignment": assignment, "attempt": _store.attempt_id(handed),
            "notebooks": notebooks, "limits": vars(limits), "sandbox": sandbox}


def record(course: Course, result: dict) -> None:
    """Store one result: result file, gradebook grades, autograded notebooks (all overwriting)."""
    course.results.put(result)
    _store.write_gradebook(course.db_url, result)
    folder = course.autograded / result["student"] / result["assignment"]
    folder.mkdir(parents=True, exist_ok=True)
    for name, nb in result.get("executed", {}).items():
        nbformat.write(nbformat.from_dict(nb), folder / name)


def _limits(args) -> Limits:
    lim = Limits()
    for key in ("cell_s", "slow_cell_s", "submission_s", "output_bytes", "memory_bytes"):
        value = getattr(args, key, None)
        if value is not None:
            setattr(lim, key, type(getattr(lim, key))(value))
    return lim


def cmd_autograde(course: Course, args) -> int:
    from .harness import scale
    from .harness.sandbox import check_bwrap

    sandbox = not args.no_sandbox
    if sandbox and (why := check_bwrap()):
        print(f"cannot sandbox submissions: {why}. (--no-sandbox grades without one: trusted notebooks only.)",
              file=sys.stderr)
        return 2
    ensure_gradebook(course, args.assignment)
    students = args.student or course.students(args.assignment)
    limits = _limits(args)
    jobs, cached = [], []
    for s in students:
        job = _job(course, args.assignment, s, limits, sandbox)
        old = None if args.force else course.results.get(args.assignment, s, job["attempt"])
        (cached if old else jobs).append(old or job)
    for old in cached:
        record(course, old)
    results: dict[str, dict] = {r["student"]: r for r in cached}
    errors: dict[str, str] = {}
    bar = Progress(len(jobs), f"autograde {args.assignment}")

    def on_result(result: dict) -> None:
        record(course, result)
        results[result["student"]] = result
        bar.step(f"{result['student']} {result['score']:g}/{result['max_score']:g}")

    def on_error(job: dict, why: str) -> None:
        errors[job["student"]] = why
        bar.step(f"{job['student']} NOT GRADED")

    if args.ray is not None:
        init = {}
        if args.ray == "local":
            init = {"num_cpus": args.workers or os.cpu_count(), "num_gpus": len(_gpus(args)) or args.workers or 1}
        scale.grade_ray(jobs, on_result, address=None if args.ray == "local" else args.ray, init_kwargs=init,
                        on_error=on_error)
    else:
        scale.grade_local(jobs, _gpus(args) or [None] * (args.workers or 1), on_result, on_error=on_error)
    if not jobs:
        bar.stream.write("\n")
    rows = []
    for s in students:
        r = results.get(s)
        if r is None:
            rows.append([s, "-", "-", "-", f"NOT GRADED: {errors.get(s, 'no result')}"[:70]])
            continue
        notes = [f"{len(r['events'])} events"] if r["events"] else []
        notes += [f"{len(r['flags'])} flags"] if r["flags"] else []
        rows.append([s, f"{r['score']:g}", f"{r['max_score']:g}", f"{r['seconds']:.0f}", ", ".join(notes) or "ok"])
    print(table(rows, ["student", "score", "max", "seconds", "notes"]))
    graded = [r for r in results.values()]
    if graded:
        total = sum(r["seconds"] for r in graded if r["student"] not in {c["student"] for c in cached})
        print(f"{len(graded)} of {len(students)} graded ({len(cached)} unchanged attempts reused); "
              f"{total:.0f} s of grading; mean score {sum(r['score'] for r in graded) / len(graded):.2f}")
    return 0 if len(results) == len(students) else 1


def _gpus(args) -> list[str]:
    if args.gpus:
        return [g for g in args.gpus.split(",") if g]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:  # noqa: BLE001
        return []


def _current(course: Course, assignment: str, student: str) -> dict | None:
    names = course.notebooks(assignment)
    handed = {}
    for name in names:
        path = course.submitted / student / assignment / name
        try:
            handed[name] = json.loads(path.read_text()) if path.exists() else None
        except ValueError:
            handed[name] = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return course.results.get(assignment, student, _store.attempt_id(handed))


def cmd_feedback(course: Course, args) -> int:
    students = args.student or course.students(args.assignment)
    n = 0
    for s in students:
        result = _current(course, args.assignment, s)
        if result is None:
            print(f"{s}: not graded yet (run autograde)", file=sys.stderr)
            continue
        folder = course.feedback / s / args.assignment
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "feedback.html").write_text(_feedback.render(result))
        n += 1
    print(f"wrote {n} feedback reports under {course.feedback}")
    return 0 if n == len(students) else 1


def cmd_export(course: Course, args) -> int:
    from nbgrader.api import Gradebook

    out = Path(args.out)
    rows = []
    with Gradebook(course.db_url) as gb:
        for a in gb.assignments:
            for sub in gb.assignment_submissions(a.name):
                result = _current(course, a.name, sub.student.id) if (course.source / a.name).is_dir() else None
                rows.append([sub.student.id, a.name, f"{sub.score:g}", f"{sub.max_score:g}",
                             result["attempt"] if result else "", len(result["flags"]) if result else "",
                             "; ".join(result["events"])[:500] if result else ""])
    with out.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "assignment", "score", "max_score", "attempt", "flags", "events"])
        w.writerows(sorted(rows))
    print(f"wrote {len(rows)} grades to {out}")
    return 0


def cmd_grade(course: Course, args) -> int:
    if args.source is not None:
        cmd_collect(course, args)
    rc = cmd_autograde(course, args)
    cmd_feedback(course, args)
    cmd_export(course, args)
    return rc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autograder", description="Grade gemmlab submissions at class scale.")
    p.add_argument("--course", type=Path, default=REPO, help="course root (default: this repository)")
    sub = p.add_subparsers(dest="command", required=True)

    def grading_opts(q) -> None:
        q.add_argument("--student", action="append", help="only this student (repeatable)")
        q.add_argument("--gpus", help="GPU indices for one worker each, e.g. 0,1 (default: every GPU)")
        q.add_argument("--workers", type=int, help="parallel workers without GPUs (default 1)")
        q.add_argument("--ray", nargs="?", const="auto", help="grade on Ray: 'auto' (running cluster), an address, "
                                                            "or 'local' (start one here)")
        q.add_argument("--force", action="store_true", help="grade again even if this attempt has a result")
        q.add_argument("--no-sandbox", action="store_true", help="no bubblewrap (trusted notebooks only)")
        q.add_argument("--cell-timeout", dest="cell_s", type=float)
        q.add_argument("--slow-cell-timeout", dest="slow_cell_s", type=float)
        q.add_argument("--submission-timeout", dest="submission_s", type=float)
        q.add_argument("--output-limit", dest="output_bytes", type=int)
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
    q = sub.add_parser("export", help="grades from the gradebook as CSV")
    q.add_argument("--out", default="grades.csv")
    q = sub.add_parser("grade", help="collect (with --from), autograde, feedback and export in one go")
    q.add_argument("assignment")
    q.add_argument("--from", dest="source", type=Path)
    q.add_argument("--out", default="grades.csv")
    grading_opts(q)
    args = p.parse_args(argv)
    course = Course(args.course)
    return {"collect": cmd_collect, "autograde": cmd_autograde, "feedback": cmd_feedback, "export": cmd_export,
            "grade": cmd_grade}[args.command](course, args)
