"""One judgement on one GPU: the judge process, in the grading sandbox where bubblewrap works.

Why here and not in the service: the same function runs in the service's own threads (one
host, no Ray) and inside a Ray actor on any GPU host of a cluster. It starts ``python -m
gemmlab.judge`` (gemmlab.judge.client: a fresh process per request, a wall-clock limit,
bounded reads, an allow-listed environment) with only that GPU visible and that GPU's timing
lock (gemmlab.timing.timing_lock), so a timing measures alone even beside the grader on the same host.
With bubblewrap the judge also runs inside autograder.harness.sandbox's sandbox: no network, a
read-only system, nothing of the repository but gemmlab, size-limited private scratch, as nobody.
"""
from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import Sequence

from gemmlab.judge import JudgeReport, JudgeRequest
from gemmlab.judge.client import judge_command, judge_environment, run_judge
from gemmlab.timing.timing_lock import ENV_PATH as TIMING_LOCK_ENV, lock_file_for


def sandbox_problem() -> str:
    """'' when the judge can run in the grading sandbox on this host, else why not."""
    from autograder.harness.sandbox import check_bwrap

    return check_bwrap()


def judge_on_gpu(request: JudgeRequest, gpu: str, timeout_s: float, sandbox: bool = True,
                 memory_limit_mb: int | None = None, command: Sequence[str] | None = None) -> JudgeReport:
    """Judge ``request`` on GPU ``gpu`` (a CUDA index of this host) and return the report, whatever the kernel does.

    ``command`` is the judge program (default: the GPU judge, ``gemmlab.judge.client.judge_command``).
    ``memory_limit_mb`` bounds the address space of another program; the GPU judge bounds its compile
    itself (CUDA reserves far more address space than it uses).
    """
    if command is None and memory_limit_mb:
        raise ValueError("a GPU judge runs without an address-space limit: CUDA reserves far more address space than "
                         "it uses, so opening its context would fail (out of memory); the judge limits its compile.")
    command = list(command) if command is not None else judge_command()
    payload = request.to_json().encode()
    if not sandbox:
        env = judge_environment()
        env.update({"CUDA_VISIBLE_DEVICES": gpu, TIMING_LOCK_ENV: lock_file_for(gpu)})
        return run_judge(command, payload, timeout_s, env=env, memory_limit_mb=memory_limit_mb)
    from autograder.harness.sandbox import SandboxSpec, bwrap_prefix

    with tempfile.TemporaryDirectory(prefix="gemmlab-pool-") as tmp:
        os.chmod(tmp, 0o777)  # the sandbox's nobody creates its scratch folder here
        spec = SandboxSpec(scratch=Path(tmp) / "scratch", run_dir=Path(tmp), gpu=gpu)
        return run_judge(bwrap_prefix(spec) + command, payload, timeout_s, memory_limit_mb=memory_limit_mb)


class LocalExecutor:
    """The GPUs of this host, each request judged in a process of its own (no Ray)."""

    def __init__(self, gpus: Sequence[str], sandbox: bool = True, memory_limit_mb: int | None = None,
                 command: Sequence[str] | None = None) -> None:
        self._ids = [str(g) for g in gpus]
        self.sandbox, self.memory_limit_mb = sandbox, memory_limit_mb
        self.command = list(command) if command is not None else None
        host = socket.gethostname()
        self._labels = [f"{host} gpu {g}" for g in self._ids]

    def gpus(self) -> list[str]:
        return list(self._labels)

    def run(self, gpu: int, request: JudgeRequest, timeout_s: float) -> JudgeReport:
        return judge_on_gpu(request, self._ids[gpu], timeout_s, self.sandbox, self.memory_limit_mb, self.command)

    def close(self) -> None:
        """Nothing to release: each judge process ends with its request."""


def visible_gpus() -> list[str]:
    """The CUDA indices this host's judges may use: CUDA_VISIBLE_DEVICES if set, else every GPU torch sees."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip() and g.strip() != "-1"]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())]
    except ImportError:
        return []


__all__ = ["LocalExecutor", "judge_on_gpu", "sandbox_problem", "visible_gpus"]
