"""The result of checking a kernel's techniques: one finding per check and kernel, shown in a notebook
as a short table and raised, when something is missing, as one :class:`TechniqueError` whose message
names every missing technique in a sentence.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field

from ..errors import GemmlabError
from .check import Finding


class TechniqueError(GemmlabError, AssertionError):
    """A kernel lacks a technique its exercise teaches; the message says which, and what the kernel does instead.

    An AssertionError too, so a graded test cell fails with it like with any failed check."""


@dataclass
class TechniqueReport:
    """Findings of the checks of one test, per kernel read."""

    what: str
    findings: list[tuple[str, Finding]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(f.passed for _, f in self.findings)

    def failures(self) -> list[tuple[str, Finding]]:
        return [(k, f) for k, f in self.findings if not f.passed]

    def message(self) -> str:
        """The failures, one sentence each (the kernel named when several were read); the first on the first line,
        which is what a grade report shows of a failed test."""
        kernels = {k for k, _ in self.findings}
        lines = []
        for kernel, f in self.failures():
            where = f" [{kernel}]" if len(kernels) > 1 else ""
            lines.append(f"{f.message}{where}")
        return f"{self.what}: " + "\n- ".join(lines)

    def raise_if_failed(self) -> "TechniqueReport":
        if not self.passed:
            raise TechniqueError(self.message())
        return self

    def __str__(self) -> str:
        head = f"{self.what}: {'every technique found' if self.passed else 'techniques missing'}"
        return "\n".join([head] + [f"  {f}" for _, f in self.findings])

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{'✓' if f.passed else '✗'}</td><td><code>{html.escape(f.check)}</code></td>"
            f"<td>{html.escape(f.message)}</td></tr>" for _, f in self.findings)
        return (f"<div><b>{html.escape(self.what)}</b><table>{rows}</table></div>")


__all__ = ["TechniqueError", "TechniqueReport"]
