"""Fan grading out: one worker per GPU on this host, or Ray tasks across hosts.

Each submission is one task that asks for one GPU (Ray: ``num_gpus=1``; Ray places it and sets
``CUDA_VISIBLE_DEVICES``). A task raises only for failures of the grading machinery
(:class:`~autograder.harness.runner.InfraError`) or dies with its worker; both are retried
(``max_retries``). The driver alone writes results (``on_result``), keyed by (assignment,
student, attempt) and overwriting, so a retried or repeated task can never count twice, and
the driver reports every job that still has no result at the end instead of dropping it.
"""
from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from .runner import InfraError, grade_submission

Job = dict
OnResult = Callable[[dict], None]


def _inject_fault(job: Job) -> None:
    """Test hook: ``job["fault"] = {"dir": ..., "kind": "raise"|"exit", "times": n}`` fails the first n
    attempts of this job like an infrastructure failure (an exception, or the worker process dying)."""
    fault = job.get("fault")
    if not fault:
        return
    marks = Path(fault["dir"]) / f"{job['assignment']}-{job['student']}"
    marks.mkdir(parents=True, exist_ok=True)
    if len(list(marks.iterdir())) >= int(fault.get("times", 1)):
        return
    (marks / f"attempt-{os.getpid()}-{len(list(marks.iterdir()))}").touch()
    if fault.get("kind") == "exit":
        os._exit(17)
    raise InfraError("injected infrastructure failure (test)")


def run_job(job: Job) -> dict:
    _inject_fault(job)
    return grade_submission(job)


def grade_local(jobs: list[Job], gpus: list[str | None], on_result: OnResult, retries: int = 2,
                on_error: Callable[[Job, str], None] | None = None) -> None:
    """One worker thread per GPU of this host; each job's sandbox gets that worker's GPU."""
    free: "queue.Queue[str | None]" = queue.Queue()
    for g in gpus or [None]:
        free.put(g)
    lock = threading.Lock()

    def work(job: Job) -> None:
        gpu = free.get()
        try:
            last = ""
            for _ in range(retries + 1):
                try:
                    result = run_job(dict(job, gpu=gpu, worker=f"local gpu {gpu}"))
                except InfraError as exc:
                    last = str(exc)
                    continue
                with lock:
                    on_result(result)
                return
            with lock:
                report(job, last)
        finally:
            free.put(gpu)

    report, raise_failures = _error_sink(on_error)
    with ThreadPoolExecutor(max_workers=max(1, len(gpus or [None]))) as pool:
        for f in [pool.submit(work, job) for job in jobs]:
            f.result()
    raise_failures()


def _error_sink(on_error: Callable[[Job, str], None] | None):
    """``(report, raise_failures)``: jobs whose retries ran out go to ``on_error``; without one they
    are collected and raised together at the end, so a lost grade is never silent."""
    failed: list[str] = []

    def report(job: Job, why: str) -> None:
        if on_error is not None:
            on_error(job, why)
        else:
            failed.append(f"{job.get('assignment')}/{job.get('student')}: {why}")

    def raise_failures() -> None:
        if failed:
            raise InfraError(f"{len(failed)} submission(s) could not be graded:\n" + "\n".join(failed[:20]))

    return report, raise_failures


def grade_ray(jobs: list[Job], on_result: OnResult, address: str | None = None, gpus_per_task: float = 1,
              retries: int = 3, init_kwargs: dict | None = None,
              on_error: Callable[[Job, str], None] | None = None) -> None:
    """Grade on a Ray cluster (``address``: "auto" for a running one; None starts a local one
    with ``init_kwargs``, e.g. ``num_cpus=2, num_gpus=2`` for fake GPUs in tests)."""
    import ray

    started = False
    if not ray.is_initialized():
        kwargs = dict(init_kwargs or {})
        kwargs.setdefault("include_dashboard", False)
        kwargs.setdefault("log_to_driver", False)
        root = str(Path(__file__).resolve().parents[2])
        env = {"env_vars": {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}}
        ray.init(address=address, runtime_env=env, **kwargs)
        started = True

    @ray.remote(num_gpus=gpus_per_task, max_retries=retries, retry_exceptions=[InfraError])
    def task(job: Job) -> dict:
        ids = ray.get_gpu_ids()
        gpu = ",".join(str(int(i)) for i in ids) if ids else None
        return run_job(dict(job, gpu=gpu, worker=f"{ray.util.get_node_ip_address()} gpu {gpu}"))

    report, raise_failures = _error_sink(on_error)
    try:
        pending = {task.remote(job): job for job in jobs}
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
