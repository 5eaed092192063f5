"""Which elements of a GEMM kernel's output each thread writes, seen from outside the kernel.

Why: two TiledMMAs can compute the same D while giving each thread (or warp) different elements,
and an exercise about the permutation (notebooks 04 and 04b) must tell them apart without asking
the student's code to report it. A launch with only the first ``t`` threads leaves the other
threads' elements as they were. So D is filled with a marker, the kernel is launched with ``t``
threads and again with ``t + size``, and the elements the second launch writes beyond the first
belong to threads ``t .. t+size-1``. Any stored value counts, even a wrong one (with fewer threads
a shared-memory tile may be only partly filled), so the answer is about who writes, not about what.

    shares = thread_shares(launch, (64, 64, 16), starts=[0, 17], size=1)
    shares[17]          # bool [M, N]: what thread 17 writes and threads 0..16 do not

``launch(A, B, D, threads)`` runs the kernel on A (M x K fp16), B (N x K fp16) and D (M x N fp32)
with ``threads`` threads per CTA. On the GPU (``device="cuda"``) it is the real kernel; tests of the
checks that read the shares pass a stand-in that writes D on the CPU.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from gemmlab.errors import GemmlabError

__all__ = ["MARK", "ThreadShareError", "thread_shares", "written_elements"]

#: The bits D is filled with before a launch: an fp32 NaN whose payload no computed result carries.
MARK = 0x7FBADBAD

Launch = Callable[[Any, Any, Any, int], Any]


class ThreadShareError(GemmlabError, AssertionError):
    """What a thread writes depends on how many threads run, or the request is malformed.

    Also an ``AssertionError``: in a notebook's test it is a failed check."""


def _shape(shape: Sequence[int]) -> tuple[int, int, int]:
    if (not isinstance(shape, (tuple, list)) or len(shape) != 3
            or not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in shape)):
        raise ThreadShareError(f"shape must be (M, N, K), three positive integers, not {shape!r}")
    return tuple(shape)  # type: ignore[return-value]


def written_elements(launch: Launch, shape: Sequence[int], threads: int, device: str = "cuda") -> np.ndarray:
    """Which elements of D one launch with ``threads`` threads per CTA writes: a bool array [M, N].

    A and B are fresh random fp16, D starts as :data:`MARK` everywhere; an element counts as written
    when its bits changed."""
    import torch

    M, N, K = _shape(shape)
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        raise ThreadShareError(f"threads must be a positive integer, not {threads!r}")
    A = torch.randn(M, K, device=device).half()
    B = torch.randn(N, K, device=device).half()
    D = torch.empty(M, N, device=device, dtype=torch.float32)
    D.view(torch.int32).fill_(MARK)
    launch(A, B, D, threads)
    if D.is_cuda:
        torch.cuda.synchronize()
    return (D.view(torch.int32) != MARK).cpu().numpy()


def thread_shares(launch: Launch, shape: Sequence[int], starts: Sequence[int], size: int = 1,
                  device: str = "cuda") -> dict[int, np.ndarray]:
    """``{s: bool [M, N]}``: for each ``s`` in ``starts``, the elements threads ``s .. s+size-1`` write and
    threads ``0 .. s-1`` do not, from launches with ``s`` and ``s + size`` threads (two per start, one
    where ``s`` is 0).

    Raises :class:`ThreadShareError` when the launch with more threads leaves unwritten an element the
    launch with fewer wrote: then what a thread writes depends on how many run, and there is no share."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ThreadShareError(f"size must be a positive integer, not {size!r}")
    M, N, _ = _shape(shape)
    out: dict[int, np.ndarray] = {}
    for s in starts:
        if not isinstance(s, int) or isinstance(s, bool) or s < 0:
            raise ThreadShareError(f"each start must be a thread index (an integer >= 0), not {s!r}")
        before = written_elements(launch, shape, s, device) if s else np.zeros((M, N), dtype=bool)
        after = written_elements(launch, shape, s + size, device)
        lost = before & ~after
        if lost.any():
            r, c = (int(x) for x in np.argwhere(lost)[0])
            raise ThreadShareError(
                f"launched with {s + size} threads the kernel left {int(lost.sum())} elements unwritten that it wrote "
                f"with {s} threads (e.g. row {r}, column {c}): which elements a thread writes must not depend on how "
                "many threads run.")
        out[s] = after & ~before
    return out
