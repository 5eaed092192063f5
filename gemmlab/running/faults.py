"""GPU faults and their one classification.

A kernel that fails reports it in many spellings: the driver API (``CUDA_ERROR_ILLEGAL_ADDRESS``),
the runtime API the CuTe DSL uses (``cudaErrorIllegalAddress``), torch's messages ("an illegal
memory access was encountered"), and the text of an exception that crossed a process boundary.
This module is the only place that reads those spellings and decides what they mean:

- :func:`classify` turns any of them into a :class:`Fault` (which error, is the context lost?);
- :func:`mark_lost` / :func:`raise_if_lost` remember, per process, that the CUDA context is gone,
  so every later GPU call fails fast with :class:`~gemmlab.errors.ContextLostError`;
- :func:`error_for` and :func:`translate` turn a failed ``CUresult`` or a library exception into
  the gemmlab error a student can act on.

gemmlab's kernels, the DSL path, ``run_isolated``, the kernel judge and the grader all use it,
so a fault is named and handled the same way wherever it happens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gemmlab.errors import ContextLostError, KernelError, KernelTimeoutError

# Short name -> (what it means for a student, spellings: driver API, runtime API, torch).
# Every error here leaves the CUDA context unusable ("sticky").
_STICKY: dict[str, tuple[str, tuple[str, ...]]] = {
    "misaligned address": (
        "a misaligned address (a vector access, e.g. 16-byte, at an address that is not a multiple of its size)",
        ("CUDA_ERROR_MISALIGNED_ADDRESS", "MisalignedAddress", "misaligned address")),
    "illegal memory access": (
        "an illegal memory access (a load or store outside any allocation)",
        ("CUDA_ERROR_ILLEGAL_ADDRESS", "IllegalAddress", "illegal memory access", "illegal address")),
    "illegal instruction": (
        "an illegal instruction (e.g. an instruction this GPU does not support)",
        ("CUDA_ERROR_ILLEGAL_INSTRUCTION", "IllegalInstruction", "illegal instruction")),
    "device-side assert": (
        "a device-side assert() failed",
        ("CUDA_ERROR_ASSERT", "cudaErrorAssert", "device-side assert")),
    "unspecified launch failure": (
        "an unspecified launch failure (often a trap or out-of-bounds access)",
        ("CUDA_ERROR_LAUNCH_FAILED", "LaunchFailure", "unspecified launch failure")),
    "hardware stack error": (
        "a hardware stack error (deep recursion or a corrupted stack)",
        ("CUDA_ERROR_HARDWARE_STACK_ERROR", "HardwareStackError", "hardware stack error")),
    "invalid address space": (
        "an access through a pointer in the wrong address space (e.g. a shared-memory address used as global)",
        ("CUDA_ERROR_INVALID_ADDRESS_SPACE", "InvalidAddressSpace", "invalid address space")),
    "invalid program counter": (
        "an invalid program counter",
        ("CUDA_ERROR_INVALID_PC", "InvalidPc", "invalid program counter")),
    "uncorrectable ECC error": (
        "an uncorrectable ECC memory error",
        ("CUDA_ERROR_ECC_UNCORRECTABLE", "EccUncorrectable", "uncorrectable ECC")),
    "launch timeout": (
        "the kernel ran past the display watchdog's limit",
        ("CUDA_ERROR_LAUNCH_TIMEOUT", "cudaErrorLaunchTimeout", "launch timed out")),
}
# Errors that are not sticky but still worth a short name.
_OTHER: dict[str, tuple[str, ...]] = {
    "out of memory": ("CUDA_ERROR_OUT_OF_MEMORY", "MemoryAllocation", "out of memory"),
}
# Exception class names that mean the same as their message would.
_CLASS_NAMES = {"ContextLostError": "context lost", "KernelTimeoutError": "timeout"}


@dataclass(frozen=True)
class Fault:
    """What a failure means, however it was spelled."""

    name: str            #: short name ("illegal memory access", "timeout", "out of memory", ...)
    context_lost: bool   #: the CUDA context is unusable: only a fresh process can use the GPU again
    hung: bool = False   #: the GPU work did not finish (it may still be running)

    @property
    def needs_fresh_process(self) -> bool:
        """Whether later GPU work must run in another process (context gone, or a kernel may still run)."""
        return self.context_lost or self.hung

    @property
    def explanation(self) -> str:
        """A student-facing explanation of the error."""
        entry = _STICKY.get(self.name)
        return entry[0] if entry else self.name


def classify(text: str) -> Fault | None:
    """The fault a message (CUresult name, runtime or torch text, exception text) reports, or None."""
    for cls, name in _CLASS_NAMES.items():
        if cls in text:
            if name == "timeout":
                return Fault("timeout", context_lost=False, hung=True)
            found = _sticky_name(text)
            return Fault(found or "context lost", context_lost=True)
    found = _sticky_name(text)
    if found is not None:
        return Fault(found, context_lost=True)
    for name, spellings in _OTHER.items():
        if any(s in text for s in spellings):
            return Fault(name, context_lost=False)
    return None


def _sticky_name(text: str) -> str | None:
    for name, (_, spellings) in _STICKY.items():
        if any(s in text for s in spellings):
            return name
    return None


def cuda_error_name(text: str) -> str | None:
    """The short name of the CUDA error a message reports ("misaligned address", ...), or None."""
    fault = classify(text)
    return None if fault is None or fault.name in ("context lost", "timeout") else fault.name


# --------------------------------------------------------------------------- per-process state

_lost: str | None = None  # set once a sticky error was seen: every later call fails fast


def lost_message(detail: str) -> str:
    """The student-facing text of a lost context: what happened, and what to do next."""
    return (
        f"{detail}\nThe CUDA context is now lost: every further GPU call in this Python process "
        "will fail. Restart the Python kernel (Kernel → Restart), then fix the kernel: look for an "
        "out-of-bounds index (a missing bounds check/predicate on an edge tile) or a misaligned "
        "vector access (16-byte loads need 16-byte aligned addresses and row pitches). "
        "`compute-sanitizer python script.py` names the faulting line."
    )


def mark_lost(detail: str) -> ContextLostError:
    """Remember that this process's CUDA context is gone; returns the error to raise."""
    global _lost
    _lost = detail
    return ContextLostError(lost_message(detail))


def lost_reason() -> str | None:
    """Why this process's CUDA context is gone, or None while it is usable."""
    return _lost


def context_state() -> str:
    """Whether this process can still use the GPU, asked after something failed: ``"lost"`` (a sticky fault: only
    a fresh process can), ``"busy"`` (work still runs on torch's current stream: a kernel that hangs), or
    ``"usable"``. Never waits and never creates a CUDA context; the grader asks it instead of reading an error's
    text, which a student's code can write."""
    if _lost is not None:
        return "lost"
    import sys

    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_initialized():
        return "usable"
    try:
        return "usable" if cuda.current_stream().query() else "busy"
    except Exception:  # noqa: BLE001 - any error from the driver now is the sticky one
        return "lost"


def raise_if_lost() -> None:
    """Fail fast, before touching the GPU, when an earlier kernel broke the context."""
    if _lost is not None:
        raise ContextLostError(lost_message(f"an earlier kernel failed: {_lost}"))


# --------------------------------------------------------------------------- translation


def result_name(result: Any) -> str:
    """``CUDA_ERROR_...`` for a cuda.bindings ``CUresult`` (or its str for anything else)."""
    name = getattr(result, "name", None)
    return name if isinstance(name, str) else str(result)


def result_text(result: Any) -> str:
    """A ``CUresult`` in words: the student-facing explanation of a sticky error, else the driver's text."""
    name = result_name(result)
    fault = classify(name)
    if fault is not None and fault.context_lost:
        return fault.explanation
    try:
        from cuda.bindings import driver

        err, text = driver.cuGetErrorString(result)
        if result_name(err) == "CUDA_SUCCESS" and text:
            return text.decode() if isinstance(text, bytes) else str(text)
    except Exception:  # the driver may be gone; the name alone still helps
        pass
    return name


def error_for(result: Any, what: str) -> KernelError:
    """The gemmlab error for a failed ``CUresult``; sticky ones also mark the context lost."""
    name = result_name(result)
    detail = f"{what} failed: {result_text(result)} ({name})"
    fault = classify(name)
    if fault is not None and fault.context_lost:
        return mark_lost(detail)
    return KernelError(detail)


def translate(exc: BaseException, what: str) -> BaseException:
    """A library's exception (torch's ``CUDA error: ...``, the DSL's runtime errors) as ours.

    Sticky faults mark the context lost and become :class:`ContextLostError`; other CUDA errors
    become :class:`KernelError`; anything that is not a CUDA error is returned unchanged.
    """
    if isinstance(exc, (ContextLostError, KernelTimeoutError)):
        return exc
    text = str(exc)
    fault = classify(text)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if fault is not None and fault.context_lost:
        return mark_lost(f"{what} failed: {first}")
    if fault is not None or "CUDA error" in text:
        return KernelError(f"{what} failed: {first}")
    return exc


__all__ = [
    "Fault", "classify", "context_state", "cuda_error_name", "error_for", "lost_message", "lost_reason", "mark_lost",
    "raise_if_lost", "result_name", "result_text", "translate",
]
