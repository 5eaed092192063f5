"""NVIDIA's way of timing a GEMM: back to back, clocks settled, operands rotated, many iterations.

CUTLASS's "GEMM performance measurement methodology guidelines" (CUTLASS 4.6) describe a *fixed-power*
test, the GPU as it ships (power-capped, clocks free), in this order:

1. **Warm up until the clock settles**: run the GEMM back to back; from idle the SM clock oscillates
   for about the first 3 seconds before it settles (:class:`SteadyPlan` ``warmup_s``; longer while the
   sampled clock still drifts, up to ``max_warmup_s``: :func:`gemmlab.timing.clock_sampler.settled`).
2. **Time many iterations back to back**: more than 1,000 at 4096³, more for smaller problems
   (:func:`steady_iterations`), with no other GPU work between launches: no L2 flush, no input nudge,
   and no gap while Python launches (the calls are replayed from a CUDA graph where they can be captured).
   Events mark :attr:`SteadyPlan.blocks` equal blocks of them, so the run yields per-block times
   (the spread of the method, docs/TIMING.md).
3. **Rotate the operands** instead of flushing L2: copies of every operand whose inputs total at least
   twice the L2 size (at least two copies, :func:`rotation_sets`), used in turn, so each call finds its
   inputs evicted by the calls between.
4. **Cool down**: leave the GPU idle (1 s) before the next test.

:func:`steady_phase` runs steps 1, 2 and 4 for one function over a :class:`BackToBack` (the GPU one is
:class:`DeviceBackToBack`; tests pass a fake with a simulated clock). The caller (``bench_gemm(...,
method="nvidia")``) builds the rotated operands, runs one phase for the kernel and one for cuBLAS, and
reads the clock and power sampled during each phase's timed window.
"""
from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from gemmlab.timing.clock_sampler import Sampler, settled

#: Length of one warm-up chunk of back-to-back calls (GPU ms), and how many may be queued at once.
CHUNK_MS = 50.0
CHUNKS_AHEAD = 2
#: GPU time of one captured graph of calls (ms), and the most calls one graph holds.
GRAPH_MS = 2.0
MAX_GRAPH_CALLS = 1000


@dataclass(frozen=True)
class SteadyPlan:
    """The numbers of NVIDIA's method (defaults from its guidelines; tests and tuning runs shrink them)."""

    warmup_s: float = 3.0            #: back-to-back work before timing: the clock settles in about 3 s
    max_warmup_s: float = 8.0        #: more while the sampled clock still drifts, up to this
    settle_window_s: float = 1.0     #: the clock counts as settled when its means over fifths of this window
    settle_tolerance: float = 0.01   #: ... agree within this fraction (gemmlab.timing.clock_sampler.settled)
    min_iterations: int = 1000       #: "greater than 1000 testing iterations" at ~4096³
    min_timed_ms: float = 200.0      #: smaller problems: as many iterations as fill this
    max_timed_ms: float = 10_000.0   #: slow kernels: no more than fill this (at least one a block)
    max_iterations: int = 100_000
    blocks: int = 12                 #: event-marked blocks of the timed iterations
    cooldown_s: float = 1.0          #: idle GPU after each phase

    def __post_init__(self) -> None:
        if self.blocks < 1 or self.min_iterations < 1 or self.warmup_s < 0 or self.cooldown_s < 0 \
                or self.max_warmup_s < self.warmup_s:
            raise ValueError(f"an impossible SteadyPlan: {self}")


def steady_iterations(estimate_ms: float, plan: SteadyPlan) -> int:
    """Timed iterations for a call of about ``estimate_ms``: at least ``min_iterations`` (and enough to fill
    ``min_timed_ms``), but no more than fill ``max_timed_ms`` or ``max_iterations``; at least one a block."""
    estimate = max(float(estimate_ms), 1e-4)
    wanted = max(plan.min_iterations, math.ceil(plan.min_timed_ms / estimate))
    cap = min(plan.max_iterations, int(plan.max_timed_ms / estimate))
    return max(plan.blocks, min(wanted, cap))


def rotation_sets(input_bytes: int, l2_bytes: int) -> int:
    """Copies of the operands to rotate through: inputs of at least twice the L2 size in all, and at least 2."""
    return max(2, math.ceil(2 * int(l2_bytes) / max(1, int(input_bytes))))


@dataclass(frozen=True)
class TimedBlocks:
    """What :meth:`BackToBack.timed_blocks` measured."""

    block_ms: list[float]                  #: mean ms per call of each block
    calls_per_block: list[int]
    window: tuple[float, float]            #: host monotonic times the GPU spent on the timed blocks
    launch_bound: bool                     #: the GPU caught up with the host: gaps between launches were timed


class BackToBack(Protocol):
    """Calls of one function issued back to back (each on the next rotated operand set)."""

    estimate_ms: float

    def busy(self, seconds: float) -> None:
        """Keep the GPU busy with back-to-back calls for about ``seconds``; return with work still queued."""

    def timed_blocks(self, iterations: int, blocks: int) -> TimedBlocks:
        """Time ``iterations`` back-to-back calls in ``blocks`` event-marked blocks; wait for them to finish."""


@dataclass(frozen=True)
class SteadyPhase:
    """One function's phase: warm-up, timed blocks, cool-down."""

    timed: TimedBlocks
    iterations: int
    warmup_s: float
    settled: bool | None                   #: None: no clock samples to tell


def steady_phase(calls: BackToBack, plan: SteadyPlan, sampler: Sampler | None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 warmup_chunk_s: float = 0.25) -> SteadyPhase:
    """Warm ``calls`` up until the clock settles (``plan.warmup_s`` at least), time its iterations, cool down."""
    start = clock()
    was_settled: bool | None = None
    while True:
        calls.busy(warmup_chunk_s)
        elapsed = clock() - start
        if elapsed < plan.warmup_s:
            continue
        if sampler is None:
            break
        was_settled = settled(sampler.samples(), clock(), plan.settle_window_s, plan.settle_tolerance)
        if was_settled or elapsed >= plan.max_warmup_s:
            break
    warmed = clock() - start
    iterations = steady_iterations(calls.estimate_ms, plan)
    timed = calls.timed_blocks(iterations, plan.blocks)
    sleep(plan.cooldown_s)
    return SteadyPhase(timed, iterations, warmed, was_settled)


def paired_rounds(kernel: SteadyPhase, cublas: SteadyPhase) -> tuple[list[list[float]], list[list[float]]]:
    """Rounds for :func:`gemmlab.timing.bench.result_from_rounds`: block ``j`` of the kernel's phase against block
    ``j`` of cuBLAS's (each a mean ms per call), so each round's ratio compares the same stretch of a phase."""
    if len(kernel.timed.block_ms) != len(cublas.timed.block_ms):
        raise ValueError("the two phases were timed in different numbers of blocks")
    return [[ms] for ms in kernel.timed.block_ms], [[ms] for ms in cublas.timed.block_ms]


def split_blocks(iterations: int, blocks: int) -> list[int]:
    """``iterations`` split into ``blocks`` near-equal counts (the first ones one larger)."""
    base, extra = divmod(int(iterations), int(blocks))
    return [base + (1 if b < extra else 0) for b in range(blocks)]


def wait_for(timeout_s: float, what: str) -> Callable[[Any], None]:
    """A function that waits for a recorded torch event, raising gemmlab's timeout error (naming ``what``)
    when it has not completed after ``timeout_s``, instead of hanging."""
    from gemmlab.running.streams import synchronize

    def wait(event: Any) -> None:
        deadline = time.monotonic() + timeout_s
        pause = 1e-5
        while not event.query():
            if time.monotonic() > deadline:
                synchronize(timeout_s=0.0, what=what)      # still busy: raises KernelTimeoutError
            time.sleep(pause)
            pause = min(2 * pause, 0.005)
    return wait


def measure_estimate(call: Callable[[int], Any], sets: int, wait: Callable[[Any], None], calls: int = 5) -> float:
    """Milliseconds of one call of ``call(i)``: one untimed call, then ``calls`` timed back to back."""
    import torch

    call(0)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(calls):
        call((i + 1) % sets)
    end.record()
    wait(end)
    return max(start.elapsed_time(end) / calls, 1e-3)


def graph_calls(estimate_ms: float, sets: int) -> int:
    """Calls in one captured CUDA graph: a whole number of rotations lasting about :data:`GRAPH_MS` on the GPU
    (at most :data:`MAX_GRAPH_CALLS`), so replaying it costs the host microseconds for milliseconds of work."""
    rotations = max(1, math.ceil(GRAPH_MS / max(float(estimate_ms), 1e-4) / sets))
    return max(sets, min(rotations * sets, max(sets, MAX_GRAPH_CALLS // sets * sets)))


def rounded_blocks(counts: list[int], unit: int) -> list[int]:
    """Each block's count rounded up to a whole number of ``unit`` calls (a graph replays whole)."""
    return [max(unit, math.ceil(c / unit) * unit) for c in counts]


class DeviceBackToBack:
    """:class:`BackToBack` on the GPU: ``call(i)`` runs the function on operand set ``i % sets``.

    Why a CUDA graph: Python needs tens of microseconds to launch a call (a CuTe DSL call about a
    hundred), as long as a 4096³ GEMM runs; launched one by one, a function with a slow launcher would be
    timed with gaps between its calls, which the method forbids, while cuBLAS's fast launcher leaves
    none. So the calls are captured once into a graph of :func:`graph_calls` calls (a whole number of
    rotations) and the graph is replayed; a function that cannot be captured is called one by one
    (``graphed`` says which). Warm-up keeps at most :data:`CHUNKS_AHEAD` chunks of :data:`CHUNK_MS`
    queued, so the GPU never waits for the host and the host never runs far ahead; the timed blocks
    follow the last warm-up chunk in the queue with no pause between them."""

    def __init__(self, call: Callable[[int], Any], sets: int, estimate_ms: float,
                 wait: Callable[[Any], None], use_graph: bool = True) -> None:
        self.call, self.sets, self.estimate_ms = call, int(sets), float(estimate_ms)
        self._wait = wait                      # waits for one recorded event (with the caller's time limit)
        self._next = 0
        self._queued: deque[Any] = deque()
        self._graph: Any = None
        self.unit = 1                          # calls one issue step makes (a graph's, or one)
        self.graphed = False
        if use_graph:
            self._capture()

    def _capture(self) -> None:
        import torch

        calls = graph_calls(self.estimate_ms, self.sets)
        graph = torch.cuda.CUDAGraph()
        try:
            # A few calls on a side stream first, as torch asks before a capture (cuBLAS sets up its workspace).
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for i in range(min(3, self.sets)):
                    self.call(i)
            torch.cuda.current_stream().wait_stream(side)
            with torch.cuda.graph(graph):
                for i in range(calls):
                    self.call(i % self.sets)
        except Exception:  # noqa: BLE001 - not capturable (it synchronizes, allocates, ...): one call at a time
            torch.cuda.synchronize()
            return
        self._graph, self.unit, self.graphed = graph, calls, True

    def _issue(self, count: int) -> None:
        """``count`` calls (a whole number of graph replays when graphed: ``count`` is a multiple of ``unit``)."""
        if self._graph is not None:
            for _ in range(count // self.unit):
                self._graph.replay()
            return
        for _ in range(count):
            self.call(self._next % self.sets)
            self._next += 1

    def busy(self, seconds: float) -> None:
        import torch

        per_chunk = rounded_blocks([max(1, int(CHUNK_MS / max(self.estimate_ms, 1e-3)))], self.unit)[0]
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._issue(per_chunk)
            done = torch.cuda.Event()
            done.record()
            self._queued.append(done)
            while len(self._queued) > CHUNKS_AHEAD:
                self._wait(self._queued.popleft())

    def timed_blocks(self, iterations: int, blocks: int) -> TimedBlocks:
        import torch

        counts = rounded_blocks(split_blocks(iterations, blocks), self.unit)
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(len(counts) + 1)]
        marks[0].record()
        for b, count in enumerate(counts):
            self._issue(count)
            marks[b + 1].record()
        enqueued = time.monotonic()
        self._wait(marks[-1])
        self._queued.clear()
        done = time.monotonic()
        gpu_ms = marks[0].elapsed_time(marks[-1])
        block_ms = [marks[b].elapsed_time(marks[b + 1]) / counts[b] for b in range(len(counts))]
        caught_up = (done - enqueued) * 1e3 < max(1.0, 2 * self.estimate_ms * self.unit)
        return TimedBlocks(block_ms, counts, (done - gpu_ms / 1e3, done), caught_up)


__all__ = ["BackToBack", "CHUNKS_AHEAD", "CHUNK_MS", "DeviceBackToBack", "GRAPH_MS", "MAX_GRAPH_CALLS", "graph_calls",
           "rounded_blocks", "SteadyPhase", "SteadyPlan", "TimedBlocks",
           "measure_estimate", "paired_rounds", "rotation_sets", "split_blocks", "steady_iterations", "steady_phase",
           "wait_for"]
