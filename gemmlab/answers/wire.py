"""The answer protocol's wire: what crosses between the student's kernel and the judge's, and how.

Both sides import this module and nothing of each other: the names of the environment variables that connect
them, the limits of what crosses, the marks that stand for a tensor or a compiled kernel inside plain data
(:mod:`gemmlab.judge.plain`), the errors a judged call raises, the line reader of the socket, and
:func:`rebuilt`, the one walk over nested arguments and results both sides make.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterator

from gemmlab.judge import plain
from gemmlab.judge.errors import JudgeError

#: Environment variable set in the judge's kernel.
JUDGE_ENV = "GEMMLAB_JUDGE"
#: Environment variable holding the file descriptor of a kernel's socket to the grader's relay.
ANSWER_FD_ENV = "GEMMLAB_ANSWER_FD"
#: Longest answer reply the judge reads.
MAX_REPLY_CHARS = plain.MAX_CHARS + 4096
#: Most characters the description of a notebook's answers takes, all names together (a value that does not fit
#: in what is left is described as not crossing, with this limit named): answers are functions, layouts and a few
#: numbers; one of 200 MB took the grader to 2 GB and the judge to 6 GB.
MAX_DESCRIPTION_CHARS = 4 << 20
#: Deepest nesting of a description's JSON (its values are plain-data strings inside it).
DESCRIPTION_DEPTH = 8
#: Most calls :meth:`Answer.each` sends in one request.
MAX_CALLS_AT_ONCE = 1 << 16
#: How a compiled CuTe DSL kernel of the student's is written in data that crosses: a handle its kernel keeps.
KERNEL_MARK = "__gemmlab_dsl_kernel__"
#: What the judge may ask of a compiled kernel (:class:`gemmlab.answers.stand_ins.CompiledAnswer`), each plain
#: data. Its PTX and SASS text are not among them: text a student's process writes is evidence of nothing; the
#: judge reads the machine code of the module image itself ("image", disassembled in the judge).
KERNEL_FACTS = ("image", "summary", "resources", "kernel_name", "compiled_arch", "signature")
#: Largest module image a compiled kernel may hand over (as the recorded plans allow).
MAX_IMAGE_BYTES = 32 << 20
#: How a tensor argument of a recorded call is written in the request's arguments.
TENSOR_MARK = "__gemmlab_tensor__"
class AnswerError(JudgeError):
    """The student's function raised, or its kernel did not answer; the message says which and how."""


class NeedsStudentProcess(BaseException):
    """A test handed tensors to a student's function (a launch) where the grader does not record launches.

    Not an ``Exception``, so no ``except Exception`` in a test or helper swallows it: the grader sees it
    and runs that test in the student's kernel instead (as a CuTe DSL test). Tests the instructor marked
    ``judged`` record and replay launches instead (:func:`gemmlab.answers.stand_ins.record_launches`).
    """


class StudentProcessOnly(JudgeError):
    """A CuTe DSL kernel of the student's: it can only be built and run in the student's own process."""


def in_judge() -> bool:
    """Whether this process is the judge of a grading run."""
    return os.environ.get(JUDGE_ENV) == "1"


def lines(sock: Any) -> Iterator[str]:
    """Whole lines (without the newline) read from ``sock``; ends when it closes."""
    buffer = b""
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode("utf-8", "replace")



#: What :func:`rebuilt`'s ``leaf`` returns for a part it leaves to the walk.
KEEP: Any = object()


def rebuilt(value: Any, leaf: Callable[[Any], Any], depth: int = 0) -> Any:
    """``value`` with each part for which ``leaf(part)`` is not :data:`KEEP` replaced by that answer.

    Lists, tuples and dicts of exactly those types are walked (a subclass is a leaf, which plain data then
    refuses), to :data:`gemmlab.judge.plain.MAX_DEPTH` levels, the depth plain data allows: anything deeper is
    left as it is, and encoding it then fails with plain data's own message.
    """
    new = leaf(value)
    if new is not KEEP:
        return new
    kind = type(value)
    if kind in (list, tuple) and depth < plain.MAX_DEPTH:
        return kind(rebuilt(v, leaf, depth + 1) for v in value)
    if kind is dict and depth < plain.MAX_DEPTH:
        return {k: rebuilt(v, leaf, depth + 1) for k, v in value.items()}
    return value


__all__ = ["ANSWER_FD_ENV", "AnswerError", "DESCRIPTION_DEPTH", "JUDGE_ENV", "KEEP", "KERNEL_FACTS", "KERNEL_MARK",
           "MAX_CALLS_AT_ONCE", "MAX_DESCRIPTION_CHARS", "MAX_IMAGE_BYTES", "MAX_REPLY_CHARS", "NeedsStudentProcess",
           "StudentProcessOnly", "TENSOR_MARK", "in_judge", "lines", "rebuilt"]
