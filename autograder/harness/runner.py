"""Grade one submission: every notebook of one assignment for one student, on one GPU.

Runs on a grading worker (locally or as a Ray task). Input and output are plain data (the
notebooks as JSON, the result as a dict), so a worker on another host needs no shared file
system. Everything a submission does is the submission's problem and ends up in the result;
only failures of the grading machinery itself raise :class:`InfraError` (and are retried).
"""
from __future__ import annotations

import ast
import copy
import re
import secrets
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from . import inkernel
from .assemble import assemble, grade_id, is_answer, is_graded
from .kernel import CellRun, Limits, SandboxedKernel


class InfraError(RuntimeError):
    """The grader, not the submission, failed (sandbox or kernel would not start, worker lost)."""


@dataclass
class CellGrade:
    notebook: str
    grade_id: str
    points: float
    score: float | None          # None: needs manual grading
    status: str                  # passed, failed, error, timeout, died, output_limit, memory, not_run, tampered, manual
    message: str                 # plain words
    seconds: float = 0.0
    ename: str = ""
    evalue: str = ""
    outputs: list = field(default_factory=list)   # the cell's outputs without tracebacks (for feedback)


@dataclass
class SubmissionResult:
    student: str
    assignment: str
    attempt: str
    cells: list[CellGrade]
    score: float
    max_score: float
    seconds: float
    events: list[str] = field(default_factory=list)     # restarts, limits hit, tampering: plain words
    flags: list[str] = field(default_factory=list)      # for the instructor: suspicious code to review
    executed: dict[str, Any] = field(default_factory=dict)  # notebook name -> executed notebook (JSON)
    worker: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionResult":
        data = dict(data)
        data["cells"] = [CellGrade(**c) for c in data["cells"]]
        return cls(**data)


#: Patterns in student code worth an instructor's look (they are not penalised by themselves).
SUSPICIOUS = [
    (r"set_custom_exc|showtraceback|custom_exceptions", "changes how IPython reports errors"),
    (r"sys\.settrace|sys\.setprofile|ast_transformers|input_transformers|events\.register", "hooks code execution"),
    (r"\bbuiltins\b|__builtins__", "touches builtins"),
    (r"gemmlab\.(check|bench|perfbar|nbhelpers)\.\w+\s*=|check_gemm\s*=|raise_if_failed\s*=|GEMMLAB_GRADING",
     "replaces gemmlab's checks"),
    (r"gradebook|solutions/|/autograder|\.git\b", "looks for grading files"),
    (r"\bctypes\b|cublas|cupy", "calls native libraries directly"),
    (r"os\._exit|os\.kill|signal\.|sys\.exit", "ends or signals processes"),
    (r"_gemmlab_grader_|sys\.modules\[", "reaches into the grader's kernel state"),
]


#: Errors after which the kernel's CUDA context is unusable (or a GPU kernel may still be running):
#: the next cell gets a fresh kernel (the cells before it are replayed) so later tests are not lost.
CONTEXT_LOST = re.compile(r"ContextLostError|KernelTimeoutError|illegal memory access|illegal address|"
                          r"unspecified launch failure|misaligned address|CUDA error: an illegal|AcceleratorError")


def scan(source: str) -> list[str]:
    return [why for pattern, why in SUSPICIOUS if re.search(pattern, source)]


def _cell_timeout(cell, limits: Limits) -> float:
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


def hidden_lines(nb) -> list[str]:
    """Substantial lines of the hidden tests in ``nb`` (what feedback must never show)."""
    lines, inside = [], False
    for cell in nb.cells:
        for line in cell.source.splitlines() if is_graded(cell) else []:
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            elif inside and len(line.strip()) >= 12:
                lines.append(line.strip())
    return lines


def _clean_outputs(outputs: list, hidden: list[str] = (), limit: int = 1_500_000) -> list:
    """Outputs fit for feedback: errors as name and message only (a traceback shows test source),
    and any output that quotes a hidden test (e.g. printed from the kernel's history) withheld."""
    kept, size = [], 0
    for out in outputs:
        out = copy.deepcopy(dict(out))
        if out.get("output_type") == "error":
            out["traceback"] = []
        text = "\n".join(_strings(out))
        text += "\n" + text.replace("\\'", "'").replace('\\"', '"')   # quoted through a repr
        if any(line in text for line in hidden):
            out = {"output_type": "stream", "name": "stdout",
                   "text": "[output withheld: it quoted hidden test code]\n"}
        size += len(str(out))
        if size > limit:
            kept.append({"output_type": "stream", "name": "stdout", "text": "[further output left out]\n"})
            break
        kept.append(out)
    return kept


def _strings(value) -> list[str]:
    """Every string inside an output (text, data of every MIME type, error name and message)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, (list, tuple)):
        return ["".join(value)] if all(isinstance(v, str) for v in value) else [s for v in value for s in _strings(v)]
    return []


def _withhold(text: str, hidden: list[str]) -> str:
    return "[withheld: it quoted hidden test code]" if any(line in text for line in hidden) else text


def _verdict(run: CellRun) -> tuple[str, str]:
    if run.status == "ok":
        return "passed", "passed"
    if run.status == "error":
        first = (run.evalue or "").strip().splitlines()
        return "failed", f"{run.ename}: {first[0] if first else '(no message)'}"
    if run.status == "not_run":
        return "not_run", run.message
    return run.status, run.message


class _NotebookGrader:
    def __init__(self, name: str, nb, workdir: Path, gpu: str | None, limits: Limits, sandbox: bool,
                 deadline: float, events: list[str]) -> None:
        self.name, self.nb, self.limits, self.deadline, self.events = name, nb, limits, deadline, events
        self.kernel = SandboxedKernel(workdir / "scratch", workdir / "run", gpu, limits, sandbox)
        self.module = inkernel.new_module_name()
        self.restarts = 0
        self.done_ok: list[int] = []          # indices of non-graded cells that completed (for replay)
        self.hidden = hidden_lines(nb)

    def _start(self) -> None:
        try:
            self.kernel.start()
        except Exception as exc:  # noqa: BLE001 - any failure to start is the grader's
            raise InfraError(f"{self.name}: {exc}") from exc
        run = self.kernel.execute(inkernel.bootstrap_code(self.module), timeout_s=180)
        if run.status != "ok":
            self.kernel.kill()
            raise InfraError(f"{self.name}: the grader's bootstrap failed in the sandbox: {run.status} "
                             f"{run.ename} {run.evalue} {run.message}".strip())

    def _revive(self, index: int) -> str:
        """Restart the kernel and replay the cells before ``index`` that had completed; '' when it worked."""
        if self.restarts >= self.limits.restarts:
            return f"the kernel was restarted {self.restarts} times already; the remaining cells did not run"
        self.restarts += 1
        self._start()
        for i in self.done_ok:
            if i >= index:
                break
            cell = self.nb.cells[i]
            left = self.deadline - time.monotonic()
            run = self.kernel.execute(cell.source, timeout_s=max(1.0, min(_cell_timeout(cell, self.limits), left)))
            if run.status not in ("ok", "error"):
                return f"re-running the cells before this one failed ({run.message})"
        self.events.append(f"{self.name}: the kernel was restarted and the {len([i for i in self.done_ok if i < index])} "
                           "cells before the next one were run again")
        return ""

    def _probe(self) -> list[str] | None:
        nonce = secrets.token_hex(8)
        expr = inkernel.probe_expression(self.module, nonce)
        kc = self.kernel.kc
        try:
            msg_id = kc.execute("", silent=True, store_history=False, user_expressions={"p": expr})
            end = time.monotonic() + 30
            while time.monotonic() < end:
                reply = kc.get_shell_msg(timeout=max(0.1, end - time.monotonic()))
                if reply["parent_header"].get("msg_id") == msg_id:
                    value = reply["content"].get("user_expressions", {}).get("p", {})
                    return inkernel.parse_probe(value.get("data", {}).get("text/plain"), nonce)
        except Exception:  # noqa: BLE001 - no answer is a failed probe
            return None
        return None

    def run(self) -> list[CellGrade]:
        grades: list[CellGrade] = []
        self._start()
        broken = ""
        try:
            for index, cell in enumerate(self.nb.cells):
                graded = is_graded(cell)
                points = float(cell.metadata.get("nbgrader", {}).get("points", 0) or 0)
                gid = grade_id(cell) or f"cell {index}"
                if cell.cell_type != "code":
                    if graded:
                        grades.append(CellGrade(self.name, gid, points, None, "manual", "graded by hand"))
                    continue
                run: CellRun
                if not broken and not self.kernel.alive():
                    self.kernel.kill()
                    broken = self._revive(index)
                left = self.deadline - time.monotonic()
                if broken:
                    run = CellRun("not_run", message=broken)
                elif left <= 0:
                    run = CellRun("not_run", message="not run: the submission used up its time limit of "
                                                     f"{self.limits.submission_s:g} s")
                else:
                    timeout = min(_cell_timeout(cell, self.limits), left)
                    run = self.kernel.execute(cell.source, timeout_s=timeout)
                    if run.status == "timeout" and timeout < _cell_timeout(cell, self.limits):
                        run.message = f"the submission's time limit of {self.limits.submission_s:g} s ran out in this cell"
                    if not run.completed:
                        self.events.append(f"{self.name}, {gid}: {run.message}")
                cell.outputs = run.outputs
                if run.completed and not graded:
                    self.done_ok.append(index)
                if run.status == "error" and CONTEXT_LOST.search(f"{run.ename}: {run.evalue}"):
                    self.events.append(f"{self.name}, {gid}: {run.ename} left the GPU context unusable; "
                                       "the next cell runs in a fresh kernel")
                    self.kernel.kill()
                    if not graded and self.done_ok and self.done_ok[-1] == index:
                        self.done_ok.pop()
                if not graded:
                    continue
                status, message = _verdict(run)
                message = _withhold(message, self.hidden)
                score: float | None = 0.0
                if is_answer(cell):
                    status, message, score = "manual", "graded by hand", None
                elif status == "passed":
                    problems = self._probe() if self.kernel.km is not None else None
                    if problems is None or problems:
                        what = "; ".join(problems) if problems else "the grader's check-up got no genuine answer"
                        status, message = "tampered", f"the notebook interfered with grading ({what}); 0 points"
                        self.events.append(f"{self.name}, {gid}: {message}")
                    else:
                        score = _partial_score(run, points)
                grades.append(CellGrade(self.name, gid, points, score, status, message, round(run.seconds, 3),
                                        run.ename, _withhold(run.evalue, self.hidden),
                                        _clean_outputs(run.outputs, self.hidden)))
        finally:
            self.kernel.kill()
        return grades


def _read(data: dict) -> nbformat.NotebookNode:
    """A notebook from its JSON dict, normalised (sources as strings) as nbformat.read does."""
    import json

    return nbformat.reads(json.dumps(data), as_version=4)


def grade_submission(job: dict) -> dict:
    """Grade one submission. ``job``: student, assignment, attempt, notebooks {name: {source,
    release, student}} (notebook JSON; student None when not handed in), gpu, limits (dict),
    sandbox (bool), workdir (optional). Returns :meth:`SubmissionResult.to_dict`."""
    limits = Limits(**job.get("limits", {}))
    t0 = time.monotonic()
    deadline = t0 + limits.submission_s
    root = Path(tempfile.mkdtemp(prefix="gemmlab-grade-", dir=job.get("workdir")))
    events: list[str] = []
    flags: list[str] = []
    cells: list[CellGrade] = []
    executed: dict[str, Any] = {}
    try:
        for k, (name, parts) in enumerate(sorted(job["notebooks"].items())):
            source, release = _read(parts["source"]), _read(parts["release"])
            student = _read(parts["student"]) if parts.get("student") else None
            built = assemble(source, release, student)
            events.extend(f"{name}: {t}" for t in built.tampered)
            if student is None:
                events.append(f"{name}: not handed in; the released notebook was graded")
            for cell in built.notebook.cells:
                if cell.cell_type == "code" and (is_answer(cell) or not grade_id(cell)):
                    for why in scan(cell.source):
                        flags.append(f"{name}, {grade_id(cell) or 'an added cell'}: {why}")
            workdir = root / f"nb{k}"
            grader = _NotebookGrader(name, built.notebook, workdir, job.get("gpu"), limits,
                                     job.get("sandbox", True), deadline, events)
            cells.extend(grader.run())
            executed[name] = built.notebook
            shutil.rmtree(workdir, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    scored = [c for c in cells if c.score is not None]
    result = SubmissionResult(
        job["student"], job["assignment"], job.get("attempt", ""), cells,
        score=round(sum(c.score for c in scored), 6), max_score=round(sum(c.points for c in cells), 6),
        seconds=round(time.monotonic() - t0, 3), events=events, flags=sorted(set(flags)),
        executed={k: nbformat.from_dict(v) for k, v in executed.items()}, worker=job.get("worker", ""))
    return result.to_dict()
