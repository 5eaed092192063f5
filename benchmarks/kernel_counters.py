#!/usr/bin/env python3
"""Why one solution kernel is faster than another: Nsight Compute counters of the course's GEMM kernels.

    python benchmarks/kernel_counters.py --only capstone --only capstone_pingpong [--shape 4096] [--dtype float16] [--out counters.json]

Timings (benchmarks/solutions.py) say which kernel is faster; the counters say why. For example
notebook 09's capstone against the ping-pong attempt: the ping-pong's 64x256 tiles pull about 1.5x
more bytes from L2 per FLOP, and it sits at about 85% of L2 throughput.

Kernels are named as in benchmarks/solutions.py (``--only``, repeatable). Each runs in a child
process of this script under one ncu invocation: two warm-up calls (the first compiles), then one
profiled call on random inputs, whose result is checked against torch (a wrong kernel's counters
mean nothing). Every kernel launched in that call is a row of the table: time and TFLOPS, how busy
the tensor pipe was, L2 throughput, the bytes between L2 and the SMs per kFLOP, DRAM bytes read and
the SM clock. ``--out`` saves the counters as JSON.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import ncu  # noqa: E402  (benchmarks/ncu.py: running ncu and reading its CSV)
import solutions  # noqa: E402  (benchmarks/solutions.py: the kernels and how to load them)

#: Column -> ncu metric. Values come back in base units: ns, %, sectors, bytes, Hz.
METRICS = {
    "time_ns": "gpu__time_duration.sum",
    "tensor_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
    "l2_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l2_sectors": "lts__t_sectors_srcunit_tex.sum",          # L2 sectors read or written for the SMs
    "dram_read_bytes": "dram__bytes_read.sum",
    "sm_hz": "sm__cycles_elapsed.avg.per_second",
}
NCU_OPTIONS = [
    # The board's real clocks under its power cap, as bench_gemm times them: by default ncu locks
    # the base clock, which hides what the power cap does to a kernel that draws more.
    "--clock-control", "none",
    # Only the launches between torch.cuda.profiler.start() and stop(): the measured call, not the warm-ups.
    "--profile-from-start", "off",
    # Bytes, sectors and nanoseconds rather than ncu's per-launch Mbyte/usecond scaling.
    "--print-units", "base",
]
SECTOR = 32
DTYPES = ["float16", "bfloat16"]
#: Allowed error per element, times (sqrt(K) + |expected|), for unit-variance inputs: gemmlab.check_gemm's.
TOLERANCE = {"float16": 2e-3, "bfloat16": 1.6e-2}
#: How CuTe DSL names a kernel (the prefix before the function's name), and the readable name of a kernel.
DSL_PREFIX = ncu.DSL_PREFIX
short_name = ncu.short_name
#: The line the child prints once its call was profiled and checked.
INFO = "KERNEL_COUNTERS "


def kernel_names() -> list[str]:
    return [n for _, n in solutions.KERNELS]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help="a kernel of benchmarks/solutions.py to profile (repeatable), e.g. capstone")
    p.add_argument("--shape", type=int, default=4096, help="M = N = K (default %(default)s)")
    p.add_argument("--dtype", choices=DTYPES, default="float16")
    p.add_argument("--out", type=Path, default=None, help="write the counters as JSON")
    p.add_argument("--child", metavar="NAME", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    names = kernel_names()
    chosen = [args.child] if args.child else args.only
    if not chosen:
        p.error(f"name the kernels to profile with --only NAME (repeatable); choose from {names}")
    unknown = [n for n in chosen if n not in names]
    if unknown:
        p.error(f"unknown kernel(s) {unknown}; choose from {names}")
    if args.shape < 1:
        p.error(f"--shape {args.shape}: must be a positive size")
    args.only = list(dict.fromkeys(args.only))
    return args


# ----------------------------------------------------------------------------- child: one profiled call
def problem(name: str, size: int) -> tuple[int, int, int]:
    """(M, N, K) this kernel runs: size³, or the one tile a fixed-shape kernel computes."""
    return solutions.FIXED_SHAPE.get(name, (size, size, size))


def verdict(got, expected, k: int, dtype: str) -> str | None:
    """None when ``got`` matches ``expected`` (fp32) within ``dtype``'s tolerance, else what is wrong.

    The inputs are unit-variance random numbers, so a typical output is about sqrt(K)."""
    import torch

    got = got.float()
    finite = torch.isfinite(got)
    if not bool(finite.all()):
        return f"{int((~finite).sum())} of {got.numel()} elements of D are not finite"
    bound = TOLERANCE[dtype] * (math.sqrt(k) + expected.abs())
    bad = (got - expected).abs() > bound
    if not bool(bad.any()):
        return None
    worst = int(((got - expected).abs() - bound).argmax())
    i, j = divmod(worst, got.shape[1])
    return (f"{int(bad.sum())} of {got.numel()} elements of D are wrong; worst at ({i}, {j}): "
            f"{float(got[i, j]):.4g}, expected {float(expected[i, j]):.4g}")


def run_child(name: str, size: int, dtype: str) -> int:
    """Load ``name``, warm it up, profile one call and check it; print the INFO line. Exit status."""
    from gemmlab.errors import NoGPUError
    from gemmlab.running.gpu import require_gpu

    try:
        require_gpu("benchmarks/kernel_counters.py")
    except NoGPUError as err:
        print(err, file=sys.stderr)
        return 2
    import torch

    base = solutions.VARIANTS.get(name, (name,))[0]
    try:
        fn, ns = solutions.load_kernel(solutions.assignment_of(name), name)
    except Exception as err:  # noqa: BLE001 - LookupError, or a cell that fails to run: say which, not a traceback
        print(f"{name}: cannot load the kernel: {err}", file=sys.stderr)
        return 1
    supported = solutions.declared(ns, base, "DTYPES", DTYPES)
    if dtype not in supported:
        print(f"{name} runs only {list(supported)}, not {dtype}", file=sys.stderr)
        return 1
    conv = solutions.convention_of(fn, ns, base)
    m, n, k = problem(name, size)
    dt = getattr(torch, dtype)
    A = torch.randn(m, k, device="cuda").to(dt)
    B = torch.randn((n, k) if conv == "tn" else (k, n), device="cuda").to(dt)
    D = torch.empty(m, n, device="cuda", dtype=dt)
    call = (lambda: fn(A, B, D)) if conv == "tn" else (lambda: fn(A, B, D, 1.0, 0.0))
    try:
        call()                   # compiles
        call()
    except Exception as err:  # noqa: BLE001 - a build or launch failure: say which kernel, not a traceback
        print(f"{name}: its first calls failed: {err}", file=sys.stderr)
        return 1
    D.zero_()                    # what the check sees is the profiled call's output alone
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    torch.backends.cuda.matmul.allow_tf32 = False       # a full-precision reference, as check_gemm's
    expected = A.float() @ (B.float().T if conv == "tn" else B.float())
    wrong = verdict(D, expected, k, dtype)
    if wrong:
        print(f"{name} ({conv}, {m}x{n}x{k} {dtype}) computed a wrong result: {wrong}", file=sys.stderr)
        return 1
    names = sorted(key for key, value in ns.items() if isinstance(key, str) and callable(value))
    info = {"device": torch.cuda.get_device_name(), "convention": conv, "shape": [m, n, k], "names": names}
    print(INFO + json.dumps(info), flush=True)
    return 0


# ----------------------------------------------------------------------------- parent: ncu and the table
def child_command(name: str, size: int, dtype: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", name, "--shape", str(size), "--dtype", dtype]


def ncu_command(ncu_path: str, name: str, size: int, dtype: str) -> list[str]:
    """The ncu command line that profiles kernel ``name`` (what :func:`profile_kernel` runs)."""
    return ncu.command(ncu_path, list(METRICS.values()), child_command(name, size, dtype), NCU_OPTIONS)


def _ratio(top: float, bottom: float) -> float:
    return top / bottom if bottom and not math.isnan(bottom) else math.nan


def derived(counters: dict[str, float], shape: tuple[int, int, int]) -> dict[str, float]:
    """Readable columns from one launch's counters and the GEMM's FLOPs (2·M·N·K)."""
    m, n, k = shape
    flops = 2 * m * n * k
    nan = math.nan
    l2_bytes = counters.get("l2_sectors", nan) * SECTOR
    return {"time_us": counters.get("time_ns", nan) / 1e3,
            "tflops": _ratio(flops, counters.get("time_ns", nan)) / 1e3,        # FLOP/ns = GFLOPS
            "l2_bytes_per_kflop": _ratio(l2_bytes, flops / 1e3),
            "l2_gbytes": l2_bytes / 1e9,
            "dram_mbytes": counters.get("dram_read_bytes", nan) / 1e6,
            "clock_ghz": counters.get("sm_hz", nan) / 1e9}


def total(launches: list[dict]) -> dict[str, float]:
    """The counters of several launches summed (time, sectors, bytes): one GEMM that launches more than one kernel."""
    def summed(key: str) -> float:
        values = [x[key] for x in launches if key in x and not math.isnan(x[key])]
        return sum(values) if values else math.nan

    return {key: summed(key) for key in ("time_ns", "l2_sectors", "dram_read_bytes")}


def profile_kernel(name: str, size: int, dtype: str) -> dict:
    """Counters of every launch in one checked call of ``name``, plus the device, convention and shape."""
    launches, stdout = ncu.profile(child_command(name, size, dtype), METRICS, NCU_OPTIONS, timeout=1200)
    lines = [line[len(INFO):] for line in stdout.splitlines() if line.startswith(INFO)]
    if not lines:
        raise SystemExit(f"{name}: the child process did not finish its profiled call.\n{ncu.tail(stdout)}")
    info = json.loads(lines[-1])
    if not launches:
        raise SystemExit(f"{name}: ncu profiled no kernel launch in the measured call.\n{ncu.tail(stdout)}")
    shape = tuple(info["shape"])
    rows = [{"kernel": short_name(str(x["kernel"]), info["names"]), "full_name": x["kernel"],
             **{k: v for k, v in x.items() if k != "kernel"}, **derived(x, shape)} for x in launches]
    result = {"device": info["device"], "convention": info["convention"], "shape": list(shape), "launches": rows}
    if len(rows) > 1:
        summed = total(launches)
        result["all_launches"] = {**summed, **derived(summed, shape)}
    return result


def _cell(value: float, spec: str) -> str:
    return "-" if value is None or math.isnan(value) else format(value, spec)


def markdown(results: dict[str, dict], dtype: str) -> str:
    """One row per profiled launch, and a sum row for a kernel that launched more than one."""
    first = next(iter(results.values()))
    lines = [f"Nsight Compute counters, {dtype}, one call each on {first['device']} (its own clocks, not locked)", "",
             "| kernel | launch | shape | time µs | TFLOPS | tensor pipe % | L2 throughput % | L2↔SM bytes / kFLOP "
             "| L2↔SM GB | DRAM read MB | SM GHz |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def row(name: str, launch: str, shape: str, x: dict) -> str:
        return (f"| {name} | {launch} | {shape} | {_cell(x['time_us'], '.1f')} | {_cell(x['tflops'], '.1f')} | "
                f"{_cell(x.get('tensor_pct', math.nan), '.1f')} | {_cell(x.get('l2_pct', math.nan), '.1f')} | "
                f"{_cell(x['l2_bytes_per_kflop'], '.2f')} | {_cell(x['l2_gbytes'], '.2f')} | "
                f"{_cell(x['dram_mbytes'], '.1f')} | {_cell(x['clock_ghz'], '.2f')} |")

    for name, result in results.items():
        shape = "×".join(map(str, result["shape"]))
        for x in result["launches"]:
            lines.append(row(name, x["kernel"], shape, x))
        if "all_launches" in result:
            lines.append(row(name, f"all {len(result['launches'])} launches", shape, result["all_launches"]))
    lines += ["", "TFLOPS and bytes per kFLOP count the whole GEMM's 2·M·N·K FLOPs in each row (a kernel that "
              "launches several kernels: read its 'all launches' row). L2↔SM: sectors L2 served to or took "
              "from the SMs (lts__t_sectors_srcunit_tex), 32 bytes each."]
    return "\n".join(lines)


def plain(value):
    """``value`` with NaN (a counter ncu did not report) as None, so the JSON is standard."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return run_child(args.child, args.shape, args.dtype)
    ncu.find_ncu()                      # before any work: says how to get ncu where there is none
    results = {}
    for name in args.only:
        print(f"- {name}: profiling one {args.shape}³ {args.dtype} call under ncu", flush=True)
        results[name] = profile_kernel(name, args.shape, args.dtype)
    print()
    print(markdown(results, args.dtype))
    if args.out:
        data = {"dtype": args.dtype, "metrics": METRICS, "kernels": results}
        args.out.write_text(json.dumps(plain(data), indent=1) + "\n")
        print(f"\nsaved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
