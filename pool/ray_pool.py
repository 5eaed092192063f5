"""The pool's GPUs on Ray: one actor per GPU, each judging its requests in fresh judge processes.

Why actors, not tasks: the fair queue (pool.scheduler) decides which GPU a job runs on, and
how many jobs and timings a GPU holds, so each GPU needs a name the service can address. An
actor asks Ray for ``num_gpus=1``; Ray places it on a host with a free GPU and sets that GPU as
its ``CUDA_VISIBLE_DEVICES``; it serves up to ``slots_per_gpu`` requests at once in threads,
each in its own judge process (pool.worker.judge_on_gpu), sandboxed on that host.

What is exposed: only what the instructor's network lets through. The service is the only Ray
driver. Ray has no way to listen on loopback alone (its processes bind every interface), so
its own authentication must be on: ``--ray local`` starts a one-host Ray with token
authentication (``RAY_AUTH_MODE=token``, a token Ray generates in ``~/.ray/auth_token``) and
no dashboard; ``--ray auto`` joins a cluster the instructor started, and refuses one whose
driver environment does not say ``RAY_AUTH_MODE=token``. Ray's ports stay behind the cluster's
firewall either way: pool/README.md.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Sequence

from gemmlab.judge import JudgeReport, JudgeRequest

from .errors import PoolError
from .scheduler import DEFAULT_SLOTS_PER_GPU
from .worker import judge_on_gpu

#: Seconds to wait for the GPU actors to be placed at start-up.
START_S = 120.0


class GpuJudge:
    """A Ray actor holding one GPU (Ray's ``num_gpus=1``): judges requests on it."""

    def __init__(self, sandbox: bool, memory_limit_mb: int | None, command: list[str] | None) -> None:
        import ray

        ids = ray.get_gpu_ids()
        self.gpu = str(ids[0]) if ids else os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]
        self.sandbox, self.memory_limit_mb, self.command = sandbox, memory_limit_mb, command
        self.where = f"{ray.util.get_node_ip_address()} gpu {self.gpu}"

    def label(self) -> str:
        return self.where

    def judge(self, request_json: str, timeout_s: float) -> str:
        report = judge_on_gpu(JudgeRequest.from_json(request_json), self.gpu, timeout_s, self.sandbox,
                              self.memory_limit_mb, self.command)
        return report.to_json()


#: The environment variable and value that turn Ray's token authentication on (Ray 2.52 and later).
AUTH_MODE_ENV = "RAY_AUTH_MODE"
AUTH_MODE = "token"


def require_ray_auth(starting_local: bool) -> None:
    """Make sure Ray will demand its token: set it for a Ray we start, insist on it for a cluster we join."""
    mode = os.environ.get(AUTH_MODE_ENV)
    if starting_local and mode is None:
        os.environ[AUTH_MODE_ENV] = AUTH_MODE
        # Ray reads the mode into its config when imported; an imported Ray must read it again, as
        # Ray does itself when it turns authentication on (ray._private.authentication).
        raylet = sys.modules.get("ray._raylet")
        if raylet is not None and hasattr(raylet, "Config"):
            raylet.Config.initialize("")
    elif (mode or "").lower() != AUTH_MODE:
        raise PoolError(f"Ray's token authentication is off ({AUTH_MODE_ENV}={mode or '(unset)'}): anyone who reaches "
                        f"the cluster's ports could run code on it. Start every node and this service with "
                        f"{AUTH_MODE_ENV}={AUTH_MODE} and the cluster's token (`ray get-auth-token --generate`; "
                        "pool/README.md).")


class RayExecutor:
    """``gpus`` GPU actors (default: every GPU of the cluster) behind pool.scheduler's Executor interface.

    ``address``: None starts a private one-host Ray (``init_kwargs`` e.g. ``num_gpus=1`` to fake
    one in tests), "auto" joins a running cluster. A Ray already initialised in this process is
    used as it is and left running. ``command``: the judge program each actor runs (default: the GPU judge).
    """

    def __init__(self, address: str | None = None, sandbox: bool = True, memory_limit_mb: int | None = None,
                 slots_per_gpu: int = DEFAULT_SLOTS_PER_GPU, gpus: int | None = None,
                 init_kwargs: dict[str, Any] | None = None, command: Sequence[str] | None = None) -> None:
        import ray

        self._started = False
        if not ray.is_initialized():
            require_ray_auth(starting_local=address is None)
            kwargs: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False, **(init_kwargs or {})}
            root = str(Path(__file__).resolve().parents[1])
            path = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
            ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": path}}, **kwargs)
            self._started = True
        total = int(ray.cluster_resources().get("GPU", 0))
        count = total if gpus is None else min(gpus, total)
        if count < 1:
            self.close()
            raise PoolError("the Ray cluster has no GPU: start its nodes on GPU hosts (`ray start ... --num-gpus N`).")
        actor = ray.remote(num_gpus=1, max_concurrency=slots_per_gpu, max_restarts=3)(GpuJudge)
        judge = list(command) if command is not None else None
        self._actors = [actor.remote(sandbox, memory_limit_mb, judge) for _ in range(count)]
        try:
            self._labels = ray.get([a.label.remote() for a in self._actors], timeout=START_S)
        except Exception as exc:  # noqa: BLE001 - placement failed: say so, release what started
            self.close()
            raise PoolError(f"the GPU actors did not start within {START_S:.0f} s ({type(exc).__name__}: "
                            f"{str(exc)[:200]}).") from None

    def gpus(self) -> list[str]:
        return list(self._labels)

    def run(self, gpu: int, request: JudgeRequest, timeout_s: float) -> JudgeReport:
        import ray

        ref = self._actors[gpu].judge.remote(request.to_json(), timeout_s)
        return JudgeReport.from_json(ray.get(ref, timeout=timeout_s + 60))

    def close(self) -> None:
        import ray

        for actor in getattr(self, "_actors", []):
            ray.kill(actor)
        self._actors = []
        if self._started and ray.is_initialized():
            ray.shutdown()
        self._started = False


__all__ = ["AUTH_MODE", "AUTH_MODE_ENV", "GpuJudge", "RayExecutor", "START_S", "require_ray_auth"]
