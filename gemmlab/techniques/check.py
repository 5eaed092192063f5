"""A technique check: a named question about a kernel's machine code, answered with a sentence.

Every function of the vocabulary (``copies(...)``, ``pipelined(...)``, ...) returns a :class:`Check`.
Calling it on a :class:`~gemmlab.techniques.program.Program` gives a :class:`Finding`: passed or not,
and a message a student can act on, naming the technique, what the kernel does instead, and (as
evidence) a few SASS lines it read. A message never quotes the answer of an exercise: it says what
is missing, not the code that would supply it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .program import WHERES, Program, Site

#: How a region is named in a sentence.
PLACE = {"anywhere": "in your kernel", "main_loop": "in your main loop", "prologue": "before your main loop",
         "epilogue": "after your main loop (the epilogue)", "outside_main_loop": "outside your main loop"}
#: Most SASS lines quoted as evidence.
EVIDENCE = 3


@dataclass(frozen=True)
class Finding:
    """A check's answer for one kernel."""

    check: str
    passed: bool
    message: str
    evidence: tuple[str, ...] = ()

    def __str__(self) -> str:
        mark = "ok " if self.passed else "MISSING"
        return f"[{mark}] {self.check}: {self.message}"


@dataclass(frozen=True)
class Check:
    """One entry of the vocabulary: ``name`` as written in a test cell, the technique in words, and the test."""

    name: str
    technique: str
    run: Callable[[Program], Finding]

    def __call__(self, program: Program) -> Finding:
        return self.run(program)

    def __repr__(self) -> str:
        return self.name


def signature(function: str, **arguments: object) -> str:
    """``copies('global', 'shared', by='cp.async')``: how a check was written, for messages and reports."""
    shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items() if v is not None)
    return f"{function}({shown})"


def check_where(where: str) -> str:
    if where not in WHERES:
        raise ValueError(f"where= must be one of {', '.join(WHERES)}, not {where!r}")
    return where


def evidence(sites: list[Site]) -> tuple[str, ...]:
    return tuple(str(s.ins) for s in sites[:EVIDENCE])


def no_main_loop(program: Program, name: str, where: str) -> Finding | None:
    """The failing finding when a check about the main loop meets a kernel without one, else None."""
    if where == "main_loop" and not program.main_loops:
        return Finding(name, False, "found no loop around your kernel's computation (the main loop over K): "
                                    "every k-tile must be handled by a loop.")
    return None


def passed(name: str, message: str, sites: list[Site] | None = None) -> Finding:
    return Finding(name, True, message, evidence(sites or []))


def failed(name: str, message: str, sites: list[Site] | None = None) -> Finding:
    return Finding(name, False, message, evidence(sites or []))


__all__ = ["Check", "EVIDENCE", "Finding", "PLACE", "check_where", "evidence", "failed", "no_main_loop", "passed",
           "signature"]
