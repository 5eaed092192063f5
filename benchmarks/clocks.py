#!/usr/bin/env python3
"""Why a ratio to cuBLAS moves: SM clock, power and throttling while a kernel runs, next to cuBLAS.

    python benchmarks/clocks.py hopper_ws gemm06_cpp --shape 4096 --seconds 2

A large GEMM on an H100 can draw its whole power budget, and then the GPU lowers its clock; how far
depends on the kernel (instructions and shared-memory traffic per FLOP) and even on the data (the
tensor cores switch fewer bits on zeros). For each kernel, dtype and input kind (normal random numbers,
zeros, or the other 16-bit type's bit patterns) this runs the GEMM back to back (a CUDA graph where
the kernel can be captured) for a few seconds while ``nvidia-smi`` samples the SM clock
and the power draw, and prints TFLOPS, the median clock and power and how often the power cap or a
slowdown was active. Two kernels that differ at the same clock differ in their code; two that differ
only in their clock differ in their power.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import solutions  # noqa: E402  (benchmarks/solutions.py: loading the solution kernels)

FIELDS = ["clocks.sm", "power.draw", "temperature.gpu", "clocks_throttle_reasons.sw_power_cap",
          "clocks_throttle_reasons.hw_slowdown", "clocks_throttle_reasons.sw_thermal_slowdown"]


class Sampler:
    """``nvidia-smi`` in the background (gemmlab.timing.clock_sampler.SmiSampler), one sample of FIELDS every
    ``period_ms``."""

    def __init__(self, period_ms: int = 50) -> None:
        from gemmlab.timing.clock_sampler import SmiSampler

        self.smi = SmiSampler("0", FIELDS, period_ms)
        self.smi.start()

    def stop(self) -> dict[str, float]:
        self.smi.stop()
        return summarize([fields for _, fields in self.smi.rows])


def summarize(rows: list[list[str]]) -> dict[str, float]:
    """Medians of the clock and power, the hottest temperature, and the share of samples in which
    each slowdown was active; {} when no sample was readable (``[N/A]`` on some boards)."""
    def number(text: str) -> float | None:
        try:
            return float(text)
        except ValueError:
            return None

    rows = [r for r in rows if len(r) == len(FIELDS) and number(r[0]) is not None and number(r[1]) is not None]
    if not rows:
        return {}

    def share(i: int) -> float:
        return sum(r[i].lower() == "active" for r in rows) / len(rows)

    temps = [t for t in (number(r[2]) for r in rows) if t is not None]
    return {"clock_mhz": statistics.median(number(r[0]) for r in rows),
            "power_w": statistics.median(number(r[1]) for r in rows),
            "temp_c": max(temps) if temps else float("nan"),
            "power_cap": share(3), "hw_slow": share(4), "thermal": share(5), "samples": len(rows)}


def graph_of(fn, calls: int = 10):
    """A CUDA graph of ``calls`` calls of ``fn``, or None when ``fn`` cannot be captured.

    Replaying a graph keeps the GPU busy back to back; a Python loop cannot, when one call spends
    longer in Python (a DSL kernel: argument checks and conversion) than its kernel runs on the GPU.
    """
    import torch

    try:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                fn()
        return graph
    except Exception:  # noqa: BLE001 - not capturable: time the Python loop instead
        torch.cuda.synchronize()
        return None


def sustained(fn, seconds: float) -> tuple[float, dict, str]:
    """Mean milliseconds per call over ``seconds`` of back-to-back calls, what the sampler saw,
    and how the calls were issued ("graph" or "python")."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    graph = graph_of(fn)
    per_batch = 10 if graph is not None else 20
    batch = graph.replay if graph is not None else (lambda: [fn() for _ in range(per_batch)])
    batch()
    torch.cuda.synchronize()
    sampler = Sampler()
    time.sleep(0.2)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    calls, t0 = 0, time.perf_counter()
    start.record()
    while time.perf_counter() - t0 < seconds:
        for _ in range(5):
            batch()
        calls += 5 * per_batch
        torch.cuda.synchronize()          # keeps the queue short, so the timing ends when the loop does
    end.record()
    torch.cuda.synchronize()
    stats = sampler.stop()
    return start.elapsed_time(end) / calls, stats, "graph" if graph is not None else "python"


def square_gemms(names: list[str], overrides: dict[str, dict[str, int]] | None = None) -> dict:
    """{name: fn(A, B, D)} for solution kernels, for square problems only: a "nn" kernel's B is K x N
    and a "tn" kernel's N x K, which for square inputs are the same tensor shape, so one pair of
    random inputs serves every kernel (the FLOP count does not depend on which way B is read)."""
    fns = {}
    for name in names:
        base = solutions.VARIANTS.get(name, (name,))[0]
        fn, ns = solutions.load_kernel(solutions.assignment_of(base), name, (overrides or {}).get(name))
        if solutions.convention_of(fn, ns, base) == "nn":  # fn(A, B, C, alpha, beta)
            fn = (lambda f: (lambda A, B, D: f(A, B, D, 1.0, 0.0)))(fn)
        fns[name] = fn
    return fns


def inputs(kind: str, n: int, dtype):
    """Two n x n inputs: ``randn``, ``zeros``, or ``swapped`` (the bits of normal random numbers of
    the *other* 16-bit float type, so the same kernel sees the other type's bit patterns)."""
    import torch

    if kind == "zeros":
        return torch.zeros(n, n, device="cuda", dtype=dtype), torch.zeros(n, n, device="cuda", dtype=dtype)
    if kind == "swapped":
        other = torch.bfloat16 if dtype == torch.float16 else torch.float16
        return (torch.randn(n, n, device="cuda").to(other).view(dtype),
                torch.randn(n, n, device="cuda").to(other).view(dtype))
    if kind != "randn":
        raise SystemExit(f"unknown input kind {kind!r}: randn, zeros or swapped")
    return torch.randn(n, n, device="cuda").to(dtype), torch.randn(n, n, device="cuda").to(dtype)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="+", help="solution kernels by name (benchmarks/solutions.py KERNELS)")
    parser.add_argument("--shape", type=int, default=4096, help="M = N = K")
    parser.add_argument("--seconds", type=float, default=2.0, help="per kernel, dtype and input kind")
    parser.add_argument("--dtypes", default="float16,bfloat16")
    parser.add_argument("--inputs", default="randn,zeros,swapped", help="comma-separated: randn, zeros, swapped")
    parser.add_argument("--set", action="append", default=[], metavar="KERNEL:KEY=INT",
                        help="change a kernel's setting first, as benchmarks/solutions.py --set does")
    args = parser.parse_args(argv)

    import torch

    from gemmlab.running.gpu import has_gpu

    if not has_gpu():  # gemmlab.running.gpu is the one place that asks (GEMMLAB_HIDE_GPU included)
        print("clocks.py needs a CUDA GPU")
        return 2
    n = args.shape
    overrides = solutions.parse_settings(args.set, args.kernels, parser.error)
    fns = {"cuBLAS": None, **square_gemms(args.kernels, overrides)}
    print(f"{torch.cuda.get_device_name()}, {n}x{n}x{n}, {args.seconds:.1f} s each\n")
    print(f"| kernel | dtype | inputs | issued | TFLOPS | SM MHz | W | max °C | power cap | HW slowdown | thermal |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for dt in args.dtypes.split(","):
        dtype = getattr(torch, dt)
        for kind in args.inputs.split(","):
            A, B = inputs(kind, n, dtype)
            D = torch.empty(n, n, device="cuda", dtype=dtype)
            for name, fn in fns.items():
                call = (lambda: torch.matmul(A, B.t(), out=D)) if fn is None else (lambda fn=fn: fn(A, B, D))
                ms, s, how = sustained(call, args.seconds)
                tflops = 2 * n ** 3 / ms / 1e9
                if not s:
                    print(f"| {name} | {dt} | {kind} | {how} | {tflops:.1f} | ? | ? | ? | ? | ? | ? |")
                    continue
                print(f"| {name} | {dt} | {kind} | {how} | {tflops:.1f} | {s['clock_mhz']:.0f} | {s['power_w']:.0f} | "
                      f"{s['temp_c']:.0f} | {s['power_cap']:.0%} | {s['hw_slow']:.0%} | {s['thermal']:.0%} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
