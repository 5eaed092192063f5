#!/usr/bin/env python3
"""What the timeline's marks cost: the same kernel built without marks, with marks recording nothing, and with
marks recording, timed in the same run.

    python benchmarks/timeline_overhead.py                              # the test kernels (C++ and DSL)
    python benchmarks/timeline_overhead.py --kernel hopper_ws --kernel capstone --shape 4096
    python benchmarks/timeline_overhead.py --out overhead.json

A timeline is only worth its picture if the marks do not change what they show. Each kernel is recorded
twice as gemmlab.timeline records it (the DSL compiling its marks only inside
gemmlab.profiling.switch.tracing; C++ built with and without GEMMLAB_TRACE_ON) and launched by the judge's
own launchers: **plain** (no marks), **marks off** (the traced build, its buffer address 0: the marks' own
instructions), **recording** (the traced build writing into a buffer, as the judge's trace runs it). Each
variant is checked once, then the three are timed in interleaved rounds (L2 flushed before each call;
gemmlab.timing.events), and each traced variant's speed is given relative to plain with the interval of the
per-round ratios (gemmlab.timing.spread). Kernels: ``traced_tiled`` (tests/kernels/traced_tiled.cu),
``traced_gemm`` (tests/dsl_kernels/traced_gemm.py), or a solution kernel of benchmarks/solutions.py
whose cells mark their warps (07's ``hopper_ws``, 09's ``capstone``).
"""
from __future__ import annotations

import argparse
import base64
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

TEST_KERNELS = ("traced_tiled", "traced_gemm")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", action="append", default=[], metavar="NAME",
                   help=f"{', '.join(TEST_KERNELS)} or a marked solution kernel (repeatable; default: the two tests)")
    p.add_argument("--shape", type=int, default=2048, help="M = N = K (default %(default)s)")
    p.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default %(default)s)")
    p.add_argument("--capacity", type=int, default=2048, help="records per warp while recording")
    p.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = p.parse_args(argv)
    args.kernel = args.kernel or list(TEST_KERNELS)
    if args.shape < 16 or args.rounds < 2:
        p.error("--shape must be at least 16 and --rounds at least 2 (an interval needs two)")
    return args


def gemm_function(name: str) -> tuple[Callable[..., Any], str]:
    """(the GEMM function, its convention) of a test kernel or a solution kernel."""
    import math as m

    import gemmlab

    if name == "traced_tiled":
        kernel = gemmlab.compile((ROOT / "tests" / "kernels" / "traced_tiled.cu").read_text(), "traced_tiled",
                                 arch="sm_90a")

        def launch(A: Any, B: Any, D: Any) -> None:   # recorded, then built with and without its marks
            M, K = A.shape
            N = B.shape[0]
            kernel(A, B, D, M, N, K, grid=(m.ceil(N / 16), m.ceil(M / 16)), block=(16, 16))
        return launch, "tn"
    if name == "traced_gemm":
        from tests.dsl_kernels import traced_gemm

        return gemmlab.dsl.gemm_fn(traced_gemm.traced_gemm), "tn"
    import solutions

    assignment = solutions.assignment_of(name)
    if assignment is None:
        raise SystemExit(f"unknown kernel {name!r}: {', '.join(TEST_KERNELS)} or one of benchmarks/solutions.py")
    fn, ns = solutions.load_kernel(assignment, name)
    return fn, solutions.convention_of(fn, ns, name)


def launchers(name: str, shape: tuple[int, int, int]) -> tuple[Any, Any, Any, dict[str, Any]]:
    """(plain, traced with marks off, traced and recording) launchers of ``name``'s kernel at ``shape``, the last
    one's trace buffer attached; and facts about the builds."""
    import torch

    from gemmlab.compiling.compiler import compile_to
    from gemmlab.judge.dsl_replay import ReplayLauncher
    from gemmlab.judge.launcher import TrustedLauncher
    from gemmlab.profiling.switch import tracing
    from gemmlab.profiling.trace_format import BUFFER_SYMBOL, CPP_SWITCH
    from gemmlab.remote.recording import DslRecording, record
    from gemmlab.remote.requests import dsl_spec_for, spec_for

    fn, convention = gemm_function(name)
    plain_rec = record(fn, shape, convention, torch.float16, torch.float16)
    with tracing():
        traced_rec = record(fn, shape, convention, torch.float16, torch.float16)
    facts: dict[str, Any] = {"convention": convention}
    if isinstance(traced_rec, DslRecording):
        make = lambda rec: ReplayLauncher(dsl_spec_for([rec], convention).launch_for, convention)  # noqa: E731
        plain, off, on = make(plain_rec), make(traced_rec), make(traced_rec)
        grid, block, _ = dsl_spec_for([traced_rec], convention).geometry(*shape)
        for label, rec in (("plain", plain_rec), ("traced", traced_rec)):
            images = b"".join(base64.b64decode(v) for v in rec.plan["images"].values())
            facts[f"marks_{label}"] = BUFFER_SYMBOL.encode() in images
    else:
        def build(rec: Any, traced: bool) -> Any:
            spec = spec_for(rec.kernel, [rec], convention)
            options = (*spec.options, f"-D{CPP_SWITCH}=1") if traced else spec.options
            compiled = compile_to(spec.source, spec.name, rec.kernel.arch, options)
            label = "traced" if traced else "plain"
            facts[f"registers_{label}"] = compiled.resources.registers
            facts[f"marks_{label}"] = compiled.ptx.count("%globaltimer")
            return TrustedLauncher(compiled, spec)

        plain, off, on = build(plain_rec, False), build(traced_rec, True), build(traced_rec, True)
        grid, block, _ = spec_for(traced_rec.kernel, [traced_rec], convention).geometry(*shape)
    if not facts["marks_traced"]:
        raise SystemExit(f"{name}'s kernel has no timeline marks: there is nothing to measure the cost of.")
    ctas, warps = math.prod(grid), -(-math.prod(block) // 32)
    facts.update(ctas=ctas, warps_per_cta=warps)
    return plain, off, on, facts


def operands(shape: tuple[int, int, int], convention: str) -> tuple[Any, Any, Any]:
    import torch

    M, N, K = shape
    A = torch.randn(M, K, device="cuda").half()
    B = torch.randn((N, K) if convention == "tn" else (K, N), device="cuda").half()
    return A, B, torch.zeros(M, N, device="cuda", dtype=torch.float16)


def measure(name: str, shape: tuple[int, int, int], rounds: int, capacity: int) -> dict[str, Any]:
    """The three variants checked, attached, timed in interleaved rounds; their speeds against plain."""
    import torch

    from gemmlab.checking.check import check_gemm
    from gemmlab.judge.tracing import TraceBuffer, traced_ctas
    from gemmlab.profiling.timeline import parse_buffer
    from gemmlab.timing.spread import against_one
    from gemmlab.timing.events import interleaved_rounds, l2_flush_buffer, prepare_timer

    plain, off, on, facts = launchers(name, shape)
    conv = facts["convention"]

    def checked(label: str, launcher: Any) -> None:
        result = check_gemm(launcher, conv, shapes=[shape], forbid_library=True)
        if not result.passed:
            raise SystemExit(f"{name} ({label}) is wrong at {shape}:\n{result}")

    for label, launcher in (("plain", plain), ("marks off", off), ("recording", on)):
        checked(label, launcher)                        # loads every module
    ctas = traced_ctas(facts["ctas"], facts["warps_per_cta"], capacity, None)
    buffer = TraceBuffer(capacity, ctas, facts["warps_per_cta"])
    buffer.reset()
    buffer.attach(on.modules())
    checked("recording", on)                            # right while its marks write, too
    A, B, D = operands(shape, conv)
    args = (A, B, D) if conv == "tn" else (A, B, D, 1.0, 0.0)
    flush = l2_flush_buffer()
    timers = [prepare_timer(lambda f=f: f(*args), flush_buffer=flush, what=f"{name}") for f in (plain, off, on)]
    reps = [max(3, min(50, int(100 / max(t.estimate_ms, 1e-3) / rounds))) for t in timers]
    times = interleaved_rounds([t.run for t in timers], reps, rounds)
    records, full, _ = parse_buffer(buffer.read())
    medians = [[statistics.median(r) for r in variant] for variant in times]
    result: dict[str, Any] = {"kernel": name, "shape": list(shape), **facts, "traced_ctas": ctas,
                              "marks_per_launch": len(records), "warps_out_of_records": len(full),
                              "plain_ms": statistics.median(medians[0])}
    for index, label in ((1, "marks_off"), (2, "recording")):
        speed = against_one(f"{name} ({label.replace('_', ' ')})", f"{name} (plain)",
                            [p / v for p, v in zip(medians[0], medians[index])], method=f"{rounds} interleaved rounds")
        result[label] = {"ms": statistics.median(medians[index]), "speed": speed.ratio, "low": speed.low,
                         "high": speed.high, "coverage": speed.coverage, "text": str(speed)}
    buffer.detach()
    torch.cuda.synchronize()
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from gemmlab.running.gpu import device_name, has_gpu

    if not has_gpu():
        print("benchmarks/timeline_overhead.py times kernels on a GPU; there is none here.", file=sys.stderr)
        return 2
    shape = (args.shape,) * 3
    results = []
    for name in args.kernel:
        print(f"- {name} at {'×'.join(map(str, shape))}", flush=True)
        r = measure(name, shape, args.rounds, args.capacity)
        results.append(r)
        print(f"  plain {r['plain_ms']:.3f} ms; {r['marks_per_launch']:,} marks in one launch "
              f"({r['traced_ctas']} of {r['ctas']} CTAs traced)"
              + (f"; registers {r['registers_plain']} plain, {r['registers_traced']} traced"
                 if "registers_plain" in r else ""))
        for label in ("marks_off", "recording"):
            print(f"  {r[label]['text']}")
    print(f"\n{device_name()}: speed of each traced build relative to the same kernel without marks (1.000: no cost).")
    if args.out:
        args.out.write_text(json.dumps({"device": device_name(), "results": results}, indent=1) + "\n")
        print(f"saved {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
