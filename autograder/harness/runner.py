"""Grade one submission: every notebook of one assignment for one student, on one GPU.

Runs on a grading worker (locally or as a Ray task). Input and output are records
(:class:`~autograder.records.GradeJob` in, :class:`~autograder.records.SubmissionResult` out) that
hold the notebooks as JSON, so a worker on another host needs no shared file system. Everything
a submission does is the submission's problem and ends up in the result; only failures of the
grading machinery itself raise :class:`InfraError` (and are retried).

Never broken by a hand-in: any JSON is made a notebook or refused (:mod:`.wellformed`), the
kernel's outputs are made well-formed, and every exception while reading, assembling, running or
recording one notebook ends as that notebook's "not graded: <reason>" while the others are graded.
What the student's process sends is bounded before use (the description of the answers, a test's
partial score, error texts, the tamper probe's answer, a notebook's kept outputs). A test the
instructor marked as needing a GPU (:func:`autograder.cell_metadata.needs_gpu`) scores only where
:func:`.device.missing_gpu` finds the worker's GPU. Limits count work, not the clock
(:mod:`.cellclock`); a machine that starved a cell is an :class:`InfraError` (retried, never graded).
A cell's error text never decides whether a kernel is restarted: the exception's class raised by
gemmlab, or the kernel's own account of its GPU (:data:`GPU_STATE`), does.
"""
from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import nbformat

from gemmlab.judge import plain
from gemmlab.answers import stand_ins
from gemmlab.answers.wire import DESCRIPTION_DEPTH, MAX_DESCRIPTION_CHARS, NeedsStudentProcess

from ..records import CellResult, GradeJob, Limits, NotebookJSON, NotebookParts, SubmissionResult, writable
from . import inkernel
from ..cell_metadata import (answer_flags, display_only, grade_id, is_answer, is_graded, judged_launches, needs_arch,
                             needs_gpu, notebook_needs_gpu)
from ..cell_metadata import points as points_of
from .assemble import Assembled, assemble
from .device import gpu_arch, missing_gpu
from .judging import DESCRIBE_S, JUDGE_BOOTSTRAP, STUDENT_SERVER, AnswerRelay, bind_code, describe, judge_kernel_env
from .cellclock import backstop_s
from .kernel import CellRun, MachineBusy, SandboxedKernel, describe_exit
from .routing import defined_names, dsl_dependencies, given_statements, one_side_cells
from .outputs import for_feedback, hidden_lines, take_published, withhold
from .wellformed import clean_notebook, clean_outputs

#: The judge's error name for a test that hands tensors to a student's function (see gemmlab.answers.wire).
NEEDS_STUDENT = NeedsStudentProcess.__name__
#: Evaluated in the judge before a cell: whether calls with tensors are recorded and replayed there.
#: Set (to anything) to add how long each cell took in each kernel to the events: where a grade's time goes.
PROFILE_ENV = "GEMMLAB_GRADE_PROFILE"
RECORD_LAUNCHES = (f"__import__({stand_ins.__name__!r}, fromlist=['record_launches'])"
                   f".{stand_ins.record_launches.__name__}({{on}})")

#: Seconds the grader's bootstrap may take in a fresh kernel (imports gemmlab and torch; ~5 s):
#: a kernel that cannot start is classified in a minute, not after a test cell's limit.
BOOTSTRAP_S = 60.0
#: Asked of a kernel after a cell failed: can it still use the GPU? ('usable', 'lost' or 'busy'; see
#: gemmlab.running.faults.context_state). The kernel's own account, never the error's text.
GPU_STATE = "__import__('gemmlab.running.faults', fromlist=['context_state']).context_state()"
#: Exception classes gemmlab raises when a kernel's GPU context is lost or a GPU kernel still runs.
FAULT_CLASSES = ("ContextLostError", "KernelTimeoutError")
#: Longest error message and verdict kept in a record (the start says what went wrong).
MAX_EVALUE_CHARS = 4000
#: Longest text read as a test's partial score (a number).
MAX_SCORE_CHARS = 64


class InfraError(RuntimeError):
    """The grader, not the submission, failed (sandbox or kernel would not start, worker lost)."""


#: Patterns in student code worth an instructor's look (they are not penalised by themselves).
SUSPICIOUS = [
    (r"set_custom_exc|showtraceback|custom_exceptions", "changes how IPython reports errors"),
    (r"sys\.settrace|sys\.setprofile|ast_transformers|input_transformers|events\.register", "hooks code execution"),
    (r"\bbuiltins\b|__builtins__", "touches builtins"),
    (r"gemmlab\.(check|bench|perfbar|nbhelpers|report)\.\w+\s*=|check_gemm\s*=|raise_if_failed\s*=|GEMMLAB_GRADING",
     "replaces gemmlab's checks"),
    (r"gradebook|solutions/|/autograder|\.git\b", "looks for grading files"),
    (r"\bctypes\b|cublas|cupy", "calls native libraries directly"),
    (r"os\._exit|os\.kill|signal\.|sys\.exit", "ends or signals processes"),
    (r"_gemmlab_grader_|sys\.modules\[", "reaches into the grader's kernel state"),
]


def scan(source: str, extra: list[tuple[str, str]] = ()) -> list[str]:
    """Why ``source`` deserves an instructor's look ([] when it does not); ``extra``: the answer cell's
    own (pattern, why) pairs (``cell_metadata.answer_flags``)."""
    return [why for pattern, why in [*SUSPICIOUS, *extra] if re.search(pattern, source)]


def cell_timeout(cell: nbformat.NotebookNode, limits: Limits, students: bool = False) -> float:
    """A cell's time limit: the student's own code (``students``: answer cells, cells they added) gets
    ``answer_cell_s``, an instructor cell whose grade_id ends in _slow ``slow_cell_s``, any other ``cell_s``."""
    if students:
        return limits.answer_cell_s
    return limits.slow_cell_s if grade_id(cell).endswith("_slow") else limits.cell_s


def partial_score(run: CellRun, points: float) -> float:
    """nbgrader's partial credit: a test cell whose value is a number between 0 and its points. Read from the
    value the kernel sent (kept whether or not the notebook's outputs still are, so flooding outputs cannot hide
    a partial score) and only from a short text: a test in the student's kernel sends what it likes."""
    text = run.result_text
    if not isinstance(text, str) or len(text) > MAX_SCORE_CHARS:
        return points
    try:
        value = float(ast.literal_eval(text))
    except (ValueError, SyntaxError, TypeError, OverflowError, RecursionError, MemoryError):
        return points
    return value if 0 <= value <= points else points


def _alive_after(kernel: SandboxedKernel, wait_s: float) -> bool:
    """Whether ``kernel`` is still alive ``wait_s`` from now (a kernel that just ended gets time to be seen)."""
    end = time.monotonic() + wait_s
    while kernel.alive():
        if time.monotonic() >= end:
            return True
        time.sleep(0.05)
    return False


def leaves_gpu_unusable(run: CellRun, kernel: SandboxedKernel) -> bool:
    """Whether the cell's error left the kernel's CUDA context lost or a GPU kernel running, so the
    next cell needs a fresh kernel (the cells before it are replayed) lest later tests be lost.

    Decided from trusted signals only: the error's class when gemmlab raised it (in the judge no student
    Python runs, so the class is gemmlab's), else the kernel's own account of its GPU (:data:`GPU_STATE`).
    Never from the message: an answer that raised with "illegal memory access" in its text restarted the
    judge three times, at its student's cost."""
    if run.status != "error":
        return False
    if run.ename in FAULT_CLASSES:
        return True
    if kernel.km is None or not kernel.alive():
        return False
    ok, state = kernel.evaluate(GPU_STATE, 30)
    return not ok or state != repr("usable")


def _verdict(run: CellRun) -> tuple[str, str]:
    if run.status == "ok":
        return "passed", "passed"
    if run.status == "error":
        first = (run.evalue or "")[:MAX_EVALUE_CHARS].strip().splitlines()
        return "failed", f"{run.ename[:200]}: {first[0][:1000] if first else '(no message)'}"
    if run.status == "not_run":
        return "not_run", run.message
    return run.status, run.message


class _Kernels:
    """The two kernels of one notebook: the student's (runs the hand-in) and the judge (runs the
    instructor's cells and the tests). Each remembers the cells it completed, to replay them after a restart."""

    def __init__(self, workdir: Path, gpu: str | None, limits: Limits, sandbox: bool) -> None:
        self.student = SandboxedKernel(workdir / "scratch", workdir / "run", gpu, limits, sandbox, stops_leftovers=True)
        self.judge = SandboxedKernel(workdir / "judge", workdir / "judge-run", gpu, limits, sandbox,
                                     extra_env=judge_kernel_env())
        self.module = inkernel.new_module_name()
        self.done: dict[str, list[int]] = {"student": [], "judge": []}
        self.relay = AnswerRelay()

    def kernel(self, side: str) -> SandboxedKernel:
        return self.student if side == "student" else self.judge

    def start(self, side: str, name: str) -> None:
        kernel = self.kernel(side)
        try:
            kernel.start(inherit=self.relay.pair(side))
        except MachineBusy:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure to start is the grader's
            raise InfraError(f"{name}: {exc}") from exc
        code = inkernel.bootstrap_code(self.module) + STUDENT_SERVER if side == "student" else JUDGE_BOOTSTRAP
        run = kernel.execute(code, timeout_s=BOOTSTRAP_S)
        if run.status != "ok":
            kernel.kill()
            raise InfraError(f"{name}: the grader's bootstrap failed in the {side} kernel: {run.status} "
                             f"{run.ename} {run.evalue} {run.message}".strip())

    def kill(self) -> None:
        self.student.kill()
        self.judge.kill()
        self.relay.close()


class SubmissionBudget:
    """A submission's time limit (``Limits.submission_s``) counted as the work its cells did
    (:attr:`CellRun.active_s`), with a wall-clock backstop past which the machine, not the submission, is at
    fault (:class:`MachineBusy`)."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s, self.used_s, self.started = float(limit_s), 0.0, time.monotonic()
        self.backstop_s = backstop_s(self.limit_s)

    def left(self) -> float:
        """Seconds of work the submission may still do."""
        return self.limit_s - self.used_s

    def spend(self, run: CellRun) -> None:
        self.used_s += max(0.0, run.active_s)

    def check(self) -> None:
        """Raise MachineBusy when the backstop ran out before the submission could use its limit."""
        elapsed = time.monotonic() - self.started
        if elapsed >= self.backstop_s and self.left() > 0:
            raise MachineBusy(f"the submission had used {self.used_s:.0f} s of its {self.limit_s:g} s limit after "
                              f"{elapsed:.0f} s on the clock: the grading machine was too busy. Not graded here: "
                              "it is graded again when the machine is less busy.")


#: The output of an instructor cell that only shows something, in the graded notebook (cell_metadata.DISPLAY_ONLY).
NOT_RUN_WHEN_GRADED = ("Not run when graded: this cell only shows something (a timing, a demo, a self-check) and no "
                       "grade depends on it. Run it in your own notebook to see it.\n")


class _NotebookGrader:
    def __init__(self, name: str, built: Assembled, source: nbformat.NotebookNode, workdir: Path, gpu: str | None,
                 no_gpu: str, limits: Limits, sandbox: bool, budget: SubmissionBudget, events: list[str]) -> None:
        self.name, self.nb, self.limits, self.budget, self.events = name, built.notebook, limits, budget, events
        self.kept = 0                         # bytes of output kept so far (limits.notebook_output_bytes in all)
        self.built = built
        self.labels = built.labels
        self.no_gpu = no_gpu                  # why this worker has no GPU ('' when it has one)
        self.arch = "" if no_gpu else gpu_arch(gpu)   # the worker GPU's family, e.g. sm_90
        self.kernels = _Kernels(workdir, gpu, limits, sandbox)
        self.restarts = 0
        self.hidden = hidden_lines(built.notebook)
        self.answer_names = {grade_id(c): defined_names(c.source) for c in source.cells
                             if c.cell_type == "code" and is_answer(c)}
        self.dsl_deps = dsl_dependencies(source)
        self.given = {grade_id(c): given_statements(c.source) for c in source.cells
                      if c.cell_type == "code" and is_answer(c)}
        self.answered: list[str] = []         # grade_ids of the answer cells run so far
        self.answers: list[str] = []          # names of the answer cells run so far, in order
        self.described: dict[str, Any] = {}   # the student's kernel's last description of them
        self.bound = True                     # whether the judge holds the student's current answers
        self.index = 0                        # the cell being graded
        self.judged = any(judged_launches(c) for c in source.cells)   # the notebook has judged launch tests
        # Where the instructor's other cells run in a notebook with judged tests (routing.one_side_cells).
        self.student_built, self.judge_only = one_side_cells(source) if self.judged else (set(), set())
        # The instructor's cells that only show something: run in neither kernel (cell_metadata.DISPLAY_ONLY).
        self.display_only = {grade_id(c) for c in source.cells if c.cell_type == "code" and display_only(c)
                             and grade_id(c) and not is_graded(c) and not is_answer(c)}
        self.recording: bool | None = None    # what the judge kernel was last told (None: not yet / restarted)

    # ------------------------------------------------------------ kernels
    def _revive(self, side: str, index: int) -> str:
        """Restart one kernel and replay the cells before ``index`` it had completed; '' when it worked."""
        if self.restarts >= self.limits.restarts:
            return f"the kernel was restarted {self.restarts} times already; the remaining cells did not run"
        self.restarts += 1
        self.kernels.start(side, self.name)
        if side == "judge":
            self.bound = False
            self.recording = None
        replay = [i for i in self.kernels.done[side] if i < index]
        for i in replay:
            cell = self.nb.cells[i]
            if side == "judge":
                self._bind()
                self._record_launches(cell)
            left = self.budget.left()
            watch = (self.kernels.student,) if side == "judge" else ()
            run = self.kernels.kernel(side).execute(cell.source, timeout_s=max(1.0, min(self._timeout(i, cell), left)),
                                                    watch=watch, keep_bytes=0)
            self.budget.spend(run)
            if run.status not in ("ok", "error"):
                return f"re-running the cells before this one failed ({run.message})"
        self.events.append(f"{self.name}: the {side} kernel was restarted and the {len(replay)} cells before the "
                           "next one were run again")
        return ""

    def _timeout(self, index: int, cell: nbformat.NotebookNode) -> float:
        """This cell's time limit (:func:`cell_timeout`): is it the student's own code?"""
        return cell_timeout(cell, self.limits, is_answer(cell) or self.built.is_students(index))

    def _bind(self) -> None:
        """Give the judge the student's current answers (after the student's kernel ran anything, or after
        it ended: a fresh one replays the cells so far, so its answers exist again)."""
        student = self.kernels.student
        if self.answers and not student.alive():
            student.kill()
            if self._revive("student", self.index) == "":
                self.bound = False
        if self.bound or not self.answers:
            self.bound = True
            return
        description = describe(self.kernels.student, self.answers)
        try:
            parsed = plain.loads(description, "the description of your answers", MAX_DESCRIPTION_CHARS + 65536,
                                 DESCRIPTION_DEPTH)
        except plain.NotPlainData as exc:   # the student's kernel answered outside the limits: nothing is bound
            why = f"{str(exc)[:300]} Your notebook's kernel did not describe its answers as the grader asked."
            description = json.dumps({n: {"kind": "opaque", "why": f"{n}: {why}"} for n in self.answers})
            parsed = json.loads(description)
            self.events.append(f"{self.name}: {why}")
        self.described = parsed if isinstance(parsed, dict) else {}
        made = {n for n, info in self.described.items() if isinstance(info, dict)
                and info.get("kind") in ("function", "opaque")}
        given = [code for gid in self.answered for names, code in self.given.get(gid, []) if set(names) <= made]
        self.kernels.judge.execute(bind_code(description, given, self.answers), timeout_s=DESCRIBE_S + 30 * len(given))
        self.bound = True

    def _in_student(self, gid: str) -> bool:
        """Whether test ``gid`` runs in the student's kernel: it needs a finished CuTe DSL kernel, or
        Python of the student's that launches one (see :mod:`.routing`)."""
        for name in self.dsl_deps.get(gid, ()):
            info = self.described.get(name)
            if not isinstance(info, dict):
                continue
            if info.get("kind") == "function" or (info.get("kind") == "dsl" and info.get("done") is True):
                return True
        return False

    def _probe(self) -> list[str] | None:
        """The tamper probe's findings ([] when none), or None when no genuine answer came back."""
        nonce = secrets.token_hex(8)
        ok, data = self.kernels.student.evaluate_data(inkernel.probe_expression(self.kernels.module, nonce), 30)
        return inkernel.parse_probe(data, nonce) if ok else None

    # ------------------------------------------------------------ one cell
    def _sides(self, index: int, cell: nbformat.NotebookNode) -> list[str]:
        """Where a cell runs: answers and the student's own cells in the student's kernel, tests in the
        judge (or the student's kernel for a finished DSL answer), the instructor's other cells in both."""
        gid = grade_id(cell)
        if is_answer(cell) or self.built.is_students(index):
            return ["student"]
        if is_graded(cell):
            self._bind()
            return ["student"] if self._in_student(gid) and not judged_launches(cell) else ["judge"]
        if gid in self.student_built:
            return ["student"]
        if gid in self.judge_only:
            return ["judge"]
        return ["student", "judge"]

    def _record_launches(self, cell: nbformat.NotebookNode) -> None:
        """Tell the judge whether this cell's launches are recorded and replayed there: in a test the instructor
        marked ``judged``, and in the instructor's other cells of a notebook that has one (they compute what
        such a test reads, e.g. a performance bar)."""
        on = judged_launches(cell) if is_graded(cell) else self.judged
        if on != self.recording:
            ok, _ = self.kernels.judge.evaluate(RECORD_LAUNCHES.format(on=on), 30)
            self.recording = on if ok else None

    def _execute(self, side: str, index: int, cell: nbformat.NotebookNode, label: str) -> CellRun:
        kernel = self.kernels.kernel(side)
        if not kernel.alive():
            kernel.kill()
            broken = self._revive(side, index)
            if broken:
                return CellRun("not_run", message=broken)
        self.budget.check()
        left = self.budget.left()
        if left <= 0:
            return CellRun("not_run", message="not run: the submission used up its time limit of "
                                              f"{self.limits.submission_s:g} s")
        timeout = min(self._timeout(index, cell), left)
        keep = max(0, self.limits.notebook_output_bytes - self.kept)
        if side == "judge":
            self._bind()
            self._record_launches(cell)
            run = kernel.execute(cell.source, timeout_s=timeout, watch=(self.kernels.student,), keep_bytes=keep)
            student = self.kernels.student
            if run.status == "timeout":           # a call may be stuck in the student's kernel: start it afresh
                student.kill()
            elif (run.status == "error" and "your notebook's kernel" in run.evalue and student.km is not None
                  and not _alive_after(student, 1.0)):
                run = CellRun("died", run.outputs, seconds=run.seconds,
                              message=f"{describe_exit(student.exit_code)} while this test called your code")
        else:
            run = kernel.execute(cell.source, timeout_s=timeout, keep_bytes=keep)
            self.bound = False
        self.budget.spend(run)
        self.kept += run.kept_bytes
        if run.status == "timeout" and timeout < self._timeout(index, cell):
            run.message = f"the submission's time limit of {self.limits.submission_s:g} s ran out in this cell"
        if not run.completed and run.status != "not_run":
            self.events.append(f"{self.name}, {label}: {run.message}" + (" (in the judge)" if side == "judge" else ""))
        run.ename, run.evalue = str(run.ename or "")[:200], str(run.evalue or "")[:MAX_EVALUE_CHARS]
        if run.completed and not is_graded(cell):
            self.kernels.done[side].append(index)
        if leaves_gpu_unusable(run, kernel):
            self.events.append(f"{self.name}, {label}: {run.ename} left the GPU context unusable; "
                               f"the next cell runs in a fresh {side} kernel")
            kernel.kill()
            done = self.kernels.done[side]
            if done and done[-1] == index:
                done.pop()
        return run

    def run(self) -> list[CellResult]:
        grades: list[CellResult] = []
        self.kernels.start("student", self.name)
        self.kernels.start("judge", self.name)
        try:
            for index, cell in enumerate(self.nb.cells):
                self.index = index
                graded = is_graded(cell)
                points = points_of(cell)
                gid = grade_id(cell)
                label = self.labels[index]
                if cell.cell_type != "code":
                    if graded:
                        grades.append(CellResult(self.name, gid, points, None, "manual", "graded by hand"))
                    continue
                if gid in self.display_only and not graded and not is_answer(cell) and not self.built.is_students(index):
                    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=NOT_RUN_WHEN_GRADED)]
                    continue
                sides = self._sides(index, cell)
                runs = {side: self._execute(side, index, cell, label) for side in sides}
                if graded and sides == ["judge"] and runs["judge"].ename == NEEDS_STUDENT and not judged_launches(cell):
                    sides = ["student"]         # the test launches the student's code on tensors
                    runs = {"student": self._execute("student", index, cell, label)}
                run = runs[sides[0]] if not graded else runs[sides[-1]]
                if os.environ.get(PROFILE_ENV):
                    self.events.append(f"{self.name}, {label}: took " +
                                       ", ".join(f"{r.seconds:.1f} s ({r.active_s:.1f} s of work) in the {side} kernel"
                                                 for side, r in runs.items()))
                shown, published = take_published(clean_outputs(run.outputs))
                run.outputs = shown
                cell.outputs = shown
                if is_answer(cell):
                    self.answers = list(dict.fromkeys(self.answers + self.answer_names.get(gid, [])))
                    self.answered = list(dict.fromkeys(self.answered + [gid]))
                    self.bound = False
                elif gid in self.student_built:     # its kernels and launchers reach the judge as answers
                    built = [n for n in defined_names(cell.source) if not n.startswith("_")]
                    self.answers = list(dict.fromkeys(self.answers + built))
                    self.bound = False
                if not graded:
                    continue
                status, message = _verdict(run)
                message = withhold(message, self.hidden)
                score: float | None = 0.0
                in_student = sides == ["student"]
                if is_answer(cell):
                    status, message, score = "manual", "graded by hand", None
                elif needs_gpu(cell) and self.no_gpu:
                    status, message = "needs_gpu", f"not graded: this test needs a GPU, and {self.no_gpu}"
                elif needs_gpu(cell) and needs_arch(cell) and not self.arch.startswith(needs_arch(cell)):
                    status, message = "needs_gpu", (f"not graded: this test needs an {needs_arch(cell)} GPU, and this "
                                                    f"worker's is {self.arch or 'of unknown architecture'}")
                elif status == "passed" and in_student:
                    problems = self._probe() if self.kernels.student.km is not None else None
                    if problems is None or problems:
                        what = "; ".join(problems) if problems else "the grader's check-up got no genuine answer"
                        status, message = "tampered", f"the notebook interfered with grading ({what}); 0 points"
                        self.events.append(f"{self.name}, {label}: {message}")
                    else:
                        score = partial_score(run, points)
                elif status == "passed":
                    score = partial_score(run, points)
                grades.append(CellResult(self.name, gid, points, score, status, message, round(run.seconds, 3),
                                         run.ename, withhold(run.evalue, self.hidden),
                                         tuple(for_feedback(run.outputs, self.hidden)), tuple(published),
                                         judged=not in_student))
        finally:
            self.kernels.kill()
        return grades


def _read(data: NotebookJSON) -> nbformat.NotebookNode:
    """A notebook from its JSON dict, normalised (sources as strings) as nbformat.read does."""
    return nbformat.reads(json.dumps(data), as_version=4)


def _ungraded_cells(name: str, source: nbformat.NotebookNode, status: str, message: str) -> list[CellResult]:
    """Every graded cell of the notebook at 0 points, with why it was not graded."""
    return [CellResult(name, grade_id(c), points_of(c), 0.0, status,
                       message) for c in source.cells if is_graded(c)]


def _student_notebook(name: str, parts: NotebookParts, events: list[str]) -> tuple[nbformat.NotebookNode | None, str]:
    """``(the hand-in as a notebook or None, why it was refused or '')``; cells left out go to ``events``."""
    if parts.refused:
        return None, parts.refused
    if parts.student is None:
        return None, ""
    cleaned = clean_notebook(parts.student)
    events.extend(f"{name}: {why}" for why in cleaned.repairs)
    return (nbformat.from_dict(cleaned.notebook) if cleaned.notebook is not None else None), cleaned.refused


def _grade_notebook(k: int, name: str, parts: NotebookParts, source: nbformat.NotebookNode, job: GradeJob,
                    root: Path, budget: SubmissionBudget, events: list[str],
                    flags: list[str]) -> tuple[list[CellResult], NotebookJSON | None, list[str]]:
    """One notebook of the hand-in: ``(its verdicts, the notebook as it ran, what of it was not graded)``."""
    release = _read(parts.release)
    student, refused = _student_notebook(name, parts, events)
    if refused:
        why = f"the hand-in was refused: {refused}"
        return _ungraded_cells(name, source, "refused", f"not graded: {why}"), None, [f"{name}: {why}"]
    built = assemble(source, release, student)
    events.extend(f"{name}: {t}" for t in built.tampered)
    if student is None:
        events.append(f"{name}: not handed in; the released notebook was graded")
    for cell, label in zip(built.notebook.cells, built.labels):
        if cell.cell_type == "code" and (is_answer(cell) or not grade_id(cell)):
            for why in scan(cell.source, answer_flags(cell)):
                flags.append(f"{name}, {label}: {why}")
    no_gpu = missing_gpu(job.gpu) if notebook_needs_gpu(source) else ""
    workdir = root / f"nb{k}"
    graded = _NotebookGrader(name, built, source, workdir, job.gpu, no_gpu, job.limits, job.sandbox, budget,
                             events).run()
    executed = writable(json.loads(json.dumps(built.notebook)))       # plain data, sources as run
    nbformat.validate(nbformat.from_dict(executed))                    # what the record will write is a notebook
    shutil.rmtree(workdir, ignore_errors=True)
    gpu_tests = [c for c in graded if c.status == "needs_gpu"]
    missing = []
    if gpu_tests:
        why = no_gpu or gpu_tests[0].message.removeprefix("not graded: this test needs ")
        missing.append(f"{name}: {len(gpu_tests)} test(s) need a GPU ({', '.join(c.grade_id for c in gpu_tests)}): "
                       f"{why}")
    return graded, executed, missing


def grade_submission(job: GradeJob) -> SubmissionResult:
    """Grade every notebook of one hand-in on ``job.gpu``; raises only :class:`InfraError` (the grading
    machinery failed, or the machine starved the work: retried, never graded). Anything else that goes wrong
    with one notebook makes that notebook "not graded: <reason>", and the others are graded."""
    t0 = time.monotonic()
    budget = SubmissionBudget(job.limits.submission_s)
    root = Path(tempfile.mkdtemp(prefix="gemmlab-grade-", dir=job.workdir))
    events: list[str] = []
    flags: list[str] = []
    cells: list[CellResult] = []
    not_graded: list[str] = []
    executed: dict[str, NotebookJSON] = {}
    try:
        for k, (name, parts) in enumerate(sorted(job.notebooks.items())):
            source = _read(parts.source)           # the instructor's: a failure here is the grader's, not a student's
            try:
                graded, ran, missing = _grade_notebook(k, name, parts, source, job, root, budget, events, flags)
            except InfraError:
                raise
            except MachineBusy as exc:
                raise InfraError(f"{job.assignment}/{job.student}, {name}: {exc}") from None
            except Exception as exc:  # noqa: BLE001 - the grader's own failure on one notebook; the others go on
                why = f"the grader failed on it ({type(exc).__name__}: {str(exc)[:300]})"
                graded, ran, missing = _ungraded_cells(name, source, "grader_error", f"not graded: {why}"), None, \
                    [f"{name}: {why}"]
            cells.extend(graded)
            not_graded.extend(missing)
            if ran is not None:
                executed[name] = ran
    finally:
        shutil.rmtree(root, ignore_errors=True)
    scored = [c for c in cells if c.score is not None]
    result = SubmissionResult(
        job.student, job.assignment, job.attempt, tuple(cells),
        score=round(sum(c.score for c in scored), 6), max_score=round(sum(c.points for c in cells), 6),
        seconds=round(time.monotonic() - t0, 3), events=tuple(events), flags=tuple(sorted(set(flags))),
        executed=executed, worker=job.worker, not_graded=tuple(not_graded))
    return result.writable()
