"""Turn NVRTC's log into short diagnostics on the student's own lines.

NVRTC prints errors as ``file(line): error: message`` followed by the offending source
line and a caret. Errors inside CuTe headers come with a chain of "detected during
instantiation of ... at line N of kernel.cu" notes: the last note that names the
student's file is where *their* code caused it, which is what they need to see first.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from gemmlab.errors import CompileError

MAX_SHOWN = 10

_HEAD = re.compile(
    r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<sev>catastrophic error|fatal error|error|warning|remark|note)"
    r"(?: #[\w-]+)?: (?P<msg>.*)$"
)
_AT_LINE = re.compile(r"\bat line (\d+)(?: of (.+?))?\s*$")
_SUMMARY = re.compile(r"^\d+ (?:catastrophic )?errors? detected in the compilation of")


@dataclass(frozen=True)
class Diagnostic:
    """One compiler message. ``line`` is in the student's source when ``header`` is None;
    otherwise it is the student's line whose code instantiated the failing header code (or 0)."""

    line: int
    column: int
    severity: str
    message: str
    source_line: str
    header: str | None = None  # "cute/stride.hpp:108" for header-internal diagnostics

    @property
    def is_error(self) -> bool:
        return "error" in self.severity

    def format(self, program: str) -> str:
        """``kernel.cu:12:5: error: ...`` plus the source line and a caret."""
        location = program
        if self.line:
            location += f":{self.line}" + (f":{self.column}" if self.column else "")
        if self.header:
            where = f"in {_header_kind(self.header)} header {self.header}"
            if self.line:
                where += f", instantiated from your line {self.line}"
            text = f"{location}: {self.severity}: {self.message}\n    ({where})"
        else:
            text = f"{location}: {self.severity}: {self.message}"
        if self.source_line.strip():
            text += f"\n    {self.source_line.rstrip()}"
            if self.column and not self.header:
                text += "\n    " + " " * (self.column - 1) + "^"
        return text


def _header_kind(path: str) -> str:
    for prefix, kind in (("cute/", "a CuTe"), ("cutlass/", "a CUTLASS"), ("cuda/", "a CCCL"),
                         ("cub/", "a CUB"), ("crt/", "a CUDA"), ("thrust/", "a Thrust")):
        if path.startswith(prefix):
            return kind
    return "a"


def short_header(path: str, include_dirs: Sequence[str] = ()) -> str:
    """Drop the install prefix: ``/…/site-packages/cutlass_library/source/include/cute/x.hpp`` -> ``cute/x.hpp``."""
    for folder in sorted((str(d).rstrip("/") for d in include_dirs), key=len, reverse=True):
        if folder and path.startswith(folder + "/"):
            return path[len(folder) + 1:]
    marker = path.rfind("/include/")
    if marker >= 0:
        rest = path[marker + len("/include/"):]
        return rest[len("cccl/"):] if rest.startswith("cccl/") else rest
    return path.rsplit("/", 1)[-1]


def parse(log: str, program: str, source: str = "", prelude_lines: int = 0,
          include_dirs: Sequence[str] = ()) -> list[Diagnostic]:
    """All diagnostics in the log, the student's own first, each mapped to their line numbers."""
    user_lines = source.splitlines()
    raw = log.splitlines()
    own: list[Diagnostic] = []
    inside: list[Diagnostic] = []
    i = 0
    while i < len(raw):
        head = _HEAD.match(raw[i].strip())
        if not head:
            i += 1
            continue
        body: list[str] = []
        i += 1
        while i < len(raw) and not _HEAD.match(raw[i].strip()) and not _SUMMARY.match(raw[i].strip()):
            body.append(raw[i])
            i += 1
        own_file = head["file"] == program
        echoed, caret = _echo_and_caret(body)
        severity = "error" if "error" in head["sev"] else head["sev"]
        if own_file:
            line = int(head["line"]) - prelude_lines
            column = max(1, caret - 1) if caret >= 0 else 1  # EDG indents the echoed line by 2
            text = user_lines[line - 1] if 0 < line <= len(user_lines) else echoed[2:]
            own.append(Diagnostic(line, column, severity, head["msg"].strip(), text))
        else:
            line = _instantiated_from(body, head["file"], program) - prelude_lines
            line = max(line, 0)
            text = user_lines[line - 1] if 0 < line <= len(user_lines) else ""
            where = f"{short_header(head['file'], include_dirs)}:{head['line']}"
            inside.append(Diagnostic(line, 0, severity, head["msg"].strip(), text, header=where))
    return own + inside


def _echo_and_caret(body: list[str]) -> tuple[str, int]:
    """The echoed source line and the caret's index in the caret line (-1 when absent)."""
    for k, line in enumerate(body):
        if line.strip() == "^" and k > 0:
            return body[k - 1], line.index("^")
    return (body[0] if body else ""), -1


def _instantiated_from(notes: list[str], header_file: str, program: str) -> int:
    """The last 'at line N of <program>' in the instantiation chain (0 when the chain never leaves headers)."""
    found = 0
    current = header_file
    for note in notes:
        match = _AT_LINE.search(note.strip())
        if not match:
            continue
        current = match.group(2) or current
        if current == program:
            found = int(match.group(1))
    return found


def format_all(diagnostics: Sequence[Diagnostic], program: str, limit: int = MAX_SHOWN) -> str:
    """Errors first (at most ``limit``), then a count of what was left out.

    Header-internal errors caused by the same line of the student's code are folded into
    the first of them: one CuTe mistake easily yields a dozen follow-on errors.
    """
    errors = [d for d in diagnostics if d.is_error] or list(diagnostics)
    groups: list[tuple[Diagnostic, int]] = []
    seen_header_lines: dict[int, int] = {}
    for diag in errors:
        if diag.header and diag.line in seen_header_lines:
            index = seen_header_lines[diag.line]
            first, extra = groups[index]
            groups[index] = (first, extra + 1)
            continue
        if diag.header:
            seen_header_lines[diag.line] = len(groups)
        groups.append((diag, 0))
    parts = []
    for diag, extra in groups[:limit]:
        text = diag.format(program)
        if extra:
            text += f"\n    (+{extra} follow-on error{'s' if extra > 1 else ''} inside headers from the same line)"
        parts.append(text)
    rest = sum(1 + extra for _, extra in groups[limit:])
    if rest > 0:
        parts.append(f"... and {rest} more error{'s' if rest > 1 else ''} (the full compiler log is the CompileError's .log)")
    return "\n".join(parts)


def compile_error(log: str, program: str, source: str, prelude_lines: int = 0,
                  include_dirs: Sequence[str] = (), heading: str = "") -> CompileError:
    """A CompileError whose message is the compact, mapped diagnostics and whose ``.log`` is the raw log."""
    diagnostics = parse(log, program, source, prelude_lines, include_dirs)
    body = format_all(diagnostics, program)
    if not body:  # something NVRTC said that is not in the usual shape: show it, minus install paths
        body = _scrub_paths(log.strip()) or "NVRTC failed without a message."
    message = f"{heading}\n{body}" if heading else body
    return CompileError(message, diagnostics=diagnostics, log=log)


def _scrub_paths(text: str) -> str:
    return re.sub(r"(/[^\s:()\"']+)+/include/", "", text)


def warnings_text(log: str, program: str, source: str, prelude_lines: int = 0,
                  include_dirs: Sequence[str] = ()) -> str:
    """Warnings from a successful compile, mapped like errors ('' when there are none)."""
    diagnostics = [d for d in parse(log, program, source, prelude_lines, include_dirs) if not d.is_error]
    return "\n".join(d.format(program) for d in diagnostics)
