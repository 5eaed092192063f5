"""Grade one submission: every notebook of one assignment for one student, on one GPU.

Runs on a grading worker (locally or as a Ray task). Input and output are records
(:class:`~autograder.records.GradeJob` in, :class:`~autograder.records.SubmissionResult` out) that
hold the notebooks as JSON, so a worker on another host needs no shared file system. Everything
a submission does is the submission's problem and ends up in the result; only failures of the
grading machinery itself raise :class:`InfraError` (and are retried).

Never broken by a hand-in: any JSON is made a notebook or refused (:mod:`.wellformed`), the
kernel's outputs are made well-formed, and a notebook the grader still fails on is reported as not
graded while the others are graded. A test the instructor marked as needing a GPU
(:func:`.assemble.needs_gpu`) scores only where :func:`.device.missing_gpu` finds the worker's GPU.
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

from gemmlab.judge.answers import NeedsStudentProcess
from gemmlab.runtime.faults import classify

from ..records import CellResult, GradeJob, Limits, NotebookJSON, NotebookParts, SubmissionResult
from . import inkernel
from .assemble import (Assembled, answer_flags, assemble, display_only, grade_id, is_answer, is_graded, judged_launches, needs_arch,
                       needs_gpu, notebook_needs_gpu)
from .device import gpu_arch, missing_gpu
from .judging import DESCRIBE_S, JUDGE_BOOTSTRAP, STUDENT_SERVER, AnswerRelay, bind_code, describe, judge_kernel_env
from .kernel import CellRun, SandboxedKernel, describe_exit
from .routing import defined_names, dsl_dependencies, given_statements, one_side_cells
from .outputs import for_feedback, hidden_lines, take_published, withhold
from .wellformed import clean_notebook, clean_outputs

#: The judge's error name for a test that hands tensors to a student's function (see gemmlab.judge.answers).
NEEDS_STUDENT = NeedsStudentProcess.__name__
#: Evaluated in the judge before a cell: whether calls with tensors are recorded and replayed there.
#: Set (to anything) to add how long each cell took in each kernel to the events: where a grade's time goes.
PROFILE_ENV = "GEMMLAB_GRADE_PROFILE"
RECORD_LAUNCHES = "__import__('gemmlab.judge.answers', fromlist=['record_launches']).record_launches({on})"

#: Seconds the grader's bootstrap may take in a fresh kernel (imports gemmlab and torch; ~5 s):
#: a kernel that cannot start is classified in a minute, not after a test cell's limit.
BOOTSTRAP_S = 60.0


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
    own (pattern, why) pairs (``assemble.answer_flags``)."""
    return [why for pattern, why in [*SUSPICIOUS, *extra] if re.search(pattern, source)]


def _cell_timeout(cell: nbformat.NotebookNode, limits: Limits, students: bool = False) -> float:
    """A cell's time limit: the student's own code (``students``: answer cells, cells they added) gets
    ``answer_cell_s``, an instructor cell whose grade_id ends in _slow ``slow_cell_s``, any other ``cell_s``."""
    if students:
        return limits.answer_cell_s
    return limits.slow_cell_s if grade_id(cell).endswith("_slow") else limits.cell_s


def _partial_score(run: CellRun, points: float) -> float:
    """nbgrader's partial credit: a test cell whose value is a number between 0 and its points."""
    for out in run.outputs:
        if out.get("output_type") == "execute_result":
            text = out.get("data", {}).get("text/plain", "")
            try:
                value = float(ast.literal_eval(text))
            except (ValueError, SyntaxError, TypeError):
                continue
            if 0 <= value <= points:
                return value
    return points


def _alive_after(kernel: SandboxedKernel, wait_s: float) -> bool:
    """Whether ``kernel`` is still alive ``wait_s`` from now (a kernel that just ended gets time to be seen)."""
    end = time.monotonic() + wait_s
    while kernel.alive():
        if time.monotonic() >= end:
            return True
        time.sleep(0.05)
    return False


def leaves_gpu_unusable(run: CellRun) -> bool:
    """Whether the cell's error left the kernel's CUDA context lost or a GPU kernel running, so the
    next cell needs a fresh kernel (the cells before it are replayed) lest later tests be lost."""
    if run.status != "error":
        return False
    fault = classify(f"{run.ename}: {run.evalue}")
    return fault is not None and fault.needs_fresh_process


def _verdict(run: CellRun) -> tuple[str, str]:
    if run.status == "ok":
        return "passed", "passed"
    if run.status == "error":
        first = (run.evalue or "").strip().splitlines()
        return "failed", f"{run.ename}: {first[0] if first else '(no message)'}"
    if run.status == "not_run":
        return "not_run", run.message
    return run.status, run.message


class _Kernels:
    """The two kernels of one notebook: the student's (runs the hand-in) and the judge (runs the
    instructor's cells and the tests). Each remembers the cells it completed, to replay them after a restart."""

    def __init__(self, workdir: Path, gpu: str | None, limits: Limits, sandbox: bool) -> None:
        self.student = SandboxedKernel(workdir / "scratch", workdir / "run", gpu, limits, sandbox)
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


#: The output of an instructor cell that only shows something, in the graded notebook (assemble.DISPLAY_ONLY).
NOT_RUN_WHEN_GRADED = ("Not run when graded: this cell only shows something (a timing, a demo, a self-check) and no "
                       "grade depends on it. Run it in your own notebook to see it.\n")


class _NotebookGrader:
    def __init__(self, name: str, built: Assembled, source: nbformat.NotebookNode, workdir: Path, gpu: str | None, no_gpu: str, limits: Limits, sandbox: bool, deadline: float,
                 events: list[str]) -> None:
        self.name, self.nb, self.limits, self.deadline, self.events = name, built.notebook, limits, deadline, events
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
        # The instructor's cells that only show something: run in neither kernel (assemble.DISPLAY_ONLY).
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
            left = self.deadline - time.monotonic()
            run = self.kernels.kernel(side).execute(cell.source, timeout_s=max(1.0, min(self._timeout(i, cell), left)))
            if run.status not in ("ok", "error"):
                return f"re-running the cells before this one failed ({run.message})"
        self.events.append(f"{self.name}: the {side} kernel was restarted and the {len(replay)} cells before the "
                           "next one were run again")
        return ""

    def _timeout(self, index: int, cell: nbformat.NotebookNode) -> float:
        """This cell's time limit (:func:`_cell_timeout`): is it the student's own code?"""
        return _cell_timeout(cell, self.limits, is_answer(cell) or self.built.is_students(index))

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
            parsed = json.loads(description)
            self.described = parsed if isinstance(parsed, dict) else {}
        except ValueError:
            self.described = {}
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
        nonce = secrets.token_hex(8)
        expr = inkernel.probe_expression(self.kernels.module, nonce)
        kc = self.kernels.student.kc
        try:
            msg_id = kc.execute("", silent=True, store_history=False, user_expressions={"p": expr})
            end = time.monotonic() + 30
            while time.monotonic() < end:
                reply = kc.get_shell_msg(timeout=max(0.1, end - time.monotonic()))
                if reply["parent_header"].get("msg_id") == msg_id:
                    value = reply["content"].get("user_expressions", {}).get("p", {})
                    return inkernel.parse_probe(value.get("data"), nonce)
        except Exception:  # noqa: BLE001 - no answer is a failed probe
            return None
        return None

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
        left = self.deadline - time.monotonic()
        if left <= 0:
            return CellRun("not_run", message="not run: the submission used up its time limit of "
                                              f"{self.limits.submission_s:g} s")
        timeout = min(self._timeout(index, cell), left)
        if side == "judge":
            self._bind()
            self._record_launches(cell)
            run = kernel.execute(cell.source, timeout_s=timeout)
            student = self.kernels.student
            if run.status == "timeout":           # a call may be stuck in the student's kernel: start it afresh
                student.kill()
            elif (run.status == "error" and "your notebook's kernel" in run.evalue and student.km is not None
                  and not _alive_after(student, 1.0)):
                run = CellRun("died", run.outputs, seconds=run.seconds,
                              message=f"{describe_exit(student.exit_code)} while this test called your code")
        else:
            run = kernel.execute(cell.source, timeout_s=timeout)
            self.bound = False
        if run.status == "timeout" and timeout < self._timeout(index, cell):
            run.message = f"the submission's time limit of {self.limits.submission_s:g} s ran out in this cell"
        if not run.completed and run.status != "not_run":
            self.events.append(f"{self.name}, {label}: {run.message}" + (" (in the judge)" if side == "judge" else ""))
        run.ename, run.evalue = str(run.ename or ""), str(run.evalue or "")
        if run.completed and not is_graded(cell):
            self.kernels.done[side].append(index)
        if leaves_gpu_unusable(run):
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
                points = float(cell.metadata.get("nbgrader", {}).get("points", 0) or 0)
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
                                       ", ".join(f"{r.seconds:.1f} s in the {side} kernel" for side, r in runs.items()))
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
                        score = _partial_score(run, points)
                elif status == "passed":
                    score = _partial_score(run, points)
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
    return [CellResult(name, grade_id(c), float(c.metadata.get("nbgrader", {}).get("points", 0) or 0), 0.0, status,
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


def grade_submission(job: GradeJob) -> SubmissionResult:
    """Grade every notebook of one hand-in on ``job.gpu``; raises only :class:`InfraError`."""
    limits = job.limits
    t0 = time.monotonic()
    deadline = t0 + limits.submission_s
    root = Path(tempfile.mkdtemp(prefix="gemmlab-grade-", dir=job.workdir))
    events: list[str] = []
    flags: list[str] = []
    cells: list[CellResult] = []
    not_graded: list[str] = []
    executed: dict[str, NotebookJSON] = {}
    try:
        for k, (name, parts) in enumerate(sorted(job.notebooks.items())):
            source, release = _read(parts.source), _read(parts.release)
            student, refused = _student_notebook(name, parts, events)
            if refused:
                why = f"the hand-in was refused: {refused}"
                cells.extend(_ungraded_cells(name, source, "refused", f"not graded: {why}"))
                not_graded.append(f"{name}: {why}")
                continue
            try:
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
                grader = _NotebookGrader(name, built, source, workdir, job.gpu, no_gpu, limits,
                                         job.sandbox, deadline, events)
                graded = grader.run()
            except InfraError:
                raise
            except Exception as exc:  # noqa: BLE001 - the grader's own failure on one notebook; the others go on
                why = f"the grader failed on it ({type(exc).__name__}: {str(exc)[:300]})"
                cells.extend(_ungraded_cells(name, source, "grader_error", f"not graded: {why}"))
                not_graded.append(f"{name}: {why}")
                continue
            cells.extend(graded)
            gpu_tests = [c for c in graded if c.status == "needs_gpu"]
            if gpu_tests:
                why = no_gpu or gpu_tests[0].message.removeprefix("not graded: this test needs ")
                not_graded.append(f"{name}: {len(gpu_tests)} test(s) need a GPU ({', '.join(c.grade_id for c in gpu_tests)}): "
                                  f"{why}")
            executed[name] = json.loads(json.dumps(built.notebook))   # plain data, sources as run
            shutil.rmtree(workdir, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    scored = [c for c in cells if c.score is not None]
    return SubmissionResult(
        job.student, job.assignment, job.attempt, tuple(cells),
        score=round(sum(c.score for c in scored), 6), max_score=round(sum(c.points for c in cells), 6),
        seconds=round(time.monotonic() - t0, 3), events=tuple(events), flags=tuple(sorted(set(flags))),
        executed=executed, worker=job.worker, not_graded=tuple(not_graded))
