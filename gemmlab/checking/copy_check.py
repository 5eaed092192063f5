"""Is this copy (or transpose) kernel right? Run it on fresh data and say which elements, tiles and threads.

Why a check of its own: the early notebooks' kernels move data instead of computing a product, so
the question is bit-exact (every element of dst equals its element of src, or of srcᵀ), and which
thread wrote what is part of the lesson. The same safeguards as :func:`gemmlab.check_gemm`: fresh
random input, an output poisoned with a marked NaN, every buffer inside guard zones, work left
on another stream caught, and no torch operator that moves values (a copy, a clone, a transpose
made contiguous): the kernel must do the copying. After ``gemmlab.connect`` on a machine without a
GPU, the class's GPU pool runs it and the result names the pool's GPU. :func:`bench_copy` times such
a kernel (GB/s, with the interval of its median).
"""
from __future__ import annotations

import secrets
import statistics
from typing import Any, Callable, Sequence

from gemmlab.errors import ContextLostError, GemmlabError, KernelTimeoutError
from gemmlab.running.gpu import require_gpu
from gemmlab.checking.integrity import NO_COPIES, late_work_message, library_guard, watched_call
from gemmlab.running import faults
from gemmlab.running.device import device_label, torch_device
from gemmlab.dtypes import dtype_name
from gemmlab.running.memory import GuardedMatrix
from gemmlab.running.streams import DEFAULT_TIMEOUT_S
from gemmlab.results import (COPY_DTYPES, MAX_COPY_ELEMENTS, MAX_SIDE, MAX_WHO_ELEMENTS, CopyResult, CopyRow,
                             CopyTiming, Shape2, copy_shape)
from gemmlab.timing.timing_lock import shared_gpu_work
from gemmlab.offload import pool_for_work

#: Side of the tiles the failure map counts wrong elements in.
MAP_TILE = 32



def copy_shapes(shapes: Any) -> list[Shape2]:
    """``shapes`` as a list of (M, N), or a GemmlabError saying what is wrong."""
    if isinstance(shapes, (list, tuple)) and len(shapes) == 2 and all(isinstance(v, int) for v in shapes):
        shapes = [shapes]
    if not isinstance(shapes, (list, tuple)) or not 1 <= len(shapes) <= 32:
        raise GemmlabError("shapes is a list of 1 to 32 (M, N) pairs, e.g. [(96, 256), (32, 64)].")
    return [copy_shape(s) for s in shapes]


def checked_dtype(dtype: Any) -> Any:
    """``dtype`` (default float16) if a copy check moves it, else a GemmlabError naming the choices."""
    import torch

    dtype = torch.float16 if dtype is None else dtype
    if not isinstance(dtype, torch.dtype) or dtype_name(dtype) not in COPY_DTYPES:
        raise GemmlabError(f"dtype must be torch.float16, torch.bfloat16 or torch.float32, not {dtype}.")
    return dtype


def check_copy(fn: Callable[..., Any], shapes: Any = ((128, 256),), dtype: Any = None, *, transpose: bool = False,
               who: bool = False, timeout_s: float | None = None) -> CopyResult:
    """Check that ``fn(src, dst)`` copies src into dst (``transpose``: dst = srcᵀ, dst is N×M) on every (M, N).

    ``who=True`` calls ``fn(src, dst, who)`` with a third, int32 M×N tensor filled with -1, in which the kernel
    writes the index of the thread that copied each element; each row then carries that map (``result.who(shape)``)
    for the notebook to compare with its layout's prediction. Inputs are fresh random values; dst starts as a
    marked NaN. ``fn`` may allocate, view and fill, but not copy with torch: the kernel must move the data.
    """
    dtype = checked_dtype(dtype)
    shapes = copy_shapes(shapes)
    pool = pool_for_work()
    if pool is not None:   # gemmlab.connect(...) on a machine without a GPU: the class's GPU pool checks it
        if who and sum(M * N for M, N in shapes) > MAX_WHO_ELEMENTS:
            raise GemmlabError(f"who=True on the class's GPU pool sends back a thread index per element; keep the "
                               f"shapes of one call at {MAX_WHO_ELEMENTS:,} elements or fewer in all there.")
        return pool.check_copy(fn, shapes, dtype, transpose=bool(transpose), who=bool(who), timeout_s=timeout_s)
    require_gpu("check_copy")
    import torch

    dev = torch_device()
    seed = secrets.randbits(62)
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
    rows = []
    for shape in shapes:
        try:
            with shared_gpu_work():
                rows.append(_check_one(fn, shape, dtype, bool(transpose), bool(who), gen, dev, timeout))
        except (ContextLostError, KernelTimeoutError):
            raise
        except GemmlabError as exc:     # the launcher refused this shape: record it, keep going
            rows.append(CopyRow(shape, False, 0, 0, True, True, f"{type(exc).__name__}: {exc}"))
        except RuntimeError as exc:
            translated = faults.translate(exc, f"the copy of {shape[0]}×{shape[1]}")
            if translated is exc:
                raise
            raise translated from None
    return CopyResult(rows, dtype_name(dtype), bool(transpose), seed, device_label(dev), bool(who))



def bench_copy(fn: Callable[..., Any], shape: Any = (8192, 8192), dtype: Any = None, *, transpose: bool = False,
               batches: int = 20, timeout_s: float | None = None) -> CopyTiming:
    """Time ``fn(src, dst)`` on an M×N copy (``transpose``: dst = srcᵀ) and return its bandwidth.

    One call is checked first (bit for bit, torch copies forbidden, as :func:`check_copy` does): a wrong copy is
    not timed. The timed calls are queued behind a GPU sleep, so Python's launch overhead is not counted, and hold
    the GPU alone (the timing lock). They alternate between two sources of different random values into one dst,
    so every call has a whole copy to do (a kernel that skips work it finds done, or does a share of it per call,
    leaves dst unequal to the last source); then one more checked call on fresh values. After ``gemmlab.connect``
    on a machine without a GPU the class's GPU pool times it on its GPU (always with 20 batches).
    """
    from gemmlab.checking.integrity import BenchIntegrityError

    dtype = checked_dtype(dtype)
    shape = copy_shape(shape)
    if isinstance(batches, bool) or not isinstance(batches, int) or not 6 <= batches <= 100:
        raise GemmlabError(f"batches is a whole number from 6 to 100, not {batches!r:.20}.")
    pool = pool_for_work()
    if pool is not None:
        if batches != 20:
            raise GemmlabError("bench_copy on the class's GPU pool times 20 batches; leave batches= out there.")
        return pool.bench_copy(fn, shape, dtype, transpose=bool(transpose), timeout_s=timeout_s)
    require_gpu("bench_copy")
    import torch

    from gemmlab.timing.events import time_cuda
    from gemmlab.timing.timing_lock import exclusive_timing

    dev = torch_device()
    gen = torch.Generator(device=dev)
    gen.manual_seed(secrets.randbits(62))
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else float(timeout_s)
    with shared_gpu_work():
        row = _check_one(fn, shape, dtype, bool(transpose), False, gen, dev, timeout)
    if not row.passed:
        raise BenchIntegrityError(f"the copy is not timed: its checked call failed: {row.message}")
    M, N = shape
    # Guarded like the checked call's buffers, so a kernel cannot tell timed calls from checked ones by looking around.
    sources = [GuardedMatrix((M, N), dtype, dev) for _ in range(2)]
    for source in sources:
        source.tensor.copy_(torch.randn((M, N), generator=gen, device=dev))
    dst = GuardedMatrix((N, M) if transpose else (M, N), dtype, dev)
    calls = [0]

    def next_copy() -> None:
        calls[0] += 1
        fn(sources[calls[0] % 2].tensor, dst.tensor)

    with exclusive_timing():
        times = time_cuda(next_copy, rep=batches, gpu_only=True, flush_l2=False, timeout_s=timeout,
                          what=f"the copy of {M}×{N}")
    last = sources[calls[0] % 2].tensor
    if not torch.equal(dst.tensor, last.T if transpose else last) or dst.guard_writes() != (0, 0):
        raise BenchIntegrityError("the copy's timed calls left dst unequal to the last source they were given (they "
                                  "alternate between two): each call must copy the whole matrix.")
    with shared_gpu_work():
        again = _check_one(fn, shape, dtype, bool(transpose), False, gen, dev, timeout)
    if not again.passed:
        raise BenchIntegrityError(f"the copy's checked call after the timing failed: {again.message}")
    refuse_copy_faster_than_dram(times, M * N * dst.elem, dev.index, f"the copy of {M}×{N}")
    from gemmlab.timing.spread import median_interval

    moved = 2 * M * N * dst.elem / 1e9      # GB read and written
    median = statistics.median(times)
    low, high, coverage = median_interval(times)
    return CopyTiming(shape, dtype_name(dtype), bool(transpose), median, moved / (median / 1e3),
                      moved / (high / 1e3), moved / (low / 1e3), coverage, len(times), device_label(dev))


def refuse_copy_faster_than_dram(times_ms: Sequence[float], source_bytes: int, device_index: int, what: str) -> None:
    """Refuse times in which a source of at least twice the L2 size (so it comes from DRAM on every call:
    the timed calls alternate between two) could not even have been read at DRAM's theoretical peak."""
    from gemmlab.running.device import device_attributes
    from gemmlab.timing.speed_of_light import peak_rates, refuse_faster_than_light

    rates = peak_rates(device_index)
    if rates.dram_gbps and source_bytes >= 2 * device_attributes(device_index).l2_bytes:
        refuse_faster_than_light(times_ms, source_bytes / (rates.dram_gbps * 1e9) * 1e3, what)


def _check_one(fn: Callable[..., Any], shape: Shape2, dtype: Any, transpose: bool, who: bool, gen: Any, dev: Any,
               timeout: float) -> CopyRow:
    import torch

    M, N = shape
    src = GuardedMatrix((M, N), dtype, dev)
    dst = GuardedMatrix((N, M) if transpose else (M, N), dtype, dev)
    src.tensor.copy_(torch.randn((M, N), generator=gen, device=dev))
    src_before = src.bits.clone()
    dst.poison()
    owner = GuardedMatrix((M, N), torch.int32, dev) if who else None
    args: tuple = (src.tensor, dst.tensor)
    if owner is not None:
        owner.body_bits().fill_(-1)
        args += (owner.tensor,)
    copied: list[str] = []

    def call() -> Any:   # copies are watched in fn alone: gemmlab's own snapshot of dst after it is a copy too
        with library_guard(True, NO_COPIES) as seen:
            try:
                return fn(*args)
            finally:
                copied.extend(seen)

    watched = watched_call(call, dst.bits, timeout, f"the copy of {M}×{N}", False)
    if copied or watched.late_elements:
        message = _torch_message(copied) if copied else late_work_message(watched.late_elements)
        return CopyRow(shape, False, M * N, 0, True, True, message)
    want = src.body_bits().T if transpose else src.body_bits()
    got = dst.body_bits()
    unwritten = got == dst.poison_value
    bad = got != want
    n_bad, n_unwritten = int(bad.sum()), int(unwritten.sum())
    guards = [g.guard_writes() for g in (src, dst) + ((owner,) if owner is not None else ())]
    guard_ok = all(g == (0, 0) for g in guards)
    input_ok = bool(torch.equal(src.bits, src_before))
    tiles: tuple[tuple[int, int], ...] = ()
    if n_bad:
        rows_, cols_ = torch.nonzero(bad, as_tuple=True)
        tiles = tuple(sorted({(int(r) // MAP_TILE, int(c) // MAP_TILE) for r, c in zip(rows_[:4096], cols_[:4096])}))[:8]
    passed = n_bad == 0 and guard_ok and input_ok
    message = "ok" if passed else copy_failure_message(shape, transpose, n_bad, n_unwritten, tiles, guard_ok, input_ok)
    return CopyRow(shape, passed, n_bad, n_unwritten, guard_ok, input_ok, message, tiles,
                   owner.tensor.cpu().numpy() if owner is not None else None)


def _torch_message(seen: list[str]) -> str:
    return (f"your function used {', '.join(sorted(set(seen)))} (torch) to move or compute values: the copy must be "
            "your kernel's work; a launcher may only allocate, view and fill")


def copy_failure_message(shape: Shape2, transpose: bool, n_bad: int, n_unwritten: int, tiles: tuple[tuple[int, int], ...],
             guard_ok: bool, input_ok: bool) -> str:
    M, N = shape
    parts = []
    if n_bad:
        what = "srcᵀ" if transpose else "src"
        parts.append(f"{n_bad:,} of {M * N:,} elements of dst differ from {what} ({n_unwritten:,} never written); "
                     f"first wrong {MAP_TILE}×{MAP_TILE} tiles of dst (tile row, tile column): {list(tiles)}")
    if not guard_ok:
        parts.append("the kernel wrote outside the matrices (a guard zone before or after one changed): check "
                     "the bounds of the last tile and the row pitch")
    if not input_ok:
        parts.append("src changed: the kernel must only read it")
    return "; ".join(parts) if parts else "failed"


__all__ = ["COPY_DTYPES", "MAP_TILE", "CopyResult", "CopyRow", "CopyTiming", "bench_copy", "MAX_COPY_ELEMENTS", "MAX_SIDE", "MAX_WHO_ELEMENTS",
           "check_copy", "checked_dtype", "copy_shapes", "copy_failure_message"]
