"""Timing GPU work with CUDA events, so Python's launch overhead stays out of the numbers.

The one timer behind ``bench_gemm``, ``ceilings`` and the notebooks' copy timings. Each timed
call is bracketed by CUDA events; batches of calls are queued behind a GPU sleep (the *gate*) that
outlasts the host's enqueueing, so the GPU never idles inside a timed window waiting for Python.
L2 is flushed before each repetition unless asked not to (a small problem could otherwise live in
cache and look faster than DRAM allows), and persisting L2 is reset before every round of timed calls and
must still be off after it (:func:`guard_persisting_l2`: an access-policy window would keep inputs in L2
across the flush). :func:`time_cuda` times what ``fn`` queues on torch's
current stream and nothing else: whether that is all of ``fn``'s work is :mod:`gemmlab.checking.integrity`'s
question. :func:`prepare_timer` warms a function up once and times more calls on demand, so
:func:`interleaved_rounds` can alternate two functions (a kernel and cuBLAS) in rounds: the
method, and what its interval covers, in docs/TIMING.md.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from gemmlab.checking.integrity import BenchIntegrityError
from gemmlab.running import persisting_l2
from gemmlab.running.device import device_attributes
from gemmlab.running.streams import DEFAULT_TIMEOUT_S, synchronize

#: The L2 flush buffer is twice the L2 size, and at least this many bytes.
FLUSH_MIN_BYTES = 256 * 1024 * 1024


def events() -> tuple[Any, Any]:
    """A (start, end) pair of timing CUDA events."""
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
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    if gpu_only:
        return gpu_only_timer(fn, timeout, what)(rep if rep is not None else 20)
    timer = prepare_timer(fn, warmup_ms, flush_l2, timeout_s, what, before_each, queue_ahead)
    n = rep if rep is not None else max(10, min(1000, int(rep_ms / timer.estimate_ms)))
    return timer.run(n)


def guard_persisting_l2(what: str, stream: Any = None) -> Callable[[], None]:
    """Persisting L2 off now (limit 0, lines normal, no window on ``stream``, default torch's current one),
    and a function that raises :class:`BenchIntegrityError` if timed calls made since turned it on again.

    Call it with the GPU idle (the driver's reset is not ordered with queued work); between the two,
    nothing but the timed calls may run. Why: lines of a persisting access window outlive the L2 flush,
    so the timed calls would read their inputs from L2 (docs/THREAT_MODEL.md)."""
    if stream is None:
        import torch

        stream = torch.cuda.current_stream().cuda_stream
    persisting_l2.reset(stream)

    def check() -> None:
        found = persisting_l2.tampering(stream)
        if found:
            persisting_l2.reset(stream)
            raise BenchIntegrityError(
                f"{what}: during the timed calls {found}. Persisting L2 keeps data in cache across the flush "
                "between timed calls, so the time would not be the kernel's: do not set an L2 access-policy window "
                "or a persisting-L2 limit (cudaStreamSetAttribute, cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize)).")

    return check


def l2_flush_buffer() -> Any:
    """A device buffer twice the size of L2 (at least :data:`FLUSH_MIN_BYTES`): zeroing it evicts
    whatever the previous call left in L2. One buffer can serve several timers."""
    import torch

    l2 = device_attributes(torch.cuda.current_device()).l2_bytes
    return torch.empty(max(2 * l2, FLUSH_MIN_BYTES), dtype=torch.int8, device="cuda")


@dataclass(frozen=True)
class PreparedTimer:
    """A function warmed up and ready to be timed: ``run(n)`` times ``n`` more calls (ms each).

    Why a separate step: :func:`bench_gemm` alternates a kernel and cuBLAS in rounds, and warming
    each up once, not once a round, keeps the rounds short and alike."""

    estimate_ms: float                      #: one call, measured during the warm-up
    run: Callable[[int], list[float]]


def prepare_timer(fn: Callable[[], Any], warmup_ms: float = 25.0, flush_l2: bool = True,
                  timeout_s: float | None = None, what: str = "the GEMM",
                  before_each: Callable[[], Any] | None = None, queue_ahead: bool = True,
                  flush_buffer: Any = None) -> PreparedTimer:
    """Call ``fn`` once (modules load, JIT, autotuning), estimate its time, warm it up for
    ``warmup_ms``, and return its :class:`PreparedTimer` (see :func:`time_cuda` for the method).
    ``flush_buffer`` (from :func:`l2_flush_buffer`) is zeroed before each timed call when
    ``flush_l2``; one is allocated when none is given."""
    timeout = DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s
    flush = None
    if flush_l2:
        flush = flush_buffer if flush_buffer is not None else l2_flush_buffer()

    def sync() -> None:
        synchronize(timeout_s=timeout, what=what)

    fn()  # first call: loads modules, JIT, autotuning
    sync()
    start, end = events()
    start.record()
    for _ in range(5):
        fn()
    end.record()
    sync()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        fn()

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
        one(events())
    host_ms = (time.perf_counter() - t0) / 3 * 1e3
    sync()
    max_cycles = int(sleep_cycles_per_ms() * MAX_GATE_MS)
    gate: list[int] = [0]

    def run(n: int) -> list[float]:
        n = max(1, int(n))
        check_l2 = guard_persisting_l2(what)       # the GPU is idle here: the last round, or the warm-up, synced
        batch = min(n, BATCH) if queue_ahead else n
        if queue_ahead:
            wanted = int(sleep_cycles_per_ms() * min(1.5 * batch * host_ms + 0.2, MAX_GATE_MS))
            gate[0] = max(gate[0], wanted)
        pairs = [events() for _ in range(n)]
        for first in range(0, n, batch):
            chunk = pairs[first:first + batch]
            if gate[0]:
                gate[0] = queue_behind_gate(lambda: [one(pair) for pair in chunk], gate[0], max_cycles, sync)
            else:
                for pair in chunk:
                    one(pair)
        sync()
        check_l2()
        return [s.elapsed_time(e) for s, e in pairs]

    return PreparedTimer(estimate, run)


def round_reps(estimate_ms: float, rounds: int, rep: int | None = None, rep_ms: float = 100.0) -> int:
    """Timed calls of one function in each round: ``rep`` if given, else as many as fit in ``rep_ms``
    spread over the rounds, at least :data:`MIN_ROUND_REPS` a round and at most 1000 calls in all."""
    if rep is not None:
        return max(1, int(rep))
    rounds = max(1, int(rounds))
    per_round = int(rep_ms / rounds / max(estimate_ms, 1e-3))
    return max(MIN_ROUND_REPS, min(per_round, 1000 // rounds))


def interleaved_rounds(runs: Sequence[Callable[[int], list[float]]], reps: Sequence[int],
                       rounds: int) -> list[list[list[float]]]:
    """``times[f][r]``: the times of ``runs[f](reps[f])`` in round ``r``. Each round runs every
    function once; odd rounds run them in reverse order, so none is always first (or always
    right after the same neighbour) while clocks and temperature drift over the run."""
    times: list[list[list[float]]] = [[] for _ in runs]
    for r in range(max(1, int(rounds))):
        order = range(len(runs)) if r % 2 == 0 else reversed(range(len(runs)))
        for f in order:
            times[f].append(list(runs[f](reps[f])))
    return times


#: Timed repetitions queued behind one GPU sleep, and the longest such sleep (ms).
BATCH = 16
MAX_GATE_MS = 200.0
#: The fewest timed calls of each function in one round of :func:`interleaved_rounds`: one, so a slow
#: kernel (a naive one takes up to a second at 4096³) is called about as often as before rounds existed.
MIN_ROUND_REPS = 1


_sleep_cycles: dict[int, float] = {}


_gate_extensions = [0]


def gate_extensions() -> int:
    """How many timed batches this process queued again behind a longer GPU sleep (see next_gate)."""
    return _gate_extensions[0]


def next_gate(cycles: int, gate_ran_out: bool, max_cycles: int) -> int | None:
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


def queue_behind_gate(enqueue: Callable[[], Any], cycles: int, max_cycles: int,
                       sync: Callable[[], None]) -> int:
    """Queue ``enqueue()``'s GPU work behind a GPU sleep of ``cycles``; again behind a longer one
    while the sleep ran out before the host finished queueing (see next_gate). Returns the
    cycles that sufficed, for the next batch."""
    import torch

    while True:
        torch.cuda._sleep(cycles)
        asleep = torch.cuda.Event()
        asleep.record()
        enqueue()
        longer = next_gate(cycles, bool(asleep.query()), max_cycles)
        if longer is None:
            return cycles
        _gate_extensions[0] += 1
        sync()                      # let the spoiled batch finish; its events are recorded again
        cycles = longer


def sleep_cycles_per_ms() -> float:
    """GPU clock cycles of ``torch.cuda._sleep`` per millisecond on this device (measured once)."""
    import torch

    dev = torch.cuda.current_device()
    if dev not in _sleep_cycles:
        start, end = events()
        torch.cuda._sleep(1000)  # warm-up
        start.record()
        torch.cuda._sleep(2_000_000)
        end.record()
        end.synchronize()
        _sleep_cycles[dev] = 2_000_000 / max(start.elapsed_time(end), 1e-3)
    return _sleep_cycles[dev]


def gpu_only_timer(fn: Callable[[], Any], timeout: float, what: str,
                    calls: int = 10) -> Callable[[int], list[float]]:
    """A function timing ``rep`` batches of ``calls`` back-to-back calls of ``fn``, each batch
    queued behind a GPU sleep long enough for Python to enqueue the whole batch, so the GPU
    never waits for the host and launch overhead drops out of the time."""
    fn()  # first call: loads modules, compiles, allocates workspaces
    synchronize(timeout_s=timeout, what=what)
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    host_ms = (time.perf_counter() - t0) / 3 * 1e3
    synchronize(timeout_s=timeout, what=what)
    gate = [int(sleep_cycles_per_ms() * (2.0 * calls * host_ms + 0.2))]
    max_cycles = int(sleep_cycles_per_ms() * MAX_GATE_MS)

    def sync() -> None:
        synchronize(timeout_s=timeout, what=what)

    def run(rep: int) -> list[float]:
        sync()
        check_l2 = guard_persisting_l2(what)
        pairs = [events() for _ in range(max(1, rep))]
        for s, e in pairs:
            def batch(s=s, e=e) -> None:
                s.record()
                for _ in range(calls):
                    fn()
                e.record()
            gate[0] = queue_behind_gate(batch, gate[0], max_cycles, sync)
        sync()
        check_l2()
        return [s.elapsed_time(e) / calls for s, e in pairs]

    return run


__all__ = [
    "BATCH", "FLUSH_MIN_BYTES", "MAX_GATE_MS", "MIN_ROUND_REPS", "PreparedTimer", "events", "gate_extensions",
    "gpu_only_timer", "guard_persisting_l2", "interleaved_rounds", "l2_flush_buffer", "next_gate", "prepare_timer",
    "queue_behind_gate",
    "round_reps", "sleep_cycles_per_ms", "time_cuda",
]
