#!/usr/bin/env python3
"""How long a CuTe DSL GEMM cell takes to compile, to re-run, and to take a new shape.

    python benchmarks/dsl_compile.py [--arch sm_90a] [--kernel tensorop|simple]

Each "cold" number comes from a fresh Python process (DSL imported first, then the
timed compile), so nothing is warm that a student's first run would not have warm.
Targets: the GEMM compile <= 2 s on a 2-core CPU machine (<= 1 s on the GPU machine's CPU),
a re-run of an unchanged cell <= 0.05 s.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNELS = {"tensorop": "tests.dsl_kernels.tensorop_gemm", "simple": "tests.dsl_kernels.simple_gemm"}

CHILD = r"""
import importlib, json, sys, time
t0 = time.perf_counter()
import torch, gemmlab.dsl as dsl
from gemmlab.dsl.env import load
load()
t_import = time.perf_counter() - t0
module = importlib.import_module(sys.argv[1])
arch = sys.argv[2]
def tn(m, n, k):
    return (torch.empty(m, k, dtype=torch.float16), torch.empty(n, k, dtype=torch.float16),
            torch.empty(m, n, dtype=torch.float16))
t0 = time.perf_counter(); k = dsl.compile(module.gemm, *tn(4096, 4096, 4096), arch=arch); cold = time.perf_counter() - t0
print(json.dumps({"import": t_import, "cold": cold, "dsl_compile": k.compile_seconds,
                  "registers": k.resources.registers if k.resources else None}))
"""


def cold_run(module: str, arch: str) -> dict:
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    out = subprocess.run([sys.executable, "-c", CHILD, module, arch], capture_output=True, text=True, env=env,
                         cwd=ROOT, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"cold compile failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default=None, help="target (default: this GPU, or sm_90a without one)")
    ap.add_argument("--kernel", choices=sorted(KERNELS), default="tensorop")
    ap.add_argument("--repeat", type=int, default=2, help="fresh processes for the cold compile")
    args = ap.parse_args()

    import importlib

    import torch

    import gemmlab.dsl as dsl
    from gemmlab.running.gpu import current_arch, has_gpu

    arch = args.arch or (current_arch() if has_gpu() else "sm_90a")
    module_name = KERNELS[args.kernel]
    colds = [cold_run(module_name, arch) for _ in range(args.repeat)]

    def tn(m, n, k):
        return (torch.empty(m, k, dtype=torch.float16), torch.empty(n, k, dtype=torch.float16),
                torch.empty(m, n, dtype=torch.float16))

    module = importlib.import_module(module_name)
    warm_first, _ = timed(lambda: dsl.compile(module.gemm, *tn(4096, 4096, 4096), arch=arch))
    rerun, k = timed(lambda: dsl.compile(module.gemm, *tn(4096, 4096, 4096), arch=arch))
    assert k.cached
    # A re-executed cell: a new function object with the same source.
    fresh = importlib.reload(module)
    recell, k2 = timed(lambda: dsl.compile(fresh.gemm, *tn(4096, 4096, 4096), arch=arch))
    new_shape, k3 = timed(lambda: dsl.compile(fresh.gemm, *tn(1024, 2048, 512), arch=arch))
    new_sig, k4 = timed(lambda: dsl.compile(fresh.gemm, *tn(1000, 1001, 999), arch=arch))

    rows = [
        ("import torch + gemmlab.dsl + DSL (fresh process)", min(c["import"] for c in colds), "", ""),
        (f"cold compile, first in process ({args.kernel} GEMM, {arch})", min(c["cold"] for c in colds),
         "<= 2 s (2-core CPU), <= 1 s (GPU host)", f"best of {len(colds)}: " + ", ".join(f"{c['cold']:.2f}" for c in colds)),
        ("compile in a warm process (another kernel compiled before)", warm_first, "", ""),
        ("re-run unchanged cell (same function)", rerun, "<= 0.05 s", "cached" if k.cached else "RECOMPILED"),
        ("re-run re-executed cell (new function, same source)", recell, "<= 0.05 s", "cached" if k2.cached else "RECOMPILED"),
        ("new shape, same signature (1024x2048x512)", new_shape, "<= 0.05 s", "cached" if k3.cached else "RECOMPILED"),
        ("new signature: odd K, 2-byte rows (1000x1001x999)", new_sig, "one compile", "cached" if k4.cached else "compiled"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"CuTe DSL compile times, {args.kernel} GEMM, arch {arch}, {os.cpu_count()} CPUs, nvidia-cutlass-dsl "
          f"{dsl.info()['version']}")
    print(f"{'what':<{width}}  {'seconds':>8}  {'target':<38} note")
    for what, sec, target, note in rows:
        print(f"{what:<{width}}  {sec:>8.3f}  {target:<38} {note}")
    if k.resources:
        print(f"resources: {k.resources.summary()} (dynamic shared memory, set at launch, not included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
