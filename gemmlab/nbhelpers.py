"""Small helpers the course notebooks share (not part of the toolkit's API).

They exist so that notebook cells stay one idea long: "run on the GPU or say clearly
why we only compile", "has the student replaced the exercise placeholder yet?".
"""
from __future__ import annotations

import inspect
from typing import Any, Callable

from .errors import GemmlabError
from .gpu import current_arch, has_gpu

#: The arch kernels are compiled for when there is no GPU to ask (the course targets H100).
FALLBACK_ARCH = "sm_90a"
#: What nbgrader leaves in the student release where a solution was (python code stub).
STUB_MARK = "raise NotImplementedError()"

#: Measured once on an NVIDIA H100 80GB HBM3 (docs: /work/shared/FACTS.md, 2026-11-22).
#: Used only as a labelled illustration on machines without a GPU.
H100_ILLUSTRATION = {
    "device": "NVIDIA H100 80GB HBM3 (illustration: numbers measured elsewhere, NOT on this machine)",
    "copy_gbps": 3020.0,
    "matmul_tflops": {"float16": 692.0, "bfloat16": 719.0},
}


class ExerciseNotDone(GemmlabError):
    """The exercise still holds the release's placeholder instead of the student's code."""


def arch() -> str:
    """Compile target: this GPU's arch, or sm_90a (H100) where there is no GPU."""
    return current_arch() if has_gpu() else FALLBACK_ARCH


def gpu_or_compile_only(what: str) -> bool:
    """True if a GPU can run ``what``; otherwise print why this cell only compiles."""
    if has_gpu():
        return True
    print(f"No GPU on this machine: {what} was compiled for {FALLBACK_ARCH} but not run. "
          "On a GPU machine this cell runs it and checks the result.")
    return False


def source_done(source: str) -> bool:
    """False while kernel source (a C++ string) still contains the exercise placeholder."""
    return STUB_MARK not in source


def function_done(fn: Callable[..., Any]) -> bool:
    """False while a Python function's body is still the exercise placeholder."""
    fn = inspect.unwrap(getattr(fn, "__wrapped__", fn))
    try:
        return STUB_MARK not in inspect.getsource(fn)
    except (OSError, TypeError):  # no source to inspect: assume the student wrote it
        return True


def require_source_done(source: str, where: str) -> None:
    """Raise a friendly error instead of letting NVRTC choke on ``# YOUR CODE HERE``."""
    if not source_done(source):
        raise ExerciseNotDone(
            f"{where} still contains the placeholder lines `# YOUR CODE HERE` / `{STUB_MARK}`. "
            "Replace them with your CUDA C++ code (keep the rest of the string), then run the cell again.")


def ceilings_or_illustration() -> Any:
    """This GPU's measured ceilings, or the H100's numbers clearly labelled as borrowed.

    Returns an object with ``device``, ``copy_gbps`` and ``matmul_tflops`` (a dict by dtype).
    """
    from .ceilings import Ceilings, ceilings

    if has_gpu():
        return ceilings()
    print("No GPU here, so nothing can be measured. The numbers below are an ILLUSTRATION: "
          "an H100's ceilings measured on another machine. On a GPU this cell measures yours.")
    return Ceilings(**H100_ILLUSTRATION, measured_at="illustration")
