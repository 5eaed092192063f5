"""Is what was checked or timed honest work of the student's kernel?

One module for every integrity question ``check_gemm``, ``bench_gemm`` and the grader ask:

- **torch computing instead of the kernel**: :func:`library_guard` records every torch operator
  run inside a call that computes (anything outside :data:`DATA_MOVEMENT`: allocation, views, padding,
  copies and fills), library GEMMs included, and copies to the host; :func:`library_message`
  says why that fails a graded check.
- **late or other-stream work**: :func:`watched_call` runs a call on a stream of gemmlab's own and
  snapshots the output when it returns; an output that changes afterwards means work was left
  running elsewhere (:func:`late_work_message`). :func:`verify_nothing_left_running` also times how
  long the whole GPU stays busy after a call's current-stream work ends (:func:`left_work_running` decides).
- **input guard**: :func:`input_nudger` changes one input element between timed calls.
- **cached output**: :func:`verify_once` writes new values into the same input buffers and
  requires one call to compute the new product.

Outside the course's grader (``GEMMLAB_GRADING=1``, :func:`grading_mode`) only the late-work
check is on by default. Failures in timing raise :class:`BenchIntegrityError`.
"""
from __future__ import annotations

import os
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from gemmlab.errors import GemmlabError
from gemmlab.running.streams import DEFAULT_TIMEOUT_S, call_and_snapshot

#: torch operators that compute a matrix product (or a convolution that can stand in for one).
LIBRARY_GEMMS = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_scaled_mm", "_int_mm", "mv", "addmv",
    "dot", "vdot", "inner", "einsum", "tensordot", "chain_matmul", "linalg_multi_dot", "_addmm_activation",
    "convolution", "_convolution", "cudnn_convolution", "conv1d", "conv2d", "conv3d", "_mm_dtype",
})


class BenchIntegrityError(GemmlabError):
    """The timed calls were not honest work of the kernel (cached, unfinished, wrong or a library GEMM)."""


def grading_mode() -> bool:
    """True inside the course's grader (``GEMMLAB_GRADING=1``): checked calls must be the student's kernel."""
    return os.environ.get("GEMMLAB_GRADING") == "1"


#: torch operators a launcher may run around its kernel: allocating, viewing, copying and filling
#: memory. Anything else computes, and a graded GEMM call must compute only in the student's kernel:
#: an allow-list, so that a product assembled from elementwise torch operators (a broadcast multiply
#: and a sum, an index_add, a cumsum...) is caught as a class, not operator by operator.
DATA_MOVEMENT = frozenset({
    # allocation
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "resize_",
    # views and metadata
    "view", "_unsafe_view", "view_as", "reshape", "_reshape_alias", "as_strided", "as_strided_", "t",
    "transpose", "permute", "expand", "expand_as", "unsqueeze", "squeeze", "slice", "select", "narrow",
    "unbind", "split", "split_with_sizes", "chunk", "flatten", "unflatten", "alias", "detach", "lift_fresh",
    "view_as_real", "view_as_complex", "unfold", "movedim", "set_", "is_same_size", "is_pinned",
    "_has_compatible_shallow_copy_type", "record_stream", "_local_scalar_dense",
    # copies and fills
    "copy_", "_to_copy", "to", "clone", "contiguous", "fill_", "zero_", "_copy_from", "_copy_from_and_resize",
    # padding and joining (what a launcher does to meet a kernel's alignment or tile multiple)
    "constant_pad_nd", "pad", "cat", "_cat", "concat", "concatenate", "stack",
})


#: DATA_MOVEMENT without the operators that move values from one tensor to another (copies, padding,
#: joins): what a copy kernel's launcher may run around its kernel, whose job is the copying itself.
#: Reading an element (``.item()``) is out too, and so is ``fill_`` with a tensor's value (see library_guard).
NO_COPIES = DATA_MOVEMENT - frozenset({
    "copy_", "_to_copy", "to", "clone", "contiguous", "_copy_from", "_copy_from_and_resize",
    "constant_pad_nd", "pad", "cat", "_cat", "concat", "concatenate", "stack", "_local_scalar_dense",
})


def _op_name(func: Any) -> str:
    return func._schema.name.split("::")[-1]


def _host_copy(name: str, args: Any, kwargs: dict) -> bool:
    """Whether a copy operator moves a CUDA tensor to the host."""
    src = args[1] if name != "_to_copy" and len(args) > 1 else args[0] if args else None
    dst = args[0] if name != "_to_copy" else None
    to_cpu = (kwargs.get("device") is not None and str(kwargs["device"]).startswith("cpu")) \
        if name == "_to_copy" else getattr(getattr(dst, "device", None), "type", "") == "cpu"
    return getattr(getattr(src, "device", None), "type", "") == "cuda" and to_cpu


@contextmanager
def library_guard(enabled: bool = True, allowed: frozenset[str] = DATA_MOVEMENT) -> Iterator[list[str]]:
    """Record the torch computation run inside the block: library GEMMs, any other operator that
    computes (everything outside ``allowed``, by default :data:`DATA_MOVEMENT`), and device-to-host copies.

    Yields a list that fills with what was seen, e.g. ``["aten::mm"]`` or ``["aten::mul", "aten::sum"]``.
    The torch operators are watched through a ``TorchDispatchMode``; libraries called around torch
    (cuBLAS through ctypes, CuPy) are not seen (docs/THREAT_MODEL.md).
    """
    seen: list[str] = []
    if not enabled:
        yield seen
        return
    import torch

    from gemmlab.running.dispatch_watch import dispatch_watch

    def note(func: Any, args: tuple, kwargs: dict) -> Any:
        name = _op_name(func)
        if name in LIBRARY_GEMMS or name not in allowed:
            seen.append(f"aten::{name}")
        elif name == "fill_" and "copy_" not in allowed and len(args) > 1 and isinstance(args[1], torch.Tensor):
            seen.append("aten::fill_ with a tensor's value")   # a copy, one element at a time
        elif name in ("_to_copy", "copy_", "_copy_from") and _host_copy(name, args, kwargs):
            seen.append("a copy to the host")
        return func(*args, **kwargs)

    with dispatch_watch(note):
        yield seen


def library_message(seen: list[str]) -> str:
    """Why a call that ran ``seen`` (from :func:`library_guard`) fails a graded check."""
    names = ", ".join(sorted(set(seen)))
    return (f"your function used {names} instead of computing the product in your own kernel: "
            "graded checks time and verify your kernel, not torch's or cuBLAS's arithmetic")


# --------------------------------------------------------------------------- late / other-stream work


@dataclass
class WatchedCall:
    """What :func:`watched_call` saw: the call's return value, the library calls it ran, and how many
    output elements changed after it returned."""

    returned: Any
    library_calls: list[str]
    late_elements: int


def watched_call(call: Callable[[], Any], output: Any, timeout_s: float, what: str,
                 forbid_library: bool) -> WatchedCall:
    """Run ``call()`` once on gemmlab's watched stream, with library calls recorded when
    ``forbid_library``, and count the elements of ``output`` (a CUDA tensor, e.g. its bits) that
    changed after the call returned: work it left running on another stream."""
    with library_guard(forbid_library) as used:
        returned, on_return = call_and_snapshot(call, output, timeout_s, what)
    late = int((on_return != output).sum())
    return WatchedCall(returned, used, late)


def late_work_message(late_elements: int) -> str:
    """Why a check fails when output elements changed after the function returned."""
    noun = "element" if late_elements == 1 else "elements"
    return (f"{late_elements:,} {noun} of the output changed after your function returned: work still ran on "
            "another stream; launch on torch's current stream (torch.cuda.current_stream(); a CuTe DSL @cute.jit "
            "function takes `stream: cuda.CUstream`, which gemmlab fills in, and passes stream=stream to .launch())")


#: Slack for a device-wide synchronize's own latency (ms).
SYNC_SLACK_MS = 0.1


def left_work_running(after_ms: float, gpu_ms: float) -> bool:
    """Whether a call left work behind, given ``after_ms``: how long the GPU stayed busy after the
    work the call put on torch's current stream had finished, and ``gpu_ms`` of timed work there.

    A call whose work all runs on the current stream leaves the GPU idle when that work ends;
    half the timed work and a little slack cover clocks and the synchronize itself.
    """
    return after_ms > 0.5 * gpu_ms + SYNC_SLACK_MS


def verify_nothing_left_running(yours: Callable[[], Any], gpu_ms: float, label: str, calls: int = 5) -> None:
    """Run a few calls and measure how long the whole GPU stays busy after each call's work on torch's
    current stream has finished; raise :class:`BenchIntegrityError` if that is far more than nothing.

    Why, beside the snapshot in :func:`verify_once`: that snapshot runs on a stream of our own,
    and CUDA maps streams onto a few hardware queues (``CUDA_DEVICE_MAX_CONNECTIONS``), so it can
    queue behind a side stream's work and see the finished result (seen on the H100). A device-wide
    synchronize cannot be fooled that way. The time is taken from the moment the current stream's
    work is seen finished, not from the call's start: another process sharing the GPU delays when a
    call's work starts and ends, but not the gap between its end and an idle GPU (an earlier
    wall-clock comparison took such a busy neighbour for late work).
    """
    import torch

    afters = []
    for _ in range(calls):
        torch.cuda.synchronize()
        done = torch.cuda.Event()
        yours()
        done.record(torch.cuda.current_stream())
        done.synchronize()
        t0 = time.perf_counter()
        torch.cuda.synchronize()
        afters.append((time.perf_counter() - t0) * 1e3)
    after_ms = statistics.median(afters)
    if left_work_running(after_ms, gpu_ms):
        raise BenchIntegrityError(
            f"{label}: the GPU was still busy after the function returned: {after_ms:.3f} ms after the work on "
            f"torch's current stream had finished ({gpu_ms:.3f} ms of work). The timing misses work left running "
            "on another stream: launch on torch's current stream (torch.cuda.current_stream()).")


# --------------------------------------------------------------------------- inputs and cached outputs


def input_nudger(A: Any) -> Callable[[], None]:
    """A function that gives one random element of ``A`` a new value (so no two calls see equal inputs).

    It runs between timed calls, so it must not wait for the GPU: ``flat[i] = v`` copies ``v`` from
    a host tensor (``copy_``), and a blocking host-to-device copy synchronizes the stream, after
    which the GPU idles inside the next timed window while Python launches the kernel. (The likely
    cause of graded timings on an H100 reading 0.3-0.4x cuBLAS for kernels that time at 0.93x
    outside grading.) ``fill_`` passes the value as a kernel argument instead."""
    import random

    flat = A.view(-1)

    def nudge() -> None:
        flat.narrow(0, random.randrange(flat.numel()), 1).fill_(random.gauss(0.0, 1.0))

    return nudge


def verify_once(yours: Callable[[], Any], A: Any, B: Any, out: Any, convention: str, alpha: float, beta: float,
                timeout_s: float | None, label: str) -> None:
    """New input values in the same buffers, a poisoned output, one call: finished on the current
    stream when it returns, no torch computation, and right (fp32 cuBLAS reference, loose tolerance).
    Raises :class:`BenchIntegrityError` otherwise (a cached or hard-coded result is wrong here)."""
    import torch

    A.copy_(torch.randn_like(A, dtype=torch.float32))
    B.copy_(torch.randn_like(B, dtype=torch.float32))
    if convention == "tn":
        out.fill_(float("nan"))
        expect = A.float() @ B.float().T
    else:
        out.copy_(torch.randn_like(out, dtype=torch.float32))
        expect = alpha * (A.float() @ B.float()) + beta * out.float()
    torch.cuda.synchronize()
    with library_guard(True) as used:
        _, on_return = call_and_snapshot(yours, out, DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s, label)
    if used:
        raise BenchIntegrityError(library_message(used))
    got = out.float()
    if not torch.equal(on_return.float().nan_to_num(7.0), got.nan_to_num(7.0)):
        raise BenchIntegrityError(
            f"{label}: the output changed after the function returned, so the timing missed part of the work "
            "(another stream, or work left running): launch on torch's current stream")
    err = float((got - expect).norm() / expect.norm().clamp_min(1e-30))
    if not err <= 2e-2:
        raise BenchIntegrityError(
            f"{label}: after new values were written into the same input buffers, one call gave a relative error "
            f"of {err:.2e}: results must be computed from the inputs on every call, not cached or hard-coded "
            "(run check_gemm first)")


__all__ = [
    "BenchIntegrityError", "DATA_MOVEMENT", "LIBRARY_GEMMS", "NO_COPIES", "SYNC_SLACK_MS", "WatchedCall", "grading_mode",
    "input_nudger", "late_work_message", "left_work_running", "library_guard", "library_message", "verify_nothing_left_running",
    "verify_once", "watched_call",
]
