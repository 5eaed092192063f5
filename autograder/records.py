"""The grader's records: what a grading job asks for and what grading found, as frozen dataclasses.

A job travels from the instructor's machine to a worker (a thread here, a Ray task elsewhere) and
a result travels back and into ``autograder/results/`` as JSON, so every record has ``to_dict``
(JSON-ready: only dicts, lists, strings and numbers) and ``from_dict`` (its inverse). Notebooks
travel as their JSON dicts, so a worker on another host needs no shared file system.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

#: A notebook as its JSON dict (what ``json.loads`` of an ``.ipynb`` gives).
NotebookJSON = dict[str, Any]

_SURROGATE = re.compile("[\ud800-\udfff]")


def writable(value: Any) -> Any:
    """``value`` (JSON-like) with every lone surrogate in its strings, keys included, replaced by U+FFFD.

    Why: JSON can spell a character no file can hold (``"\\udc80"``). A hand-in with one in an added markdown
    cell was graded, but its autograded notebook could not be written: the run said NOT GRADED while the
    gradebook showed the grade, and every later run crashed re-recording it. What the grader keeps of a
    hand-in or of a kernel's outputs is made writable once, here; the replacement character shows where."""
    if isinstance(value, str):
        return value if value.isascii() or not _SURROGATE.search(value) else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {writable(k): writable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(writable(v) for v in value)
    return value


@dataclass(frozen=True)
class Limits:
    """What one submission may use; breaking a limit ends the cell and says which one in plain words."""

    cell_s: float = 180.0             #: default per cell; cells whose grade_id ends in _slow get slow_cell_s
    slow_cell_s: float = 600.0
    #: per cell of the student's own code (answer cells, cells they added): they define code and take seconds
    #: (under 10 s in every graded cell of the course, ten notebooks at a time), so an endless loop there ends
    #: sooner and holds a worker's GPU for less
    answer_cell_s: float = 60.0
    submission_s: float = 1800.0      #: all notebooks of one submission together
    output_bytes: int = 4_000_000     #: per cell: text and data the kernel may send (one message included)
    #: per notebook: the outputs kept of all its cells together (240 cells of 3.9 MB each held 894 MB twice on disk
    #: and took the grader to 4.2 GB); beyond it cells still run and are graded, their outputs are not kept
    notebook_output_bytes: int = 32_000_000
    memory_bytes: int = 16 << 30      #: resident memory of the kernel's whole process tree
    startup_s: float = 60.0
    restarts: int = 3                 #: kernel restarts per notebook before the rest is given up

    def with_overrides(self, **values: float | int | None) -> "Limits":
        """These limits with the given fields replaced (``None`` keeps a field), each in its field's type."""
        kinds = {f.name: type(getattr(self, f.name)) for f in fields(self)}
        return replace(self, **{k: kinds[k](v) for k, v in values.items() if v is not None})

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Limits":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass(frozen=True)
class NotebookParts:
    """One notebook of an assignment as the grader needs it: the instructor's source (solutions and
    hidden tests), the student release, and the student's hand-in as it was parsed: any JSON value,
    None when not handed in or when the file was not JSON at all (then ``refused`` says why). The
    worker makes a notebook of it (:mod:`autograder.harness.wellformed`) or refuses it."""

    source: NotebookJSON
    release: NotebookJSON
    student: Any
    refused: str = ""

    def to_dict(self) -> dict:
        return {"source": self.source, "release": self.release, "student": self.student, "refused": self.refused}

    @classmethod
    def from_dict(cls, data: dict) -> "NotebookParts":
        return cls(data["source"], data["release"], data.get("student"), data.get("refused", ""))


@dataclass(frozen=True)
class GradeJob:
    """Grade every notebook of one (student, assignment) hand-in on one GPU.

    ``attempt`` is a digest of the hand-in (:func:`autograder.reports.store.attempt_id`);
    ``gpu`` and ``worker`` are filled in by the scheduler that runs the job."""

    student: str
    assignment: str
    attempt: str
    notebooks: dict[str, NotebookParts]
    limits: Limits = field(default_factory=Limits)
    sandbox: bool = True
    gpu: str | None = None
    worker: str = ""
    workdir: str | None = None        #: where the job's temporary folders go (None: the system's)

    def on(self, gpu: str | None, worker: str) -> "GradeJob":
        """This job placed on a GPU (None: no GPU) by the named worker."""
        return replace(self, gpu=gpu, worker=worker)

    def to_dict(self) -> dict:
        return {"student": self.student, "assignment": self.assignment, "attempt": self.attempt,
                "notebooks": {k: v.to_dict() for k, v in self.notebooks.items()}, "limits": self.limits.to_dict(),
                "sandbox": self.sandbox, "gpu": self.gpu, "worker": self.worker, "workdir": self.workdir}

    @classmethod
    def from_dict(cls, data: dict) -> "GradeJob":
        return cls(data["student"], data["assignment"], data.get("attempt", ""),
                   {k: NotebookParts.from_dict(v) for k, v in data["notebooks"].items()},
                   Limits.from_dict(data.get("limits", {})), data.get("sandbox", True), data.get("gpu"),
                   data.get("worker", ""), data.get("workdir"))


@dataclass(frozen=True)
class PublishedResult:
    """A gemmlab result (``check_gemm``, ``bench_gemm``, ``performance_bar``) as the graded kernel
    published it (``gemmlab.checking.report``): its kind and its ``to_dict()``."""

    kind: str
    data: dict

    def to_dict(self) -> dict:
        return {"kind": self.kind, "data": self.data}

    @classmethod
    def from_dict(cls, data: dict) -> "PublishedResult":
        return cls(data["kind"], data["data"])


@dataclass(frozen=True)
class CellResult:
    """The verdict on one graded cell.

    ``status``: passed, failed, timeout, died, output_limit, memory, not_run, tampered, manual,
    needs_gpu (a GPU test on a worker without a GPU: not graded, 0 points) or grader_error (the
    grader failed on the notebook: not graded); ``score`` None means it is graded by hand. ``outputs`` are the cell's outputs fit for feedback
    (no tracebacks, nothing quoting hidden tests); ``results`` the gemmlab results it published; ``judged``
    whether the test ran in the judge (else in the student's kernel: a test of a CuTe DSL kernel)."""

    notebook: str
    grade_id: str
    points: float
    score: float | None
    status: str
    message: str                      #: plain words
    seconds: float = 0.0
    ename: str = ""
    evalue: str = ""
    outputs: tuple[dict, ...] = ()
    results: tuple[PublishedResult, ...] = ()
    judged: bool = False              #: the verdict was computed in the judge (no student Python there)

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["outputs"] = list(self.outputs)
        data["results"] = [r.to_dict() for r in self.results]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> "CellResult":
        data = dict(data)
        data["outputs"] = tuple(data.get("outputs", ()))
        data["results"] = tuple(PublishedResult.from_dict(r) for r in data.get("results", ()))
        return cls(**data)


@dataclass(frozen=True)
class SubmissionResult:
    """Everything the grader saw of one hand-in: per-cell verdicts, the score, events (restarts,
    limits hit, tampering: plain words), flags (code for the instructor to review), the notebooks
    as they ran (name -> notebook JSON) and ``not_graded``: what of the hand-in was not graded and
    why (a refused notebook, GPU tests on a worker without a GPU), in plain words naming the notebook."""

    student: str
    assignment: str
    attempt: str
    cells: tuple[CellResult, ...]
    score: float
    max_score: float
    seconds: float
    events: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    executed: dict[str, NotebookJSON] = field(default_factory=dict)
    worker: str = ""
    not_graded: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether every part of the hand-in was graded (a zero is graded; a refusal is not)."""
        return not self.not_graded

    def writable(self) -> "SubmissionResult":
        """This result with every string fit for any file (:func:`writable`): what is recorded."""
        return SubmissionResult.from_dict(writable(self.to_dict()))

    def to_dict(self) -> dict:
        return {"student": self.student, "assignment": self.assignment, "attempt": self.attempt,
                "cells": [c.to_dict() for c in self.cells], "score": self.score, "max_score": self.max_score,
                "seconds": self.seconds, "events": list(self.events), "flags": list(self.flags),
                "executed": self.executed, "worker": self.worker, "not_graded": list(self.not_graded)}

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionResult":
        return cls(data["student"], data["assignment"], data.get("attempt", ""),
                   tuple(CellResult.from_dict(c) for c in data["cells"]), data["score"], data["max_score"],
                   data["seconds"], tuple(data.get("events", ())), tuple(data.get("flags", ())),
                   data.get("executed", {}), data.get("worker", ""), tuple(data.get("not_graded", ())))


__all__ = ["CellResult", "GradeJob", "Limits", "NotebookJSON", "NotebookParts", "PublishedResult",
           "SubmissionResult", "writable"]
