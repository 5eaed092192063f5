"""The course as the grader sees it: nbgrader's folders, the assignments' notebooks, the students'
hand-ins, and where grades go.

The layout is nbgrader's, as ``autograder/nbgrader_config.py`` sets it: ``solutions/<assignment>/``
(source), ``course/<assignment>/`` (what students got), ``autograder/submitted/<student>/<assignment>/``,
``autograder/autograded/``, ``autograder/feedback/``, ``autograder/gradebook.db``, plus
``autograder/results/`` (one JSON per graded attempt).
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from typing import Any, NamedTuple

import nbformat

from gemmlab.errors import GemmlabError
from gemmlab.judge.plain import json_depth

from . import handin_files
from .reports import feedback, store
from .records import GradeJob, Limits, NotebookParts, SubmissionResult

#: Deepest JSON nesting a hand-in may have (a notebook nests a few levels; outputs and metadata a few more).
MAX_JSON_DEPTH = 100

REPO = Path(__file__).resolve().parent.parent
NBGRADER_CONFIG = REPO / "autograder" / "nbgrader_config.py"
#: nbgrader's exchange (``c.Exchange.root`` in NBGRADER_CONFIG): <course id>/inbound/<student>+<assignment>+<time>/.
EXCHANGE = REPO / "autograder" / "exchange"


class HandIn(NamedTuple):
    """One handed-in notebook file: its parsed JSON (None when missing or not JSON), why it was
    refused ('' unless it is not JSON) and a digest of its bytes ('' when missing)."""

    data: Any
    refused: str
    digest: str


class CourseError(GemmlabError):
    """The course folder lacks something the command needs; the message says what to run or fix."""


class Course:
    """One course folder: its assignments, hand-ins, gradebook, results, autograded notebooks and feedback."""

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
        self.results = store.ResultStore(self.ag / "results")

    # ------------------------------------------------------------------ what is there
    def notebooks(self, assignment: str) -> list[str]:
        """The assignment's notebook names, from the instructor's source."""
        names = sorted(p.name for p in (self.source / assignment).glob("*.ipynb"))
        if not names:
            raise CourseError(f"no notebooks in {self.source / assignment}: is {assignment!r} the assignment's "
                              "folder name under solutions/?")
        return names

    def students(self, assignment: str) -> list[str]:
        """Students with a hand-in of ``assignment`` in ``submitted/``."""
        if not self.submitted.exists():
            return []
        return sorted(p.name for p in self.submitted.iterdir() if (p / assignment).is_dir())

    def release_notebook(self, assignment: str, name: str) -> Path:
        """The student release of one notebook (``course/``, else the one nbgrader generated)."""
        for folder in (self.release / assignment, self.ag / "release" / assignment):
            if (folder / name).exists():
                return folder / name
        raise CourseError(f"no student release of {assignment}/{name}: run tools/release.py")

    def handed_in(self, assignment: str, student: str) -> dict[str, HandIn]:
        """The student's notebook files by name. Any JSON is passed on as it is: the grader decides
        whether it is a notebook."""
        folder = self.submitted / student / assignment
        refused = handin_files.refusals(folder)
        return {name: read_hand_in(folder / name, refused.get(name, "")) for name in self.notebooks(assignment)}

    def attempt(self, assignment: str, student: str) -> str:
        """The digest of the student's current hand-in (:func:`autograder.reports.store.attempt_id`)."""
        return _attempt(self.handed_in(assignment, student))

    def job(self, assignment: str, student: str, limits: Limits, sandbox: bool) -> GradeJob:
        """The job that grades the student's current hand-in of ``assignment``."""
        handed = self.handed_in(assignment, student)
        notebooks = {name: NotebookParts(json.loads((self.source / assignment / name).read_text()),
                                         json.loads(self.release_notebook(assignment, name).read_text()), h.data,
                                         h.refused)
                     for name, h in handed.items()}
        return GradeJob(student, assignment, _attempt(handed), notebooks, limits, sandbox)

    def current_result(self, assignment: str, student: str) -> SubmissionResult | None:
        """The recorded result of the student's current hand-in, or None when it was not graded."""
        return self.results.get(assignment, student, self.attempt(assignment, student))

    # ------------------------------------------------------------------ nbgrader
    def nbgrader(self, *args: str) -> subprocess.CompletedProcess:
        """Run an nbgrader command on this course (its configuration, gradebook and folders)."""
        env = dict(os.environ)
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
        cmd = [sys.executable, "-m", "nbgrader", *args, f"--NbGrader.config_file={NBGRADER_CONFIG}",
               f"--CourseDirectory.root={self.root}", f"--CourseDirectory.db_url={self.db_url}",
               f"--CourseDirectory.release_directory={self.ag / 'release'}",
               f"--CourseDirectory.submitted_directory={self.submitted}"]
        return subprocess.run(cmd, cwd=self.root, env=env, capture_output=True, text=True)

    def ensure_gradebook(self, assignment: str) -> None:
        """Put the assignment (notebooks, graded cells, checksums) into the gradebook if it is not there."""
        from nbgrader.api import Gradebook, MissingEntry

        self.ag.mkdir(parents=True, exist_ok=True)
        with Gradebook(self.db_url) as gb:
            try:
                a = gb.find_assignment(assignment)
                if {nb.name for nb in a.notebooks} == {Path(n).stem for n in self.notebooks(assignment)}:
                    return
            except MissingEntry:
                pass
        proc = self.nbgrader("generate_assignment", assignment, "--force")
        if proc.returncode != 0:
            raise CourseError(f"nbgrader generate_assignment {assignment} failed:\n{proc.stdout[-3000:]}\n"
                              f"{proc.stderr[-3000:]}")

    # ------------------------------------------------------------------ hand-ins in, grades out
    def collect_from(self, folder: Path, assignment: str) -> int:
        """Copy hand-ins into ``submitted/`` from ``folder/<student>/<assignment>/`` or
        ``folder/<student>/*.ipynb`` (replacing earlier ones); returns how many students had one.
        Only regular files are copied, never through a link (:mod:`autograder.handin_files`); what is
        refused is recorded with the hand-in, so its grade says why."""
        n = 0
        for student_dir in sorted(Path(folder).iterdir()):
            if not handin_files.is_real_folder(student_dir):
                continue
            inner = student_dir / assignment
            refused: dict[str, str] = {}
            if inner.is_symlink():          # the assignment's folder is a link: none of its notebooks is read
                refused = {name: f"the folder {assignment} is a symbolic link, not a folder: hand in the "
                                 "notebook files themselves" for name in self.notebooks(assignment)}
                nbs: list[Path] = []
            else:
                src = inner if inner.is_dir() else student_dir
                nbs = sorted(src.glob("*.ipynb"))
            if not nbs and not refused:
                continue
            dest = self.submitted / student_dir.name / assignment
            if dest.is_symlink():
                dest.unlink()
            elif dest.exists():
                shutil.rmtree(dest)
            dest.mkdir(parents=True)
            handin_files.collect(nbs, dest, refused)
            n += 1
        return n

    def record(self, result: SubmissionResult) -> None:
        """Store one result: autograded notebooks, gradebook grades, then the result file (all overwriting).

        Everything that could fail on what the student controls (characters no file can hold, a notebook
        nbformat will not write) is done before anything is written, so a failure leaves no gradebook grade
        the run's report does not know of; the result file, which marks the attempt as graded, comes last."""
        result = result.writable()
        notebooks = {name: nbformat.writes(nbformat.from_dict(nb)) for name, nb in result.executed.items()}
        handed_in = self.handed_in_at(result.assignment, result.student)
        folder = self.autograded / result.student / result.assignment
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in notebooks.items():
            (folder / Path(name).name).write_text(text, encoding="utf-8")
        store.write_gradebook(self.db_url, result, handed_in)
        self.results.put(result)

    def handed_in_at(self, assignment: str, student: str) -> Any:
        """When the hand-in was submitted (its ``timestamp.txt``, as nbgrader's exchange writes it), or None."""
        from nbgrader.utils import parse_utc

        try:
            text = handin_files.read_regular(self.submitted / student / assignment / "timestamp.txt", 256)
            return parse_utc(text.decode("utf-8").strip())
        except (OSError, handin_files.NotAFile, ValueError, OverflowError, UnicodeDecodeError):
            return None

    def write_feedback(self, assignment: str, student: str) -> Path | None:
        """Write the student's report of their current hand-in; None when it was not graded yet."""
        result = self.current_result(assignment, student)
        if result is None:
            return None
        page = feedback.render(result.writable())
        folder = self.feedback / student / assignment
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "feedback.html"
        path.write_text(page, encoding="utf-8")
        return path

    def export_grades(self, out: Path, students: list[str] | None = None) -> int:
        """Grades in the gradebook as CSV, every student's or only ``students``' (with attempt, flags,
        events and what was not graded of the current result); returns the number of rows."""
        from nbgrader.api import Gradebook

        rows = []
        if self.ag.exists():
            with Gradebook(self.db_url) as gb:
                for a in gb.assignments:
                    for sub in gb.assignment_submissions(a.name):
                        if students and sub.student.id not in students:
                            continue
                        try:
                            result = (self.current_result(a.name, sub.student.id) if (self.source / a.name).is_dir()
                                      else None)
                            missing = "no result"
                        except Exception as exc:  # noqa: BLE001 - one student's hand-in never stops the export
                            result, missing = None, f"no result: the hand-in could not be read ({type(exc).__name__})"
                        rows.append([sub.student.id, a.name, f"{sub.score:g}", f"{sub.max_score:g}",
                                     result.attempt if result else "", len(result.flags) if result else "",
                                     "; ".join(result.events)[:500] if result else "",
                                     "; ".join(result.not_graded)[:500] if result else missing])
        with Path(out).open("w", newline="", encoding="utf-8", errors="replace") as f:
            w = csv.writer(f)
            w.writerow(["student", "assignment", "score", "max_score", "attempt", "flags", "events", "not_graded"])
            w.writerows(sorted(rows))
        return len(rows)


def read_hand_in(path: Path, refused: str = "") -> HandIn:
    """The file at ``path`` as handed in (see :class:`HandIn`); ``refused``: why collecting refused it."""
    if refused:
        return HandIn(None, refused, hashlib.sha256(refused.encode()).hexdigest())
    try:
        raw = handin_files.read_regular(path)
    except FileNotFoundError:
        return HandIn(None, "", "")
    except handin_files.NotAFile as why:
        return HandIn(None, str(why), hashlib.sha256(str(why).encode()).hexdigest())
    except OSError as err:
        return HandIn(None, f"it could not be read ({err.strerror or err})", "")
    digest = hashlib.sha256(raw).hexdigest()
    try:
        text = raw.decode("utf-8-sig")
        if json_depth(text, stop=MAX_JSON_DEPTH) > MAX_JSON_DEPTH:
            return HandIn(None, f"it is not a notebook: its JSON nests more than {MAX_JSON_DEPTH} levels deep "
                                "(a notebook nests a few)", digest)
        return HandIn(json.loads(text), "", digest)
    except UnicodeDecodeError:
        return HandIn(None, "it is not a notebook: not UTF-8 text", digest)
    except json.JSONDecodeError as err:
        return HandIn(None, f"it is not a notebook: not valid JSON ({err.msg}: line {err.lineno}, "
                            f"column {err.colno})", digest)
    except RecursionError:
        return HandIn(None, f"it is not a notebook: its JSON nests more than {MAX_JSON_DEPTH} levels deep", digest)
    except ValueError as err:   # a number longer than Python reads (int_max_str_digits)
        limit = sys.get_int_max_str_digits()
        why = f"it holds a number of more than {limit} digits" if "digits" in str(err) else str(err)[:200]
        return HandIn(None, f"it is not a notebook: {why}", digest)


def _attempt(handed: dict[str, HandIn]) -> str:
    """The attempt digest: of each notebook's JSON, or of the bytes of a file that is not JSON."""
    return store.attempt_id({name: {"unreadable": h.digest} if h.refused else h.data for name, h in handed.items()})
