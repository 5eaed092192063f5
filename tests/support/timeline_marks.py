"""The timeline's marks (gemmlab.profiling.marks) taken out of a DSL kernel cell's source, for tests that check
the marks change nothing outside a timeline: the cell compiled as is and compiled without them give the same SASS."""
from __future__ import annotations

import re


def without_marks(source: str) -> str:
    """``source`` with every ``tracer = marks.begin()`` and ``tracer.mark(...)`` line taken out."""
    out = re.sub(r"^[ \t]*tracer = marks\.begin\(\).*\n", "", source, flags=re.M)
    out = re.sub(r"^[ \t]*tracer\.mark\([\w.]+\)[ \t]*(#.*)?\n?", "", out, flags=re.M)
    left = [line for line in out.splitlines() if "tracer" in line and not line.lstrip().startswith("#")]
    if left:
        raise ValueError(f"a mark this helper does not know how to take out: {left[0]}")
    return out


def marks_in(source: str) -> int:
    """How many ``tracer.mark(...)`` statements (not comments) ``source`` holds."""
    return len(re.findall(r"^[ \t]*tracer\.mark\(", source, flags=re.M))
