"""What the instructor's terminal shows: a progress bar while grading and plain-text tables."""
from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``what [#####.....] done/total seconds last`` redrawn in place on ``stream``."""

    def __init__(self, total: int, what: str, stream: TextIO = sys.stderr) -> None:
        self.total, self.done, self.what, self.stream, self.t0 = total, 0, what, stream, time.monotonic()
        self.draw("")

    def draw(self, last: str) -> None:
        width = 30
        filled = int(width * self.done / max(self.total, 1))
        took = time.monotonic() - self.t0
        self.stream.write(f"\r{self.what} [{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} "
                          f"{took:6.0f} s  {last[:40]:<40}")
        self.stream.flush()

    def step(self, last: str) -> None:
        """One more item done; ``last`` says which (and how it went)."""
        self.done += 1
        self.draw(last)
        if self.done >= self.total:
            self.stream.write("\n")

    def close(self) -> None:
        """End the bar's line when nothing was left to do (a bar that filled up ended it already)."""
        if self.done < self.total or self.total == 0:
            self.stream.write("\n")


def table(rows: list[list[str]], header: list[str]) -> str:
    """Columns padded to their widest entry, with a rule under the header."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]

    def line(r: list[str]) -> str:
        return "  ".join(str(x).ljust(w) for x, w in zip(r, widths))

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])
