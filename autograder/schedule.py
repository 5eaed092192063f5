"""Fan grading out: one worker per GPU on this host, or Ray tasks across hosts.

Each submission is one task. A submission with a test that needs a GPU
(:func:`needs_gpu`) asks for one (Ray: ``num_gpus=1``; Ray places it and sets
``CUDA_VISIBLE_DEVICES``; locally: a worker with a GPU, when there is one); any other may run
anywhere, GPU-less workers included. A task raises only for failures of the grading machinery
(:class:`~autograder.harness.runner.InfraError`) or dies with its worker; both are retried. Any
other exception is the grader's bug: reported for that student at once, never ending the run. The
driver alone writes results (``on_result``), keyed by (assignment, student, attempt) and
overwriting, so a retried or repeated task can never count twice, and the driver reports every
job that still has no result at the end instead of dropping it.

Jobs start longest first (:func:`longest_first`, guessed from the instructor's notebooks), so a
long notebook never starts alone at the end of a run.

``grade`` is what a worker does with a job: :func:`~autograder.harness.runner.grade_submission`
unless the caller passes another function with the same contract.
"""
from __future__ import annotations

import multiprocessing
import os
import pickle
import threading
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable

from .cell_metadata import notebook_needs_gpu
from .harness.runner import InfraError, grade_submission
from .records import GradeJob, SubmissionResult

Grade = Callable[[GradeJob], SubmissionResult]
OnResult = Callable[[SubmissionResult], None]
OnError = Callable[[GradeJob, str], None]


def needs_gpu(job: GradeJob) -> bool:
    """Whether any notebook of the job has a test the instructor marked as needing a GPU."""
    return any(notebook_needs_gpu(parts.source) for parts in job.notebooks.values())


def expected_cost(job: GradeJob) -> tuple[bool, int]:
    """A guess at how long a job takes, from the instructor's notebooks alone: GPU jobs first, then
    more code cells. Why: started last, one long notebook keeps every other worker idle at the end of
    a run; started first, it overlaps the short ones."""
    cells = sum(1 for parts in job.notebooks.values() if isinstance(parts.source, dict)
                for c in parts.source.get("cells", []) if isinstance(c, dict) and c.get("cell_type") == "code")
    return needs_gpu(job), cells


def longest_first(jobs: list[GradeJob]) -> list[GradeJob]:
    """The jobs in the order to start them: by :func:`expected_cost`, the longest first (stable)."""
    return sorted(jobs, key=expected_cost, reverse=True)


class _Slots:
    """The local workers' GPUs (None: a worker without one), handed out so that a job that needs a
    GPU gets one whenever this host has any, and other jobs take whichever slot is free."""

    def __init__(self, gpus: list[str | None]) -> None:
        self.free, self.cond = list(gpus), threading.Condition()
        self.any_gpu = any(g is not None for g in gpus)

    def take(self, gpu_job: bool) -> str | None:
        with self.cond:
            while True:
                fits = [i for i, g in enumerate(self.free) if g is not None or not (gpu_job and self.any_gpu)]
                if fits:
                    # a job without GPU tests takes a GPU-less slot first, leaving GPUs to those that need them
                    pick = min(fits, key=lambda i: (self.free[i] is None) == gpu_job)
                    return self.free.pop(pick)
                self.cond.wait()

    def give(self, gpu: str | None) -> None:
        with self.cond:
            self.free.append(gpu)
            self.cond.notify_all()


def _grade_in_child(grade: Grade, job: GradeJob, conn: Connection) -> None:
    """A local worker process: grade one job and send back ("ok", result), ("infra", why) or ("bug", why)."""
    try:
        conn.send(("ok", grade(job)))
    except InfraError as exc:
        conn.send(("infra", str(exc)))
    except Exception as exc:  # noqa: BLE001 - reported for this student by the parent
        conn.send(("bug", f"{type(exc).__name__}: {str(exc)[:500]}"))
    finally:
        conn.close()


class _GraderBug(Exception):
    """The grading function raised in a worker process (not infrastructure: not retried)."""


def grade_in_process(grade: Grade, job: GradeJob) -> SubmissionResult:
    """``grade(job)`` in a fresh worker process, as Ray runs each task. Why: local workers were threads
    of one process, and on a 32-core host with two GPUs, with 12 of them each notebook took 100 s
    where with 6 it took 35 s, while 12 Ray worker processes on the same host took 37 s each with the
    CPUs about 60 % idle. A worker that dies (a crash, the memory killer) is lost infrastructure, retried like Ray's."""
    ctx = multiprocessing.get_context("spawn")      # no fork of a process that runs threads
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_grade_in_child, args=(grade, job, send), name=f"grade {job.assignment}/{job.student}")
    child.start()
    send.close()
    try:
        kind, payload = receive.recv()
    except EOFError:
        child.join()
        raise InfraError(f"the grading worker process ended with exit code {child.exitcode} before it "
                         "sent a result") from None
    finally:
        receive.close()
        child.join(timeout=60)
        if child.is_alive():
            child.kill()
            child.join()
    if kind == "ok":
        return payload
    if kind == "infra":
        raise InfraError(payload)
    raise _GraderBug(payload)


def _picklable(fn: Grade) -> bool:
    try:
        pickle.dumps(fn)
        return True
    except Exception:  # noqa: BLE001 - closures, lambdas and the like
        return False


def grade_local(jobs: list[GradeJob], gpus: list[str | None], on_result: OnResult, retries: int = 2,
                on_error: OnError | None = None, grade: Grade = grade_submission,
                processes: bool | None = None) -> None:
    """One worker per entry of ``gpus`` (None: a worker without a GPU); each job's sandbox gets its
    worker's GPU, and a job that needs a GPU waits for a worker with one (if any has).

    ``processes``: grade each job in its own worker process (:func:`grade_in_process`); None (the
    default) does so whenever ``grade`` can be pickled (module-level functions can; a closure runs in
    the worker thread)."""
    slots = _Slots(list(gpus or [None]))
    lock = threading.Lock()
    isolate = _picklable(grade) if processes is None else processes

    def work(job: GradeJob) -> None:
        gpu = slots.take(needs_gpu(job))
        try:
            last = ""
            for _ in range(retries + 1):
                placed = job.on(gpu, f"local gpu {gpu}")
                try:
                    result = grade_in_process(grade, placed) if isolate else grade(placed)
                except InfraError as exc:
                    last = str(exc)
                    continue
                except _GraderBug as exc:
                    last = f"the grader failed ({exc})"
                    break
                except Exception as exc:  # noqa: BLE001 - the grader's bug: this student only, not the run
                    last = f"the grader failed ({type(exc).__name__}: {str(exc)[:500]})"
                    break
                with lock:
                    on_result(result)
                return
            with lock:
                report(job, last)
        finally:
            slots.give(gpu)

    report, raise_failures = _error_sink(on_error)
    with ThreadPoolExecutor(max_workers=max(1, len(gpus or [None]))) as pool:
        for f in [pool.submit(work, job) for job in longest_first(jobs)]:
            f.result()
    raise_failures()


def _error_sink(on_error: OnError | None) -> tuple[OnError, Callable[[], None]]:
    """``(report, raise_failures)``: jobs whose retries ran out go to ``on_error``; without one they
    are collected and raised together at the end, so a lost grade is never silent."""
    failed: list[str] = []

    def report(job: GradeJob, why: str) -> None:
        if on_error is not None:
            on_error(job, why)
        else:
            failed.append(f"{job.assignment}/{job.student}: {why}")

    def raise_failures() -> None:
        if failed:
            raise InfraError(f"{len(failed)} submission(s) could not be graded:\n" + "\n".join(failed[:20]))

    return report, raise_failures


#: How often a local Ray cluster is started before its failure is the run's: Ray gives its raylet a fixed 30 s
#: to register, which a loaded grading host (the normal case) can miss once without anything being wrong.
RAY_START_ATTEMPTS = 3


def start_ray(init: Callable[[], object], shutdown: Callable[[], None], attempts: int = RAY_START_ATTEMPTS) -> None:
    """``init()``, tried again (after ``shutdown()``) when Ray says its node timed out during startup."""
    for attempt in range(1, attempts + 1):
        try:
            init()
            return
        except Exception as exc:  # noqa: BLE001 - Ray raises a bare Exception for this
            if "timed out during startup" not in str(exc) or attempt == attempts:
                raise
            shutdown()


def grade_ray(jobs: list[GradeJob], on_result: OnResult, address: str | None = None, gpus_per_task: float = 1,
              retries: int = 3, init_kwargs: dict | None = None, on_error: OnError | None = None,
              grade: Grade = grade_submission) -> None:
    """Grade on a Ray cluster (``address``: "auto" for a running one; None starts a local one
    with ``init_kwargs``, e.g. ``num_cpus=2, num_gpus=2`` for fake GPUs in tests). A cluster that
    is already initialised in this process is used as it is, and left running."""
    import ray

    started = False
    if not ray.is_initialized():
        kwargs = dict(init_kwargs or {})
        kwargs.setdefault("include_dashboard", False)
        kwargs.setdefault("log_to_driver", False)
        root = str(Path(__file__).resolve().parents[1])
        env = {"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}}
        start_ray(lambda: ray.init(address=address, runtime_env=env, **kwargs), ray.shutdown)
        started = True

    @ray.remote(num_gpus=gpus_per_task, max_retries=retries, retry_exceptions=[InfraError])
    def task(job: GradeJob) -> SubmissionResult:
        ids = ray.get_gpu_ids()
        gpu = ",".join(str(int(i)) for i in ids) if ids else None
        return grade(job.on(gpu, f"{ray.util.get_node_ip_address()} gpu {gpu}"))

    report, raise_failures = _error_sink(on_error)
    try:
        pending = {task.options(num_gpus=gpus_per_task if needs_gpu(job) else 0).remote(job): job
                   for job in longest_first(jobs)}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            job = pending.pop(ref)
            try:
                result = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - retries exhausted: report, never drop silently
                report(job, f"{type(exc).__name__}: {str(exc)[:500]}")
                continue
            on_result(result)
    finally:
        if started:
            ray.shutdown()
    raise_failures()
