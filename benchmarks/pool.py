"""How long does a check wait in the class's GPU pool, and what does the network path add?

Two tables, on one host (the service on 127.0.0.1, judges on one GPU):

1. overhead: the same check judged on the GPU host directly (pool.worker.judge_on_gpu, the
   judge process the service runs) and through the service (HTTP, token, limits, queue), each
   ``--reps`` times on an idle pool; the difference of the medians is the pool's overhead
   (target: at most 0.3 s);
2. a class: ``--students`` simulated students share the GPU, each thinking (an exponential pause
   of mean ``--think-s``) and then checking, ``--checks`` times; the queue wait of each check
   (seconds between arriving at the service and its judge starting) as median and p90
   (target: a median of at most 2 s).

    python benchmarks/pool.py                      # the real judge on GPU 0
    python benchmarks/pool.py --students 30 --checks 5 --think-s 10 --slots-per-gpu 4   # fewer slots than the default
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder.console import table  # noqa: E402
from gemmlab.judge import JudgeRequest, KernelSpec  # noqa: E402
from gemmlab.running.isolate import folder_until_exit  # noqa: E402
from pool.auth import Authenticator  # noqa: E402
from pool.limits import StudentLimits, UsageLedger  # noqa: E402
from pool.scheduler import DEFAULT_SLOTS_PER_GPU, FairScheduler  # noqa: E402
from pool.service import Pool, RunningService  # noqa: E402
from pool.tokens import TokenStore  # noqa: E402
from pool.worker import LocalExecutor, judge_on_gpu, sandbox_problem  # noqa: E402

#: Targets of issue 27: seconds a remote check may add, and the median wait of a class on one GPU.
OVERHEAD_TARGET_S = 0.3
MEDIAN_WAIT_TARGET_S = 2.0

#: One thread per element of D = A·Bᵀ (fp16 in, fp32 accumulation): a small, honest kernel to check.
KERNEL = r"""
#include <cuda_fp16.h>
extern "C" __global__ void gemm_pool_bench(const half* A, const half* B, half* D, int M, int N, int K)
{
  int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)n * K + k]);
  D[(size_t)m * N + n] = __float2half(acc);
}
"""


def check_request() -> JudgeRequest:
    spec = KernelSpec(KERNEL, "gemm_pool_bench", "tn", ("cdiv(N, 16)", "cdiv(M, 16)", "1"), ("16", "16", "1"))
    return JudgeRequest(spec, shapes=[(512, 512, 256), (1000, 1000, 100)])


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _post(url: str, token: str, body: bytes) -> dict[str, Any]:
    req = urllib.request.Request(url + "/v1/judge", data=body, method="POST",
                                 headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def memory_limit(judge: Sequence[str] | None) -> int | None:
    """An address-space limit for a judge program other than the GPU judge (which limits its own compile)."""
    return None if judge is None else 4096


def start_pool(students: list[str], judge: Sequence[str] | None, gpu: str, sandbox: bool,
               slots: int) -> tuple[RunningService, dict]:
    folder = folder_until_exit("gemmlab-poolbench-")    # the roster and its tokens: not kept
    (folder / "roster.csv").write_text("id\n" + "\n".join(students) + "\n")
    store = TokenStore()
    tokens = {t.student: t.token for t in store.issue(students, 86400)}
    store.save(folder / "roster.tokens.json")
    executor = LocalExecutor([gpu], sandbox, memory_limit(judge), judge)
    pool = Pool(Authenticator(folder / "roster.csv", folder / "roster.tokens.json"),
                UsageLedger(StudentLimits(concurrent_jobs=2, gpu_seconds_per_hour=1e9)),
                FairScheduler(executor, slots, job_timeout_s=600))
    return RunningService(pool), tokens


def measure_overhead(reps: int, judge: Sequence[str] | None, gpu: str, sandbox: bool) -> dict[str, Any]:
    """Median seconds of one check judged directly and through the service, their difference, and the device."""
    request = check_request()
    body = request.to_json().encode()
    local, remote = [], []
    device = ""
    service, tokens = start_pool(["s0"], judge, gpu, sandbox, 1)
    with service:
        for _ in range(reps):  # interleaved, so a drift of the host affects both alike
            t0 = time.monotonic()
            device = judge_on_gpu(request, gpu, 600, sandbox, memory_limit(judge), judge).device
            local.append(time.monotonic() - t0)
            t0 = time.monotonic()
            _post(service.url, tokens["s0"], body)
            remote.append(time.monotonic() - t0)
    local_s, remote_s = statistics.median(local), statistics.median(remote)
    return {"local_median_s": local_s, "remote_median_s": remote_s, "overhead_s": remote_s - local_s,
            "device": device}


def simulate_class(students: int, checks: int, think_s: float, judge: Sequence[str] | None, gpu: str, sandbox: bool,
                   slots: int, seed: int = 0) -> dict[str, Any]:
    """Every student's checks through one pool; queue waits and client-side seconds per check."""
    names = [f"student{i:02d}" for i in range(students)]
    service, tokens = start_pool(names, judge, gpu, sandbox, slots)
    body = check_request().to_json().encode()
    waits: list[float] = []
    totals: list[float] = []
    verdicts: list[str] = []
    lock = threading.Lock()

    def student(name: str, rng: random.Random) -> None:
        for _ in range(checks):
            time.sleep(rng.expovariate(1.0 / think_s) if think_s > 0 else 0.0)
            t0 = time.monotonic()
            reply = _post(service.url, tokens[name], body)
            with lock:
                totals.append(time.monotonic() - t0)
                waits.append(reply["queue_wait_s"])
                verdicts.append(reply["report"]["verdict"])

    start = time.monotonic()
    with service:
        threads = [threading.Thread(target=student, args=(n, random.Random(seed * 1000 + i)))
                   for i, n in enumerate(names)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return {"students": students, "checks": len(waits), "passed": verdicts.count("passed"),
            "seconds": time.monotonic() - start, "wait_median_s": statistics.median(waits),
            "wait_p90_s": percentile(waits, 0.9), "total_median_s": statistics.median(totals),
            "total_p90_s": percentile(totals, 0.9)}


def report(overhead: dict[str, Any], load: dict[str, Any], device: str) -> str:
    """The two tables, each with its target and whether it was met."""
    ok = {True: "met", False: "MISSED"}
    first = table([[f"{overhead['local_median_s']:.3f}", f"{overhead['remote_median_s']:.3f}",
                    f"{overhead['overhead_s']:+.3f}", f"<= {OVERHEAD_TARGET_S}",
                    ok[overhead['overhead_s'] <= OVERHEAD_TARGET_S]]],
                  ["local check (s)", "through the pool (s)", "overhead (s)", "target", "verdict"])
    second = table([[str(load["students"]), str(load["checks"]), str(load["passed"]),
                     f"{load['wait_median_s']:.3f}", f"{load['wait_p90_s']:.3f}", f"{load['total_median_s']:.3f}",
                     f"{load['total_p90_s']:.3f}", f"<= {MEDIAN_WAIT_TARGET_S}",
                     ok[load['wait_median_s'] <= MEDIAN_WAIT_TARGET_S]]],
                   ["students", "checks", "passed", "wait median (s)", "wait p90 (s)", "check median (s)",
                    "check p90 (s)", "target (median)", "verdict"])
    return f"device: {device}\n\n1. overhead of one remote check (medians)\n{first}\n\n" \
           f"2. a class sharing one GPU\n{second}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", default="0", help="CUDA index of the GPU the pool uses")
    p.add_argument("--students", type=int, default=30)
    p.add_argument("--checks", type=int, default=3, help="checks per student")
    p.add_argument("--think-s", type=float, default=10.0, help="mean pause before each check")
    p.add_argument("--slots-per-gpu", type=int, default=DEFAULT_SLOTS_PER_GPU)
    p.add_argument("--reps", type=int, default=10, help="checks timed for the overhead")
    p.add_argument("--no-sandbox", action="store_true")
    args = p.parse_args(argv)
    sandbox = not args.no_sandbox
    if sandbox and (why := sandbox_problem()):
        print(f"no sandbox here ({why}); pass --no-sandbox", file=sys.stderr)
        return 2
    overhead = measure_overhead(args.reps, None, args.gpu, sandbox)
    load = simulate_class(args.students, args.checks, args.think_s, None, args.gpu, sandbox,
                          args.slots_per_gpu)
    print(report(overhead, load, overhead["device"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
