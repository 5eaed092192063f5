"""DSL exceptions -> a CompileError that points at the student's own line.

A bug in a traced ``@cute.jit``/``@cute.kernel`` function surfaces from deep inside the
DSL (its AST rewriter, MLIR verifier, or the JIT). The student needs the line they wrote
and one short paragraph; the full traceback and any IR dump stay on the CompileError's ``.log``.
"""
from __future__ import annotations

import linecache
import os
import re
import sys
import sysconfig
import traceback
from typing import Any, Callable, Iterator

from ..errors import CompileError

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LIB_DIRS = tuple(
    os.path.realpath(p) for p in {sysconfig.get_paths().get("stdlib", ""), sysconfig.get_paths().get("purelib", ""),
                                  sysconfig.get_paths().get("platlib", "")} if p
)
_GEMMLAB_DIR = os.path.realpath(os.path.dirname(os.path.dirname(__file__)))
#: Lines of DSL/MLIR noise that never help a student (IR dumps, locations, notes about the DSL).
_NOISE = re.compile(r"^\s*(%|\^bb|\"?[a-z_]+\.[a-z_]+\"?\s*[({<]|loc\(|#loc|module\b|func\.func|cute\.|gpu\.|llvm\.|\}|-->|\||\d+\s*\||\^)")
MAX_MESSAGE_LINES = 6


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]


def is_user_file(filename: str, user_files: set[str]) -> bool:
    """A notebook cell or a file the student wrote: not Python's, not a library's, not ours."""
    if filename in user_files or os.path.realpath(filename) in user_files:
        return True
    if filename.startswith("<ipython-input-") or "/ipykernel_" in filename:
        return True
    if filename.startswith("<"):
        return False
    real = os.path.realpath(filename)
    if real.startswith(_GEMMLAB_DIR + os.sep) and os.sep + "tests" + os.sep not in real:
        return False
    return not any(real.startswith(d + os.sep) for d in _LIB_DIRS)


def user_files_of(fn: Callable) -> set[str]:
    fn = getattr(fn, "__wrapped__", fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return set()
    return {code.co_filename, os.path.realpath(code.co_filename)}


def user_frame(exc: BaseException, user_files: set[str]) -> tuple[str, int] | None:
    """The deepest frame in the student's code over the whole exception chain."""
    best = None
    for e in _chain(exc):
        for frame in traceback.extract_tb(e.__traceback__):
            if is_user_file(frame.filename, user_files):
                best = (frame.filename, frame.lineno or 0)
        if best:
            return best  # the chain goes from outermost to root cause: first hit with a user frame wins
    return None


def _located_in_message(text: str) -> tuple[str, int] | None:
    """The DSL's own 'file:line' pointer (``--> /path/cell.py:12``), when it gave one."""
    match = re.search(r"-->\s*(\S+?):(\d+)", text)
    return (match.group(1), int(match.group(2))) if match else None


def headline(exc: BaseException) -> str:
    """A short reason: the DSL's own summary line, or the root cause's type and text."""
    text = strip_ansi(str(exc)).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    keep: list[str] = []
    for ln in lines:
        if _NOISE.match(ln) or ln.startswith(("= note", "note:")):
            continue
        ln = re.sub(r"^error(\[\w+\])?:\s*", "", ln)
        ln = re.sub(r"'[^']*![^']*'\s*", "", ln)  # MLIR types such as '!cute_nvgpu.atom...<...>'
        ln = re.sub(r"\berror: unknown:\s*", "", ln).strip()
        if not ln:
            continue
        keep.append(ln)
        if len(keep) >= MAX_MESSAGE_LINES:
            break
    root = list(_chain(exc))[-1]
    if not keep:
        return f"{type(root).__name__}: {strip_ansi(str(root)).strip().splitlines()[0] if str(root).strip() else ''}".strip()
    if root is not exc and type(root).__name__ not in keep[0] and not keep[0].startswith(type(root).__name__):
        keep[0] = f"{keep[0]} ({type(root).__name__})"
    return "\n".join(keep)


def full_log(exc: BaseException) -> str:
    return strip_ansi("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))


#: MLIR verifier messages that have no Python line, and what a student should look at.
KNOWN_IR_ERRORS = [
    (r"expects src and dst to have static shape",
     "a copy needs static shapes: index the partition's modes whose size is known only at run time "
     "(e.g. a k-tile mode from local_tile(..., (m, n, None)): tAgA[None, k]) before copying."),
    (r"ptr alignment \(\d+ bits\) does not meet requirement",
     "the copy atom moves more bits per copy than the data's alignment allows: num_bits_per_copy must be "
     "the element's bits times the vector length, and each thread's value layout must run along the "
     "tensor's contiguous mode (e.g. (1, vec) for a K-major tile, (vec, 1) for an N-major one)."),
]


def known_hint(exc: BaseException) -> str:
    """The hint for a known verifier message anywhere in ``exc``'s chain ('' when none matches)."""
    text = " ".join(strip_ansi(str(e)) for e in _chain(exc))
    return next((hint for pattern, hint in KNOWN_IR_ERRORS if re.search(pattern, text)), "")


def to_compile_error(exc: BaseException, fn: Callable, arch: str) -> CompileError:
    """The student-facing CompileError for any exception raised while tracing/compiling fn."""
    files = user_files_of(fn)
    where = user_frame(exc, files) or _located_in_message(strip_ansi(str(exc)))
    name = getattr(getattr(fn, "__wrapped__", fn), "__name__", "the kernel")
    reason, *hints = headline(exc).split("\n")
    hint = " ".join(h.strip() for h in hints)
    if where:
        filename, line = where
        source = linecache.getline(filename, line).strip()
        shown = f"{filename}:{line}: {reason}" + (f"\n    {source}" if source else "")
    else:  # e.g. an MLIR verifier error: it has no Python line, so name the traced function
        code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
        place = f"{code.co_filename}:{code.co_firstlineno}: " if code else ""
        shown = (f"{place}{reason}\n(The DSL could not map this error to a line: it comes from code traced "
                 f"by `{name}` or the kernels it launches.)")
    known = "" if hint else known_hint(exc)
    if hint:
        shown += "\n" + re.sub(r"^suggestion:\s*", "hint: ", hint)
    elif known:
        shown += "\nhint: " + known
    message = (f"CuTe DSL compile of `{name}` for {arch} failed.\n{shown}\n"
               "(The full DSL traceback is the CompileError's .log.)")
    return CompileError(message, diagnostics=[where] if where else [], log=full_log(exc))
