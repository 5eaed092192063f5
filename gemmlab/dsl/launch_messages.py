"""The CuTe DSL's launch-time complaints, turned into errors a student can act on.

Why: when a DSL kernel asks for more shared memory than the GPU allows, the DSL's generated
host code prints "Error: kernel '...' launch shared memory exceeds ..." to the C-level stdout
and returns without running the kernel and without an error code. In a notebook that line goes
to the Jupyter server's terminal, not the cell; the student only sees a result that was never
written. gemmlab captures what the first launch of each compiled variant prints and raises
instead; everything captured is printed on as before, so no output is lost.
"""
from __future__ import annotations

import contextlib
import os
import re
from typing import Callable, Iterator, TypeVar

from ..errors import LaunchError
from gemmlab.running.printf import captured_fd_output

T = TypeVar("T")

_OVER_ARCH = re.compile(r"Error: kernel '(?P<kernel>[^']*)' launch shared memory exceeds current GPU arch "
                        r"(?P<arch>\S+?) allowed\. Allocated: (?P<alloc>\d+) bytes\. Max: (?P<max>\d+) bytes\.?")
_UNDER_USE = re.compile(r"Error: shared memory usage in '(?P<kernel>[^']*)' may exceed available memory set in "
                        r"kernel launch\. Allocated: (?P<alloc>\d+) bytes\. Used: (?P<used>\d+) bytes\.?")


@contextlib.contextmanager
def captured_c_stdout() -> Iterator[list[str]]:
    """Collect what is written to file descriptor 1 (C's stdout) inside the block into the yielded
    list (one string, after the block), then write it on to the real stdout."""
    collected: list[str] = []
    try:
        with captured_fd_output(1) as collected:
            yield collected
    finally:
        text = "".join(collected)
        if text:
            os.write(1, text.encode("utf-8"))


def launch_error(printed: str, name: str) -> LaunchError | None:
    """A LaunchError for a shared-memory complaint in ``printed`` (what a launch printed), else None."""
    hit = _OVER_ARCH.search(printed)
    if hit:
        return LaunchError(
            f"DSL kernel `{name}` did not run: it asks for {int(hit['alloc']):,} bytes of shared memory per CTA at "
            f"launch, and an {hit['arch'].removeprefix('Arch.')} GPU allows at most {int(hit['max']):,}. "
            "Use fewer pipeline stages or smaller tiles (each stage holds one tile of A and one of B).")
    hit = _UNDER_USE.search(printed)
    if hit:
        return LaunchError(
            f"DSL kernel `{name}` launches with smem={int(hit['alloc']):,} bytes, but its shared-memory "
            f"allocations need {int(hit['used']):,}: pass a larger smem= to .launch(), or leave smem out so the "
            "DSL sizes it.")
    return None


def first_launch(run: Callable[[], T], name: str) -> T:
    """``run()`` (a compiled variant's first launch) with C's stdout captured. A shared-memory
    complaint it printed becomes the LaunchError, whether the DSL then skipped the launch and
    returned or the driver rejected it and the DSL raised; any other failure propagates as is."""
    failure: Exception | None = None
    with captured_c_stdout() as printed:
        try:
            status = run()
        except Exception as exc:  # noqa: BLE001 - re-raised below unless the printed complaint explains it
            failure = exc
    complaint = launch_error("".join(printed), name)
    if complaint is not None:
        raise complaint from None
    if failure is not None:
        raise failure
    return status
