"""DSL exceptions -> a CompileError that points at the student's own line and says what to change.

A bug in a traced ``@cute.jit``/``@cute.kernel`` function surfaces from deep inside the
DSL (its AST rewriter, the MLIR verifier, or the JIT). The student needs the line they wrote
(named as the notebook shows it: "line 9 of cell [12]"), the message in one line, and what it
means (``dsl/explain.py``); the full traceback and any IR dump stay on the CompileError's ``.log``.

The DSL formats its errors like a compiler (``error[ID]: ...``, ``--> file:line:col``, a code
frame, ``note:`` and ``suggestion:`` lines); :func:`parse` reads that back into parts.
"""
from __future__ import annotations

import linecache
import os
import re
import sysconfig
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterator

from gemmlab.compiling.cell_lines import cell_of_file
from ..errors import CompileError
from .explain import explain

__all__ = ["DslDiagnostic", "full_log", "headline", "is_user_file", "needs_line_info", "parse", "place",
           "strip_ansi", "to_compile_error", "user_files_of", "user_frame"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LIB_DIRS = tuple(
    os.path.realpath(p) for p in {sysconfig.get_paths().get("stdlib", ""), sysconfig.get_paths().get("purelib", ""),
                                  sysconfig.get_paths().get("platlib", "")} if p
)
_GEMMLAB_DIR = os.path.realpath(os.path.dirname(os.path.dirname(__file__)))
#: MLIR types such as '!cute_nvgpu.atom.simt_async_copy<f16, ...>' and IR locations: noise to a student.
_IR_TYPE = re.compile(r"'?![\w.]+<[^'\n]*>'?|'?#[\w.]+<[^'\n]*>'?")
#: IR types up to this long say something (e.g. '!cute.coord<"(?,0)">'); longer ones are shown as "…".
_SHORT_IR_TYPE = 40
#: Headlines that say only "something failed": the detail under them is the message.
_GENERIC = re.compile(r"^(The compiler could not build valid IR for this code\.?|Operation creation failed:?|"
                      r"IR verification failed:?|Verification failed:?)$", re.IGNORECASE)
#: What MLIR and the DSL put before the statement itself ("IR verification failed: error: unknown: ...").
_PREFIXES = re.compile(r"^(?:\s*(?:IR verification failed|Verification failed|error|unknown):)+\s*", re.IGNORECASE)
#: The parts of the DSL's compiler-style error text.
_ERROR = re.compile(r"^\s*error(?:\[(?P<id>\w+)\])?:\s*(?P<text>.*)$")
_ARROW = re.compile(r"^\s*-->\s*(?P<file>\S+?):(?P<line>\d+)(?::\d+)?\s*$")
_NOTE = re.compile(r"^\s*=?\s*note:\s*(?P<text>.*)$")
_SUGGESTION = re.compile(r"^\s*suggestion:\s*(?P<text>.*)$")
_FRAME = re.compile(r"^\s*(?:>\s*)?\d*\s*\|")
#: An MLIR location with its source text: ``"mD[tx] = v"("<ipython-input-2-…>":8:4): `` before a message.
_MLIR_LOC = re.compile(r'(?:"(?:[^"\\]|\\.)*")?\("(?P<file>[^"]+)":(?P<line>\d+):\d+\):?\s*')
#: A note that introduces the next location ("the escaping value is created here:").
_CREATED_HERE = re.compile(r"created here", re.IGNORECASE)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]


@dataclass
class DslDiagnostic:
    """One DSL error message read back into parts (any of them may be empty)."""

    diag_id: str = ""
    title: str = ""
    details: list[str] = field(default_factory=list)     # further "error:" lines
    locations: list[tuple[str, int]] = field(default_factory=list)
    created_at: tuple[str, int] | None = None            # where an escaping value was made
    notes: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)

    @property
    def summary(self) -> str:
        """The most specific one-line statement: a generic headline gives way to its detail."""
        lines = [self.title] + self.details
        specific = [t for t in lines if t and not _GENERIC.match(t)]
        text = specific[0] if specific else next((t for t in lines if t), "")
        text = _PREFIXES.sub("", text)
        text = _IR_TYPE.sub(lambda m: m[0] if len(m[0]) <= _SHORT_IR_TYPE else "…", text)
        text = re.sub(r" \((?:Staged|Meta) value\)", "", text).replace("value value", "value")
        return re.sub(r"\s+", " ", text).strip().rstrip(":,")


def parse(text: str) -> DslDiagnostic:
    """The parts of one DSL (or MLIR) error text; plain Python messages give a title only."""
    diag = DslDiagnostic()
    current: list[str] | None = None     # the list whose last entry a continuation line extends
    expecting_created = False
    for raw in strip_ansi(text).splitlines():
        if not raw.strip():
            current = None
            continue
        if m := _ERROR.match(raw):
            if not diag.title:
                diag.diag_id, diag.title = m["id"] or "", m["text"].strip()
                current = None
            else:
                diag.details.append(m["text"].strip())
                current = diag.details
            continue
        if m := _ARROW.match(raw):
            where = (m["file"], int(m["line"]))
            if expecting_created and diag.created_at is None:
                diag.created_at = where
            else:
                diag.locations.append(where)
            expecting_created, current = False, None
            continue
        if _FRAME.match(raw) or raw.strip().startswith("in function"):
            current = None
            continue
        if m := _NOTE.match(raw):
            note = m["text"].strip()
            if note.startswith("Caused exception:"):
                current = None
                continue
            expecting_created = bool(_CREATED_HERE.search(note))
            diag.notes.append(note)
            current = diag.notes
            continue
        if m := _SUGGESTION.match(raw):
            diag.suggestions.append(m["text"].strip())
            current = diag.suggestions
            continue
        if current is not None and raw.startswith(" "):
            current[-1] = f"{current[-1]} {raw.strip()}"
            continue
        if not diag.title:
            diag.title = raw.strip()
        elif current is None and not diag.details:
            diag.details.append(raw.strip())
            current = diag.details
    _read_mlir_locations(diag)
    return diag


def _read_mlir_locations(diag: DslDiagnostic) -> None:
    """MLIR's own locations (``"source text"("file":line:col): message``, where the DSL kept line info but
    could not print a code frame, e.g. for a notebook cell): the error's go to ``locations``, the one of
    "operand defined here" to ``created_at``; the location text is taken out of the message."""
    def strip(text: str, into: list[tuple[str, int]] | None) -> str:
        for m in _MLIR_LOC.finditer(text):
            if into is not None:
                into.append((m["file"], int(m["line"])))
        return _MLIR_LOC.sub("", text)

    found: list[tuple[str, int]] = []
    diag.title = strip(diag.title, found)
    diag.details = [strip(d, found) for d in diag.details]
    diag.locations.extend(w for w in found if w not in diag.locations)
    for i, note in enumerate(diag.notes):
        made: list[tuple[str, int]] = []
        diag.notes[i] = strip(note, made)
        if made and "defined here" in note and diag.created_at is None:
            diag.created_at = made[0]


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


def _diagnostics(exc: BaseException) -> list[DslDiagnostic]:
    return [parse(str(e)) for e in _chain(exc) if str(e).strip()]


def _is_verifier_error(text: str) -> bool:
    """The MLIR verifier runs after tracing: its errors carry no Python frame of the line at fault."""
    return bool(re.search(r"Verification failed|IR verification failed|does not dominate", text, re.IGNORECASE))


def needs_line_info(exc: BaseException, fn: Callable) -> bool:
    """Whether the error names no line of the student's: a verifier error whose message has no location
    (compiling again with ``--generate-line-info`` makes the DSL give one)."""
    files = user_files_of(fn)
    if not _is_verifier_error(_text_of(exc)):
        return False
    return not any(is_user_file(f, files) for d in _diagnostics(exc) for f, _ in d.locations)


def _text_of(exc: BaseException) -> str:
    return "\n".join(strip_ansi(str(e)) for e in _chain(exc))


def place(filename: str, line: int) -> str:
    """Where a line is, as the student sees it: "line 9 of cell [12]" for a notebook cell, else "file:line"."""
    cell = cell_of_file(filename)
    return f"line {line} of cell {cell}" if cell else f"{filename}:{line}"


def headline(exc: BaseException) -> str:
    """A one-line reason: the DSL's own statement of the error, or the root cause's type and text."""
    summaries = [d.summary for d in _diagnostics(exc) if d.summary]
    # The first statement an explanation knows, else the first one: a wrapper's own text says less.
    summary = next((s for s in summaries if explain(s)), summaries[0] if summaries else "")
    root = list(_chain(exc))[-1]
    if not summary:
        text = strip_ansi(str(root)).strip()
        return f"{type(root).__name__}: {text.splitlines()[0]}" if text else type(root).__name__
    name = type(root).__name__
    if root is not exc and name not in summary and name not in ("MLIRError", "DSLRuntimeError", "DSLUserCodeError"):
        summary = f"{name}: {summary}"
    return summary


def full_log(exc: BaseException) -> str:
    return strip_ansi("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))


def _function_so_far(filename: str, line: int) -> str:
    """The lines of the function that holds ``line``, from its ``def`` down to ``line``: what an explanation
    may read (e.g. whether a missing name was assigned earlier in the same function, inside a branch)."""
    lines = linecache.getlines(filename)[:line]
    if not lines:
        return ""
    indent = len(lines[-1]) - len(lines[-1].lstrip())
    for start in range(len(lines) - 1, -1, -1):
        text = lines[start]
        if text.lstrip().startswith(("def ", "async def ")) and len(text) - len(text.lstrip()) < indent:
            return "".join(lines[start:])
    return "".join(lines)


def _located(exc: BaseException, fn: Callable) -> tuple[tuple[str, int] | None, tuple[str, int] | None]:
    """(the line at fault, the line that made an escaping value) in the student's code, when known.

    The DSL's own ``-->`` location wins: it is where the traced code was; the traceback's deepest
    student frame serves Python errors the DSL did not format. A verifier error without a location
    has no reliable frame (the traceback then ends at the compile call), so it gets none.
    """
    files = user_files_of(fn)
    diags = _diagnostics(exc)
    at = next(((f, n) for d in diags for f, n in d.locations if is_user_file(f, files)), None)
    made = next((d.created_at for d in diags if d.created_at and is_user_file(d.created_at[0], files)), None)
    if at is None and not _is_verifier_error(_text_of(exc)):
        at = user_frame(exc, files)
    return at, made


def _dsl_hint(exc: BaseException) -> str:
    """The DSL's own first suggestion (shown only when no explanation of ours matches)."""
    for diag in _diagnostics(exc):
        useful = [s for s in diag.suggestions if "CUTE_DSL_" not in s and "report this" not in s]
        if useful:
            return useful[0]
    return ""


def to_compile_error(exc: BaseException, fn: Callable, arch: str) -> CompileError:
    """The student-facing CompileError for any exception raised while tracing/compiling fn."""
    inner = getattr(fn, "__wrapped__", fn)
    name = getattr(inner, "__name__", "the kernel")
    at, made = _located(exc, fn)
    reason = headline(exc)
    lines = [f"CuTe DSL compile of `{name}` for {arch} failed"
             + (f" at {place(*at)}:" if at else ":"), f"{reason}"]
    if at:
        source = linecache.getline(at[0], at[1]).strip()
        if source:
            lines.insert(1, f"    {source}")
    else:
        code = getattr(inner, "__code__", None)
        where = f" (its definition is at {place(code.co_filename, code.co_firstlineno)})" if code else ""
        lines.append(f"The DSL could not name the line: the error is in code traced by `{name}` or the kernels "
                     f"it launches{where}.")
    if made:
        made_source = linecache.getline(made[0], made[1]).strip()
        lines.append(f"The value is made at {place(*made)}" + (f": {made_source}" if made_source else "."))
    explanation = explain(_text_of(exc), _function_so_far(*at) if at else "")
    if explanation:
        lines.append(str(explanation))
    elif hint := _dsl_hint(exc):
        lines.append(f"hint: {hint}")
    lines.append("(The full DSL traceback is the CompileError's .log.)")
    return CompileError("\n".join(lines), diagnostics=[at] if at else [], log=full_log(exc))
