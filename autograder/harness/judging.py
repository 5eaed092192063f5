"""The grader's half of "answers out, verdicts in": the code it sends to the judge and the student's kernel.

Why: a test cell's verdict is computed in the judge, a second kernel (its own sandbox, its own
PID namespace) that runs the instructor's cells and no student Python. The grader drives both:

- after the student's kernel ran an answer cell, it asks that kernel to describe the names the
  instructor's answer cell defines (:func:`gemmlab.judge.answers.describe`) and binds them in the
  judge (:func:`gemmlab.judge.answers.bind`);
- while the judge runs a cell, each call of a student function arrives as a request on the judge's
  stdin channel; :class:`AnswerBridge` runs it in the student's kernel
  (:func:`gemmlab.judge.answers.serve`) and sends the plain-data reply back.

Everything the student's kernel returns is a string the judge decodes with its own types.
"""
from __future__ import annotations

import ast
import json
import time

from gemmlab.judge.answers import JUDGE_ENV, REQUEST

from .kernel import SandboxedKernel

#: Environment of the judge's kernel: gemmlab's grading mode and the judge's own switch.
JUDGE_KERNEL_ENV = {JUDGE_ENV: "1", "GEMMLAB_GRADING": "1"}

#: First code the judge runs: quiet warnings (nbgrader zeroes a cell with anything on stderr), gemmlab loaded.
JUDGE_BOOTSTRAP = (
    "import warnings as __w\n__w.filterwarnings('ignore')\ndel __w\n"
    "import gemmlab.judge.answers\n"
)

#: Seconds the student's kernel may take to describe its answers.
DESCRIBE_S = 30.0


def _module_call(function: str, argument: object) -> str:
    """An expression calling ``gemmlab.judge.answers.<function>(user_ns, argument)`` (argument as a literal)."""
    return (f"__import__('gemmlab.judge.answers', fromlist=['{function}']).{function}"
            f"(get_ipython().user_ns, {argument!r})")


def _string_value(text: str) -> str | None:
    """The string a user expression's ``text/plain`` stands for, or None if it is not a string literal."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, str) else None


def describe(student: SandboxedKernel, names: list[str]) -> str:
    """The student's kernel's description of ``names`` (JSON); each missing if it cannot answer."""
    if not names:
        return "{}"
    ok, text = student.evaluate(_module_call("describe", list(names)), DESCRIBE_S)
    value = _string_value(text) if ok else None
    return value if value is not None else json.dumps({n: {"kind": "opaque", "why": f"{n}: your notebook's kernel "
                                                           "did not describe it" + ("" if ok else f" ({text[:300]})")}
                                                       for n in names})


def bind_code(description: str) -> str:
    """Code that binds the described names in the judge's namespace."""
    return _module_call("bind", description) + "\nNone"


class AnswerBridge:
    """Answers the judge's call requests by running them in the student's kernel before ``deadline``."""

    def __init__(self, student: SandboxedKernel) -> None:
        self.student = student
        self.deadline = 0.0
        self.calls = 0

    def __call__(self, prompt: str) -> str:
        if not prompt.startswith(REQUEST):
            return json.dumps({"error": "RuntimeError", "message": "the judge asks only for calls of your functions"})
        self.calls += 1
        left = self.deadline - time.monotonic()
        if left <= 0:
            return json.dumps({"error": "TimeoutError", "message": "the cell's time ran out before this call"})
        ok, text = self.student.evaluate(_module_call("serve", prompt[len(REQUEST):]), left)
        if not ok:
            return json.dumps({"error": "KernelError", "message": f"your notebook's kernel did not answer: {text}"})
        value = _string_value(text)
        if value is None:
            return json.dumps({"error": "KernelError", "message": "your notebook's kernel answered something "
                                                                 "that is not a reply"})
        return value


__all__ = ["AnswerBridge", "DESCRIBE_S", "JUDGE_BOOTSTRAP", "JUDGE_KERNEL_ENV", "bind_code", "describe"]
