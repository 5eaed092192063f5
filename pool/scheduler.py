"""Fair queueing of judge jobs over a pool of GPUs.

Why round-robin per student, not FIFO per request: one student's burst of ten checks must not
put a classmate's single check behind all ten. Each student has a queue of their own; whenever a
GPU slot frees, the student served least recently (among those waiting) starts their oldest job.

Why slots and one timing per GPU: a check is mostly compile (CPU) and short kernels, so a GPU
takes ``slots_per_gpu`` jobs side by side; but at most one of them may be a timing ("bench", or a
profile: an Nsight Compute readout or a timeline, which hold the GPU alone the same way),
and inside the judge ``bench_gemm`` holds the GPU's timing lock alone while it measures
(gemmlab.timing.timing_lock: checks' kernels wait for it, as in the grader), so a timing never shares
its GPU with anyone's kernels and its ratio to cuBLAS is measured alone on that GPU.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from gemmlab.judge import JudgeReport, JudgeRequest
from gemmlab.judge.protocol import EXCLUSIVE_ACTIONS


#: Requests judged side by side on one GPU. A judge spends most of its seconds starting Python and
#: torch on the CPU while its GPU idles, so a GPU serves many at once: on one H100 host (16 cores,
#: 2026-11-25, benchmarks/pool.py, 30 students thinking 10 s between checks) 4 slots left a median
#: wait of 9.7 s, 12 slots 0.0 s (90th percentile 2.0 s).
DEFAULT_SLOTS_PER_GPU = 12


class Executor(Protocol):
    """Runs one judge request on one GPU of the pool and returns its report (blocking; never raises for the kernel)."""

    def gpus(self) -> Sequence[str]:
        """A label for each GPU of the pool (host and index), in the order ``run`` numbers them."""

    def run(self, gpu: int, request: JudgeRequest, timeout_s: float) -> JudgeReport: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class JobResult:
    """A job's report and where and how long: the GPU's label, seconds queued, seconds running."""

    report: JudgeReport
    gpu: str
    queue_wait_s: float
    run_s: float

    def to_dict(self) -> dict[str, Any]:
        return {"report": self.report.to_dict(), "gpu": self.gpu, "queue_wait_s": round(self.queue_wait_s, 4),
                "run_s": round(self.run_s, 4)}


@dataclass
class Job:
    student: str
    request: JudgeRequest
    submitted: float = field(default_factory=time.monotonic)
    future: "Future[JobResult]" = field(default_factory=Future)

    @property
    def is_timing(self) -> bool:
        """A timing or a profile: it holds its GPU alone, so at most one runs per GPU."""
        return self.request.action in EXCLUSIVE_ACTIONS


@dataclass
class _GpuState:
    running: int = 0
    timing: bool = False


class FairScheduler:
    """Queues jobs per student and starts them round-robin on free GPU slots through an executor."""

    def __init__(self, executor: Executor, slots_per_gpu: int = DEFAULT_SLOTS_PER_GPU,
                 job_timeout_s: float = 300.0) -> None:
        if slots_per_gpu < 1:
            raise ValueError("slots_per_gpu must be at least 1.")
        self.executor = executor
        self.labels = list(executor.gpus())
        if not self.labels:
            raise ValueError("the pool has no GPU to run on.")
        self.slots_per_gpu = slots_per_gpu
        self.job_timeout_s = job_timeout_s
        self._gpus = [_GpuState() for _ in self.labels]
        self._queues: dict[str, deque[Job]] = {}
        self._served: dict[str, int] = {}   # student -> the turn in which their last job started
        self._turn = 0
        self._lock = threading.Lock()
        self._threads = ThreadPoolExecutor(max_workers=len(self.labels) * slots_per_gpu,
                                           thread_name_prefix="pool-job")
        self._closed = False

    # ------------------------------------------------------------------ public

    def submit(self, student: str, request: JudgeRequest) -> Job:
        """Queue ``request`` for ``student``; its ``future`` gets a JobResult."""
        job = Job(student, request)
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is shutting down.")
            self._queues.setdefault(student, deque()).append(job)
            self._dispatch()
        return job

    def cancel(self, job: Job) -> bool:
        """Take ``job`` out of the queue if it has not started (its client left); True if it was removed."""
        with self._lock:
            queue = self._queues.get(job.student)
            if queue is None or job not in queue:
                return False
            queue.remove(job)
            if not queue:
                del self._queues[job.student]
        return job.future.cancel()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"queued": sum(len(q) for q in self._queues.values()),
                    "running": sum(g.running for g in self._gpus)}

    def close(self) -> None:
        """Stop taking jobs, cancel the queued ones, wait for the running ones."""
        with self._lock:
            self._closed = True
            queued = [job for q in self._queues.values() for job in q]
            self._queues.clear()
        for job in queued:
            job.future.cancel()
        self._threads.shutdown(wait=True)

    # ------------------------------------------------------------------ internals (called with the lock held)

    def _gpu_for(self, job: Job) -> int | None:
        fits = [i for i, g in enumerate(self._gpus)
                if g.running < self.slots_per_gpu and not (job.is_timing and g.timing)]
        return min(fits, key=lambda i: (self._gpus[i].running, i)) if fits else None

    def _dispatch(self) -> None:
        while not self._closed:
            # Least recently served first: a student who just started a job waits for everyone else's turn.
            ready = [(self._served.get(s, -1), q[0].submitted, s) for s, q in self._queues.items()
                     if self._gpu_for(q[0]) is not None]
            if not ready:
                return
            student = min(ready)[2]
            queue = self._queues[student]
            job = queue.popleft()
            if not queue:
                del self._queues[student]
            self._turn += 1
            self._served[student] = self._turn
            self._start(job, self._gpu_for(job))  # type: ignore[arg-type]

    def _start(self, job: Job, gpu: int) -> None:
        if not job.future.set_running_or_notify_cancel():
            return
        state = self._gpus[gpu]
        state.running += 1
        state.timing = state.timing or job.is_timing
        self._threads.submit(self._run, job, gpu, time.monotonic())

    # ------------------------------------------------------------------ worker threads

    def _run(self, job: Job, gpu: int, started: float) -> None:
        try:
            report = self.executor.run(gpu, job.request, self.job_timeout_s)
        except Exception as exc:  # noqa: BLE001 - the pool's machinery failed: this job's report says so
            report = JudgeReport("crashed", job.request.action, error=f"the pool's worker failed: "
                                 f"{type(exc).__name__}: {str(exc)[:300]}", error_type="PoolWorkerError")
        ended = time.monotonic()
        with self._lock:
            state = self._gpus[gpu]
            state.running -= 1
            if job.is_timing:
                state.timing = False
            self._dispatch()
        job.future.set_result(JobResult(report, self.labels[gpu], started - job.submitted, ended - started))


__all__ = ["Executor", "FairScheduler", "Job", "JobResult"]
