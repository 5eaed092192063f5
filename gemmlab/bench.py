"""How fast is this GEMM, and how far from cuBLAS on the same shape?

Times with CUDA events, after a warm-up, with L2 flushed before every repetition (so a
small problem cannot live in cache and look faster than DRAM allows), takes the median,
and measures cuBLAS (through torch) on the same shape, dtypes and convention in the same
call, so the ratio compares like with like on the same clocks.
"""
from __future__ import annotations

import html
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

from .errors import GemmlabError
from .gpu import require_gpu
from .timing_lock import exclusive_timing, shared_gpu_work

_FLUSH_MIN_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class BenchResult:
    """Median times (ms) and TFLOPS for a GEMM function and for cuBLAS on the same problem."""

    shape: tuple[int, int, int]
    convention: str
    dtype: str
    out_dtype: str
    ms: float
    tflops: float
    cublas_ms: float
    cublas_tflops: float
    ratio: float  # your TFLOPS / cuBLAS TFLOPS
    device: str
    reps: int
    label: str = "your kernel"

    @property
    def intensity(self) -> float:
        """Ideal arithmetic intensity (flop/byte) of this problem, for the roofline."""
        from .roofline_math import intensity_ideal

        M, N, K = self.shape
        size = {"float16": 2, "bfloat16": 2, "float32": 4}
        return intensity_ideal(M, N, K, size.get(self.dtype, 2), size.get(self.out_dtype, 2),
                               read_output=self.convention == "nn")

    def __str__(self) -> str:
        M, N, K = self.shape
        return (f"{self.label}: {M}×{N}×{K} {self.convention} {self.dtype}→{self.out_dtype} on {self.device}\n"
                f"  yours : {self.ms:9.4f} ms  {self.tflops:8.1f} TFLOPS\n"
                f"  cuBLAS: {self.cublas_ms:9.4f} ms  {self.cublas_tflops:8.1f} TFLOPS\n"
                f"  ratio : {self.ratio:.2f}× cuBLAS  (median of {self.reps} runs, L2 flushed)")

    def _repr_html_(self) -> str:
        M, N, K = self.shape
        colour = "#e6f4ea" if self.ratio >= 0.8 else "#fff4e5" if self.ratio >= 0.3 else "#fce8e6"
        return (
            f"<table><caption>{html.escape(self.label)}: {M}×{N}×{K} {self.convention} "
            f"{self.dtype}→{self.out_dtype} on {html.escape(self.device)}</caption>"
            "<tr><th></th><th>ms</th><th>TFLOPS</th></tr>"
            f"<tr><td>yours</td><td>{self.ms:.4f}</td><td>{self.tflops:.1f}</td></tr>"
            f"<tr><td>cuBLAS</td><td>{self.cublas_ms:.4f}</td><td>{self.cublas_tflops:.1f}</td></tr>"
            f"<tr style='background:{colour}'><td colspan=3><b>{self.ratio:.2f}× cuBLAS</b> "
            f"(median of {self.reps} runs, L2 flushed)</td></tr></table>"
        )


def _events() -> tuple[Any, Any]:
    import torch

    return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)


def time_cuda(fn: Callable[[], Any], warmup_ms: float = 25.0, rep: int | None = None, rep_ms: float = 100.0,
              flush_l2: bool = True, timeout_s: float | None = None, what: str = "the GEMM",
              gpu_only: bool = False, before_each: Callable[[], Any] | None = None,
              queue_ahead: bool = True) -> list[float]:
    """Milliseconds of each timed call of ``fn()`` on the current stream (L2 flushed before each).

    ``gpu_only=True`` times the GPU work alone: batches of calls are queued behind a GPU sleep
    long enough for Python to enqueue them, so Python's launch overhead (tens of microseconds,
    about as long as a whole large copy) is left out. Each time is then a batch average,
    with no L2 flush between calls. ``before_each`` runs before every timed call, outside the timing.
    ``queue_ahead=False`` enqueues the timed calls one by one as they come (only for comparing
    methods: benchmarks/timing_method.py).
    """
    import torch

    from . import kernel as _kernel

    timeout = _kernel.DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    if gpu_only:
        return _gpu_only_timer(fn, timeout, what)(rep if rep is not None else 20)
    flush = None
    if flush_l2:
        l2 = _kernel._device_attrs(torch.cuda.current_device())["l2_bytes"]
        flush = torch.empty(max(2 * l2, _FLUSH_MIN_BYTES), dtype=torch.int8, device="cuda")

    def sync() -> None:
        _kernel.synchronize(timeout_s=timeout, what=what)

    fn()  # first call: loads modules, JIT, autotuning
    sync()
    start, end = _events()
    start.record()
    for _ in range(5):
        fn()
    end.record()
    sync()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()
    n = rep if rep is not None else max(10, min(1000, int(rep_ms / estimate)))

    def one(pair: tuple[Any, Any]) -> None:
        if flush is not None:
            flush.zero_()
        if before_each is not None:
            before_each()
        pair[0].record()
        fn()
        pair[1].record()

    # Python needs tens of microseconds (a DSL call: ~100) to enqueue one repetition; a 4096³
    # GEMM runs in ~200. Enqueued one by one, the GPU would sit idle inside the timed window
    # waiting for the launch. So each batch of repetitions is queued behind a GPU sleep that
    # outlasts the host's enqueueing, and the events time GPU work only (the flush still runs
    # between repetitions, outside the window).
    sync()
    t0 = time.perf_counter()
    for _ in range(3):
        one(_events())
    host_ms = (time.perf_counter() - t0) / 3 * 1e3
    sync()
    batch = min(n, _BATCH) if queue_ahead else n
    gate_ms = min(1.5 * batch * host_ms + 0.2, _MAX_GATE_MS) if queue_ahead else 0.0
    cycles = int(_sleep_cycles_per_ms() * gate_ms)
    max_cycles = int(_sleep_cycles_per_ms() * _MAX_GATE_MS)
    pairs = [_events() for _ in range(n)]
    for first in range(0, n, batch):
        chunk = pairs[first:first + batch]
        if cycles:
            cycles = _queue_behind_gate(lambda: [one(pair) for pair in chunk], cycles, max_cycles, sync)
        else:
            for pair in chunk:
                one(pair)
    sync()
    return [s.elapsed_time(e) for s, e in pairs]


#: Timed repetitions queued behind one GPU sleep, and the longest such sleep (ms).
_BATCH = 16
_MAX_GATE_MS = 200.0


_SLEEP_CYCLES_PER_MS: dict[int, float] = {}


_GATE_EXTENSIONS = [0]


def gate_extensions() -> int:
    """How many timed batches this process queued again behind a longer GPU sleep (see _next_gate)."""
    return _GATE_EXTENSIONS[0]


def _next_gate(cycles: int, gate_ran_out: bool, max_cycles: int) -> int | None:
    """None when a batch queued behind a ``cycles``-long GPU sleep stands (the GPU was still asleep
    when the host had queued all of it), else the longer sleep to queue it again behind.

    Why: the sleep is counted in GPU clock cycles, calibrated once; when the clock later runs
    faster than at calibration, or Python is slower than measured (a DSL call, a busy host), the
    sleep ends early, the GPU catches up with the host, and its idle time waiting for the next
    launch lands inside a timed window. (A suspect on an H100: the same capstone timed at 0.94x
    and 0.99x cuBLAS in two runs, and at 1.00x under CUDA graphs; ``gate_extensions()`` counts
    how often a gate proved short.)"""
    if not gate_ran_out or cycles >= max_cycles:
        return None
    return min(2 * cycles, max_cycles)


def _queue_behind_gate(enqueue: Callable[[], Any], cycles: int, max_cycles: int,
                       sync: Callable[[], None]) -> int:
    """Queue ``enqueue()``'s GPU work behind a GPU sleep of ``cycles``; again behind a longer one
    while the sleep ran out before the host finished queueing (see _next_gate). Returns the
    cycles that sufficed, for the next batch."""
    import torch

    while True:
        torch.cuda._sleep(cycles)
        asleep = torch.cuda.Event()
        asleep.record()
        enqueue()
        longer = _next_gate(cycles, bool(asleep.query()), max_cycles)
        if longer is None:
            return cycles
        _GATE_EXTENSIONS[0] += 1
        sync()                      # let the spoiled batch finish; its events are recorded again
        cycles = longer


def _sleep_cycles_per_ms() -> float:
    """GPU clock cycles of ``torch.cuda._sleep`` per millisecond on this device (measured once)."""
    import torch

    dev = torch.cuda.current_device()
    if dev not in _SLEEP_CYCLES_PER_MS:
        start, end = _events()
        torch.cuda._sleep(1000)  # warm-up
        start.record()
        torch.cuda._sleep(2_000_000)
        end.record()
        end.synchronize()
        _SLEEP_CYCLES_PER_MS[dev] = 2_000_000 / max(start.elapsed_time(end), 1e-3)
    return _SLEEP_CYCLES_PER_MS[dev]


def _gpu_only_timer(fn: Callable[[], Any], timeout: float, what: str,
                    calls: int = 10) -> Callable[[int], list[float]]:
    """A function timing ``rep`` batches of ``calls`` back-to-back calls of ``fn``, each batch
    queued behind a GPU sleep long enough for Python to enqueue the whole batch, so the GPU
    never waits for the host and launch overhead drops out of the time."""
    from . import kernel as _kernel

    fn()  # first call: loads modules, compiles, allocates workspaces
    _kernel.synchronize(timeout_s=timeout, what=what)
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    host_ms = (time.perf_counter() - t0) / 3 * 1e3
    _kernel.synchronize(timeout_s=timeout, what=what)
    gate = [int(_sleep_cycles_per_ms() * (2.0 * calls * host_ms + 0.2))]
    max_cycles = int(_sleep_cycles_per_ms() * _MAX_GATE_MS)

    def sync() -> None:
        _kernel.synchronize(timeout_s=timeout, what=what)

    def run(rep: int) -> list[float]:
        pairs = [_events() for _ in range(max(1, rep))]
        for s, e in pairs:
            def batch(s=s, e=e) -> None:
                s.record()
                for _ in range(calls):
                    fn()
                e.record()
            gate[0] = _queue_behind_gate(batch, gate[0], max_cycles, sync)
        sync()
        return [s.elapsed_time(e) / calls for s, e in pairs]

    return run


def _cublas_fn(convention: str, A: Any, B: Any, out: Any, alpha: float, beta: float) -> Callable[[], Any]:
    import torch

    if convention == "tn":
        Bt = B.T
        if out.dtype == A.dtype:
            return lambda: torch.matmul(A, Bt, out=out)
        try:  # fp16/bf16 inputs, fp32 output in one cuBLAS call (torch >= 2.9)
            torch.mm(A[:1, :8], Bt[:8, :1], out_dtype=out.dtype)
            return lambda: torch.mm(A, Bt, out_dtype=out.dtype)
        except (TypeError, RuntimeError):
            return lambda: out.copy_(torch.matmul(A, Bt))
    if out.dtype == A.dtype:
        return lambda: out.addmm_(A, B, beta=beta, alpha=alpha)
    return lambda: out.copy_(torch.addmm(out.to(A.dtype), A, B, beta=beta, alpha=alpha))


class BenchIntegrityError(GemmlabError):
    """The timed calls were not honest work of the kernel (cached, unfinished, wrong or a library GEMM)."""


def _nudger(A: Any) -> Callable[[], None]:
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


def _verify_once(yours: Callable[[], Any], A: Any, B: Any, out: Any, convention: str, alpha: float, beta: float,
                 timeout_s: float | None, label: str) -> None:
    """New input values in the same buffers, a poisoned output, one call: finished on the current
    stream when it returns, and right (fp32 cuBLAS reference, loose tolerance)."""
    import torch

    from . import kernel as _kernel

    A.copy_(torch.randn_like(A, dtype=torch.float32))
    B.copy_(torch.randn_like(B, dtype=torch.float32))
    if convention == "tn":
        out.fill_(float("nan"))
        expect = A.float() @ B.float().T
    else:
        out.copy_(torch.randn_like(out, dtype=torch.float32))
        expect = alpha * (A.float() @ B.float()) + beta * out.float()
    torch.cuda.synchronize()
    from .check import library_guard, library_message

    with library_guard(True) as used:
        _, on_return = _kernel.call_and_snapshot(yours, out, _kernel.DEFAULT_TIMEOUT_S if timeout_s is None
                                                 else timeout_s, label)
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


#: Slack for a device-wide synchronize's own latency when comparing wall time with GPU time (ms).
_SYNC_SLACK_MS = 0.1


def left_work_running(wall_ms: float, host_ms: float, gpu_ms: float) -> bool:
    """Whether calls that took ``wall_ms`` from their start to an idle GPU left work behind, given
    ``host_ms`` in Python per call and ``gpu_ms`` of timed work on torch's current stream.

    A call whose work all runs on the current stream is done, at the latest, its Python time
    plus its GPU time after it starts; half the GPU time again and a little slack cover clocks
    and the synchronize itself.
    """
    return wall_ms > host_ms + 1.5 * gpu_ms + _SYNC_SLACK_MS


def _verify_nothing_left_running(yours: Callable[[], Any], gpu_ms: float, label: str, calls: int = 5) -> None:
    """Time a few calls from their start until the whole GPU is idle; raise if that is far longer
    than the work the timing saw on torch's current stream.

    Why, beside the snapshot in :func:`_verify_once`: that snapshot runs on a stream of our own,
    and CUDA maps streams onto a few hardware queues (``CUDA_DEVICE_MAX_CONNECTIONS``), so it can
    queue behind a side stream's work and see the finished result (seen on the H100). A device-wide
    synchronize cannot be fooled that way.
    """
    import torch

    walls, hosts = [], []
    for _ in range(calls):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        yours()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) * 1e3)
        hosts.append((t1 - t0) * 1e3)
    wall_ms, host_ms = statistics.median(walls), statistics.median(hosts)
    if left_work_running(wall_ms, host_ms, gpu_ms):
        raise BenchIntegrityError(
            f"{label}: the GPU was still busy after the function returned: {wall_ms:.3f} ms from a call's start "
            f"until the GPU was idle, but only {gpu_ms:.3f} ms of work ran on torch's current stream (and "
            f"{host_ms:.3f} ms in Python). The timing misses work left running on another stream: launch on "
            "torch's current stream (torch.cuda.current_stream()).")


def bench_gemm(fn: Callable[..., Any], shape: tuple[int, int, int] = (4096, 4096, 4096), convention: str = "tn",
               dtype: Any = None, out_dtype: Any = None, warmup_ms: float = 25.0, rep: int | None = None,
               rep_ms: float = 100.0, flush_l2: bool = True, alpha: float = 1.0, beta: float = 0.0,
               label: str = "your kernel", timeout_s: float | None = None, verify: bool | None = None) -> BenchResult:
    """Median time and TFLOPS (2·M·N·K / t) of ``fn`` and of cuBLAS on the same problem.

    ``fn`` follows gemmlab's conventions: ``fn(A, B, D)`` for "tn", ``fn(A, B, C, alpha, beta)``
    for "nn". Run :func:`gemmlab.check_gemm` first: a fast wrong kernel is not fast.

    ``verify`` (default: on in the course's grader, ``GEMMLAB_GRADING=1``) defeats the known
    benchmark cheats: one input element changes before every timed call (so results cannot be
    cached), library GEMMs inside the timed calls fail, and afterwards the inputs get new values
    in place, the output is poisoned and one call must produce the right result on torch's current
    stream by the time it returns. A failure raises :class:`BenchIntegrityError`.
    """
    require_gpu("bench_gemm")
    import torch

    from . import kernel as _kernel

    if convention not in ("tn", "nn"):
        raise GemmlabError(f"convention must be 'tn' or 'nn', not {convention!r}.")
    M, N, K = (int(v) for v in shape)
    if min(M, N, K) <= 0:
        raise GemmlabError(f"shape must be three positive sizes (M, N, K), not {shape!r}.")
    dtype = torch.float16 if dtype is None else dtype
    out_dtype = dtype if out_dtype is None else out_dtype
    dev = _kernel._torch_device()
    try:
        A = torch.randn((M, K), device=dev).to(dtype)
        B = torch.randn((N, K) if convention == "tn" else (K, N), device=dev).to(dtype)
        out = torch.randn((M, N), device=dev).to(out_dtype)
        ref_out = out.clone()
        if convention == "tn":
            yours = lambda: fn(A, B, out)  # noqa: E731
        else:
            yours = lambda: fn(A, B, out, alpha, beta)  # noqa: E731
        from .check import grading_mode, library_guard, library_message

        check = grading_mode() if verify is None else bool(verify)
        what = f"{label} at {M}×{N}×{K}"
        # Compile, load and run once outside the exclusive timing: as graded GPU work (shared; a compile
        # hands that back), so other graders on this GPU may time meanwhile.
        with shared_gpu_work(), library_guard(check) as used:
            yours()
            _kernel.synchronize(timeout_s=_kernel.DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s, what=what)
        if used:
            raise BenchIntegrityError(library_message(used))
        with exclusive_timing():
            with library_guard(check) as used:
                times = time_cuda(yours, warmup_ms, rep, rep_ms, flush_l2, timeout_s, what=what,
                                  before_each=_nudger(A) if check else None)
            if used:
                raise BenchIntegrityError(library_message(used))
            if check:
                _verify_once(yours, A, B, out, convention, alpha, beta, timeout_s, label)
                _verify_nothing_left_running(yours, statistics.median(times), label)
            cublas = _cublas_fn(convention, A, B, ref_out, alpha, beta)
            ctimes = time_cuda(cublas, warmup_ms, rep, rep_ms, flush_l2, timeout_s, what="cuBLAS")
    except torch.cuda.OutOfMemoryError:
        raise GemmlabError(f"{M}×{N}×{K} does not fit in GPU memory: bench a smaller shape.") from None
    except RuntimeError as exc:
        translated = _kernel.translate_torch_error(exc, f"{label} at {M}×{N}×{K}")
        if translated is exc:
            raise
        raise translated from None
    ms, cms = statistics.median(times), statistics.median(ctimes)
    work = 2.0 * M * N * K
    tflops, ctflops = work / (ms * 1e-3) / 1e12, work / (cms * 1e-3) / 1e12
    return BenchResult((M, N, K), convention, str(dtype).replace("torch.", ""), str(out_dtype).replace("torch.", ""),
                       ms, tflops, cms, ctflops, tflops / ctflops, torch.cuda.get_device_name(dev), len(times), label)


__all__ = ["BenchIntegrityError", "BenchResult", "bench_gemm", "time_cuda"]
