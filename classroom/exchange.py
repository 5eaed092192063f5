"""nbgrader's exchange for a class whose students are sandboxed: release, collect, and feedback back.

Why not nbgrader's own release/collect/release_feedback: nbgrader's filesystem exchange keeps every
hand-in in one ``inbound`` folder and every feedback file in one ``feedback`` folder, and relies on
each student being a different system user (a folder others may write but not list). Here each
student's server is a sandbox that sees, at those two paths, folders of their own
(``handins/<name>``, ``feedback/<name>``: classroom/sandbox.py), so students run nbgrader's ordinary
fetch, submit and fetch-feedback (the Assignments tab) and never see a classmate's entry. This
module does the instructor's side on those folders, with nbgrader's names and hashes:

- :func:`release`: the assignment into the gradebook (its graded cells and checksums, through the
  grader's ``Course``) and its student release into the exchange's ``outbound``;
- :func:`collect`: each student's newest hand-in of an assignment into the grader's ``submitted/``,
  regular files only (autograder/handin_files.py), and the student is whoever owns the hand-ins
  folder, never the name written in the entry (a student can write any name there);
- :func:`release_feedback`: the grader's report for each student under the name nbgrader's
  fetch-feedback looks for (``notebook_hash(secret=submission_secret, notebook_id)``).
"""
from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from autograder import handin_files
from autograder.course import Course

from .settings import ClassDir, ClassError

#: nbgrader's submission folder: <student>+<assignment>+<timestamp>[+<random>].
ENTRY = re.compile(r"^(?P<student>[^+]+)\+(?P<assignment>[^+]+)\+(?P<timestamp>[^+]+)(\+[^+]+)?$")
#: The small files nbgrader writes beside the notebooks of a hand-in, copied with them.
SIDE_FILES = ("timestamp.txt", "submission_secret.txt")
SIDE_FILE_BYTES = 4096


def course(where: ClassDir) -> Course:
    return Course(where.course)


def release(where: ClassDir, assignment: str) -> str:
    """Put ``assignment`` in the gradebook and its release in the exchange; returns what was done."""
    src = where.course / "course" / assignment
    if not src.is_dir():
        raise ClassError(f"no release of {assignment!r} in {where.course / 'course'}: name an assignment's folder "
                         f"there ({', '.join(sorted(p.name for p in (where.course / 'course').iterdir() if p.is_dir()))}).")
    course(where).ensure_gradebook(assignment)
    dest = where.outbound / assignment
    tmp = where.outbound / f".{assignment}.new"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(".ipynb_checkpoints", ".*"))
    for path in [tmp, *tmp.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    names = sorted(p.name for p in dest.glob("*.ipynb"))
    return f"released {assignment} ({', '.join(names)}): students fetch it from the Assignments tab."


@dataclass
class CollectReport:
    assignment: str
    collected: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"collected {len(self.collected)} hand-in(s) of {self.assignment}: {', '.join(self.collected) or '-'}"]
        return "\n".join(lines + [f"  {n}" for n in self.notes])


def _newest_entry(folder: Path, student: str, assignment: str, notes: list[str]) -> Path | None:
    entries = []
    for entry in folder.iterdir():
        m = ENTRY.match(entry.name)
        if m is None or m["assignment"] != assignment:
            continue
        if not handin_files.is_real_folder(entry):
            notes.append(f"{student}: {entry.name} is not a folder (a link?): skipped")
            continue
        if m["student"] != student:
            notes.append(f"{student}: {entry.name} names {m['student']!r}; it is {student}'s, whose folder it is in")
        entries.append((m["timestamp"], entry))
    return max(entries)[1] if entries else None


def collect(where: ClassDir, assignment: str) -> CollectReport:
    """Each student's newest hand-in of ``assignment`` into the grader's ``submitted/`` (replacing earlier ones)."""
    report = CollectReport(assignment)
    grader = course(where)
    for student in where.students_with_handins():
        entry = _newest_entry(where.handins(student), student, assignment, report.notes)
        if entry is None:
            continue
        dest = grader.submitted / student / assignment
        if dest.is_symlink():
            dest.unlink()
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir(parents=True)
        handin_files.collect(sorted(entry.glob("*.ipynb")), dest)
        for name in SIDE_FILES:
            try:
                (dest / name).write_bytes(handin_files.read_regular(entry / name, SIDE_FILE_BYTES))
            except (OSError, handin_files.NotAFile) as why:
                report.notes.append(f"{student}: {name} not taken ({why}): their feedback cannot be matched")
        report.collected.append(student)
    return report


def feedback_name(secret: str, notebook: str) -> str:
    """The file name nbgrader's fetch-feedback looks for: ``<md5(secret + notebook id)>.html``."""
    from nbgrader.utils import notebook_hash

    return f"{notebook_hash(secret=secret, notebook_id=Path(notebook).stem)}.html"


def release_feedback(where: ClassDir, assignment: str) -> list[str]:
    """Copy each graded student's report where their fetch-feedback finds it; returns the students served."""
    grader = course(where)
    served = []
    for student in grader.students(assignment):
        report = grader.feedback / student / assignment / "feedback.html"
        secret_file = grader.submitted / student / assignment / "submission_secret.txt"
        if not report.exists() or not secret_file.exists():
            continue
        secret = secret_file.read_text()   # as nbgrader reads it: no stripping
        out = where.feedback(student)
        out.mkdir(parents=True, exist_ok=True)
        for notebook in grader.notebooks(assignment):
            target = out / feedback_name(secret, notebook)
            shutil.copyfile(report, target)
            os.chmod(target, 0o644)
        served.append(student)
    return served


__all__ = ["CollectReport", "ENTRY", "collect", "course", "feedback_name", "release", "release_feedback"]
