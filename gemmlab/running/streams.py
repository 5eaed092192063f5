"""CUDA streams: which stream work goes on, waiting for it with a time limit, and the watched stream.

Why a module of its own: kernels run asynchronously, so *when* gemmlab looks at a result decides
what it sees. :func:`synchronize` waits with a deadline (a deadlocked kernel must not freeze the
notebook), :func:`watched_stream` runs a call on a stream no student code was given (so a snapshot
taken when the call returns shows exactly what was finished on the current stream), and
:func:`default_stream_joined` puts work a library queued on CUDA's legacy default stream into the
current stream's order (a CuTe DSL function with no stream argument launches there).
"""
from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, Iterator

from gemmlab.errors import KernelTimeoutError
from gemmlab.running.gpu import require_gpu
from gemmlab.running import faults
from gemmlab.running.device import checked, driver, torch_device

#: Seconds :func:`synchronize` waits by default before calling a kernel hung.
DEFAULT_TIMEOUT_S = 30.0


def stream_handle(stream: Any = None) -> Any:
    """A ``CUstream`` for ``stream`` (torch stream, ``CUstream``, int handle), or torch's current stream."""
    d = driver()
    if stream is None:
        import torch

        return d.CUstream(torch.cuda.current_stream().cuda_stream)
    if isinstance(stream, d.CUstream):
        return stream
    handle = getattr(stream, "cuda_stream", stream)
    return d.CUstream(int(handle))


def hang_message(what: str, timeout_s: float) -> str:
    """What a student reads when GPU work did not finish in time."""
    return (f"{what} did not finish in {timeout_s:g} s — a deadlock on a barrier (e.g. __syncthreads() inside a "
            "branch not all threads take, or waiting on an mbarrier/flag that is never signalled) or an endless "
            "loop? The GPU is still busy with it: restart the Python kernel (Kernel → Restart) before running "
            "anything else on the GPU.")


def synchronize(timeout_s: float = DEFAULT_TIMEOUT_S, stream: Any = None, what: str = "the GPU work",
                flush_printf: bool = False) -> None:
    """Wait for ``stream`` (default: torch's current stream) but give up after ``timeout_s``.

    ``flush_printf``: also make the driver print its device-printf buffer, which it does only at a
    blocking synchronisation, not when an event query finds the work done.

    A blind ``torch.cuda.synchronize()`` on a deadlocked kernel freezes the notebook forever;
    polling an event lets us tell the student what probably happened instead
    (:class:`~gemmlab.errors.KernelTimeoutError`). A kernel's fault raises through
    :mod:`gemmlab.running.faults`.
    """
    require_gpu("Waiting for a kernel")
    faults.raise_if_lost()
    torch_device()
    d = driver()
    handle = stream_handle(stream)
    event = checked(d.cuEventCreate(int(d.CUevent_flags.CU_EVENT_DISABLE_TIMING)), what)
    try:
        checked(d.cuEventRecord(event, handle), what)
        deadline = time.monotonic() + timeout_s
        pause = 1e-5
        while True:
            (result,) = d.cuEventQuery(event)
            name = faults.result_name(result)
            if name == "CUDA_SUCCESS":
                if flush_printf:
                    checked(d.cuCtxSynchronize(), what)  # the work is done: returns at once, after the flush
                return
            if name != "CUDA_ERROR_NOT_READY":
                raise faults.error_for(result, what)
            if time.monotonic() > deadline:
                raise KernelTimeoutError(hang_message(what, timeout_s))
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
    finally:
        if faults.lost_reason() is None:
            d.cuEventDestroy(event)


def check_errors(timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
    """Surface any error from kernels already launched on the current stream (kernels run async)."""
    synchronize(timeout_s=timeout_s, what="a kernel launched earlier")


_private_streams: dict[int, Any] = {}


def private_stream(index: int) -> Any:
    """A non-blocking CUDA stream of gemmlab's own on device ``index``, as a torch stream.

    Why not ``torch.cuda.Stream()``: torch hands out its streams round-robin from a pool of 32
    per device, so a "fresh" torch stream can be the very stream a student's function queued
    work on, and a snapshot queued on it would wait for that work. This stream is created once
    with the driver and is never in torch's pool.
    """
    import torch

    stream = _private_streams.get(index)
    if stream is None:
        d = driver()
        torch_device()
        handle = checked(d.cuStreamCreate(int(d.CUstream_flags.CU_STREAM_NON_BLOCKING)), "creating a CUDA stream")
        stream = torch.cuda.ExternalStream(int(handle), device=torch.device("cuda", index))
        _private_streams[index] = stream
    return stream


@contextlib.contextmanager
def watched_stream() -> Iterator[Any]:
    """Make gemmlab's private stream torch's current stream for the ``with`` body.

    Why: torch's default stream is CUDA's legacy default stream, which synchronizes with every
    blocking stream, so a snapshot taken on it right after a student's function returns could
    wait for work the function left running on a side stream, and "finished when it returned"
    could not be checked. A stream of our own, which no student code was given, runs the
    snapshot as soon as the work queued on it is done; the GPU test of a side-stream launch
    (tests/autograder/test_gpu_grading.py) checks this.
    """
    import torch

    fresh = private_stream(torch.cuda.current_device())
    fresh.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(fresh):
        yield fresh
    torch.cuda.current_stream().wait_stream(fresh)


#: The handle of CUDA's legacy default stream ("stream 0").
LEGACY_DEFAULT_STREAM = 0


@contextlib.contextmanager
def default_stream_joined() -> Iterator[None]:
    """Order work the body queues on CUDA's legacy default stream as if it ran on torch's current stream.

    Why: a library call that takes no stream (a CuTe DSL ``@cute.jit`` function without a
    ``stream`` parameter) launches on the legacy default stream. When torch's current stream is
    another, non-blocking stream (check_gemm's :func:`watched_stream`), the two run unordered: the
    kernel could start before its inputs are written, and a look at the output when the call
    returns would not see its result. An event on each side makes the legacy stream start after
    the current stream's work and the current stream continue after the legacy stream's.
    When the current stream is the legacy stream itself, nothing is needed.
    """
    import torch

    current = torch.cuda.current_stream()
    if int(current.cuda_stream) == LEGACY_DEFAULT_STREAM:
        yield
        return
    legacy = torch.cuda.default_stream(current.device)  # torch's default stream is the legacy one
    legacy.wait_stream(current)
    yield
    current.wait_stream(legacy)


def call_and_snapshot(call: Callable[[], Any], tensor: Any, timeout_s: float, what: str) -> tuple[Any, Any]:
    """``(call(), copy of tensor as it stood when call returned)``, with all GPU work then finished.

    The call runs on :func:`watched_stream`; the snapshot buffer is allocated before it, so
    nothing between its return and the copy can wait on the GPU. A snapshot that differs from
    ``tensor`` afterwards means the call left work running on another stream.
    """
    import torch

    with watched_stream():
        snapshot = torch.empty_like(tensor)
        returned = call()
        snapshot.copy_(tensor)
        synchronize(timeout_s=timeout_s, what=what)
    torch.cuda.synchronize()
    return returned, snapshot


__all__ = [
    "DEFAULT_TIMEOUT_S", "LEGACY_DEFAULT_STREAM", "call_and_snapshot", "check_errors", "default_stream_joined",
    "hang_message", "private_stream", "stream_handle", "synchronize", "watched_stream",
]
