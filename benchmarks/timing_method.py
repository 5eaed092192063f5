#!/usr/bin/env python3
"""Does queueing timed calls ahead of the GPU change what bench_gemm measures?

    python benchmarks/timing_method.py [--shape 4096]

bench_gemm's timer (gemmlab.timing.events.time_cuda) queues each batch of timed calls behind a GPU
sleep, so the CUDA events time GPU work only. This prints, for a CuTe DSL GEMM (about 100 us
of Python per call), a C++ GEMM through gemmlab.compile and cuBLAS, the median time with
the calls queued ahead and with the calls enqueued one by one, in the same run. Where the
two differ, the one-by-one number includes the GPU waiting for Python.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", type=int, default=4096, help="M = N = K")
    args = ap.parse_args(argv)
    from gemmlab.running.gpu import has_gpu

    if not has_gpu():
        print("benchmarks/timing_method.py needs a CUDA GPU.")
        return 2
    import torch

    import solution_cells
    from gemmlab.timing.events import time_cuda

    n = args.shape
    A = torch.randn(n, n, device="cuda").half()
    B = torch.randn(n, n, device="cuda").half()
    D = torch.empty(n, n, device="cuda").half()
    dsl = solution_cells.load_namespace("07_hopper", ["kernel:hopper_common", "kernel:hopper_ws"])["hopper_ws"]
    cpp = solution_cells.load_namespace("06_pipelining", ["kernel:gemm06_cpp"])["gemm06_cpp"]
    Bt = B.T
    cases = [("hopper_ws (CuTe DSL)", lambda: dsl(A, B, D)), ("gemm06_cpp (C++)", lambda: cpp(A, B, D)),
             ("cuBLAS (torch.matmul)", lambda: torch.matmul(A, Bt, out=D))]
    flops = 2.0 * n ** 3
    print(f"{torch.cuda.get_device_name()}, {n}³ fp16, median of 100 ms of calls, L2 flushed before each\n")
    print(f"{'kernel':<24} {'queued ahead':>14} {'one by one':>14} {'difference':>11}")
    for label, fn in cases:
        ahead = statistics.median(time_cuda(fn, queue_ahead=True))
        by_one = statistics.median(time_cuda(fn, queue_ahead=False))
        print(f"{label:<24} {flops / ahead / 1e9:>8.1f} TFLOPS {flops / by_one / 1e9:>8.1f} TFLOPS "
              f"{(by_one / ahead - 1) * 100:>+9.1f} %")
    from gemmlab.timing.events import gate_extensions

    print(f"\nbatches queued again behind a longer GPU sleep (the first one ran out early): {gate_extensions()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
