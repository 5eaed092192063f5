#!/usr/bin/env python3
"""Tune one solution kernel: time configuration variants against cuBLAS in one run, pick the best.

    python benchmarks/sweep.py ladder_any "WARPS_N=2" "WARPS_N=2,BK=64" --check
    python benchmarks/sweep.py hopper_ws "WS_GROUP_M=16" "WS_CLUSTER_M=1" --dtypes float16,bfloat16
    python benchmarks/sweep.py gemm06_cpp "STAGES=3" "GROUP_M=8" --warm-jobs 8 --apply

Each variant is the kernel's solutions-notebook cell with integer settings changed in memory (as
``benchmarks/solutions.py --set`` does). The unchanged kernel is timed first and again last, so
the table shows how much the same code moves between two measurements. A variant wins when it is
correct (``--check``: odd shapes with check_gemm) and its mean ratio to cuBLAS beats the better of
the two baseline runs by ``--min-gain``; ``--apply`` then writes it into the notebook with
tools/set_solution_config.py. ``--warm-jobs N`` compiles the variants in N processes first
(cold CuTe C++ compiles take ~20 s each on one core; the timing itself runs alone).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import solutions  # noqa: E402  (benchmarks/solutions.py: kernel loading and the odd shapes)


@dataclass
class Variant:
    label: str
    changes: dict
    correct: bool | None = None
    ratios: dict = field(default_factory=dict)     # "4096x4096x4096 float16" -> ratio
    tflops: dict = field(default_factory=dict)
    error: str = ""

    @property
    def mean(self) -> float | None:
        return statistics.fmean(self.ratios.values()) if self.ratios and not self.error else None


def parse_spec(spec: str) -> dict[str, int]:
    """``"BK=64,STAGES=3"`` -> ``{"BK": 64, "STAGES": 3}``."""
    out = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise SystemExit(f"variant {spec!r}: expected KEY=INT[,KEY=INT...]")
        out[key.strip()] = int(value)
    return out


def label_of(changes: dict[str, int]) -> str:
    return ",".join(f"{k}={v}" for k, v in changes.items()) or "base"


def assignment_of(kernel: str) -> str:
    assignment = solutions.assignment_of(kernel)
    if assignment is None:
        raise SystemExit(f"unknown kernel {kernel!r}; choose from {[n for _, n in solutions.KERNELS]}")
    return assignment


def load(kernel: str, changes: dict[str, int]):
    fn, ns = solutions.load_kernel(assignment_of(kernel), kernel, changes or None)
    base = solutions.VARIANTS.get(kernel, (kernel,))[0]
    return fn, solutions.convention_of(fn, ns, base), solutions.declared(ns, base, "CHECK_SHAPES", solutions.ODD_SHAPES)


def first_calls(kernel: str, changes: dict[str, int], dtypes: list[str]) -> None:
    """Build the variant (one small call per dtype) so its compiles land in the disk cache."""
    import torch

    fn, conv, _ = load(kernel, changes)
    for dt in dtypes:
        for m, n, k in ((256, 256, 256), (256, 256, 9)):    # the fast path, then an unaligned K (fallbacks)
            A = torch.randn(m, k, device="cuda").to(getattr(torch, dt))
            B = torch.randn((n, k) if conv == "tn" else (k, n), device="cuda").to(getattr(torch, dt))
            D = torch.empty(m, n, device="cuda").to(getattr(torch, dt))
            try:
                fn(A, B, D) if conv == "tn" else fn(A, B, D, 1.0, 0.0)
            except Exception:  # noqa: BLE001 - whole-tile kernels refuse K=9; the timing run reports real errors
                if k == 256:
                    raise
    torch.cuda.synchronize()


def warm(kernel: str, specs: list[dict], dtypes: list[str], jobs: int) -> None:
    def one(changes: dict) -> str:
        spec = [label_of(changes)] if changes else []      # the baseline: no KEY=INT argument at all
        cmd = [sys.executable, __file__, kernel, *spec, "--first-call-only", "--dtypes", ",".join(dtypes)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        return f"  warm {label_of(changes)}: " + ("ok" if done.returncode == 0 else
                                                   "failed: " + (done.stderr or done.stdout).strip()[-300:])

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for line in pool.map(one, specs):
            print(line, flush=True)


def measure(kernel: str, variant: Variant, shapes, dtypes: list[str], check: bool) -> None:
    import torch

    import gemmlab

    try:
        fn, conv, check_shapes = load(kernel, variant.changes)
        if check:
            for dt in dtypes:
                result = gemmlab.check_gemm(fn, convention=conv, dtype=getattr(torch, dt), shapes=check_shapes)
                if not result.passed:
                    bad = next((r for r in result.rows if not r.passed), None)
                    variant.correct = False
                    variant.error = f"wrong on the odd shapes ({dt}: {bad.message if bad else 'failed'})"[:200]
                    return
            variant.correct = True
        for shape in shapes:
            for dt in dtypes:
                r = gemmlab.bench_gemm(fn, shape=shape, convention=conv, dtype=getattr(torch, dt), label=kernel)
                key = f"{'x'.join(map(str, shape))} {dt}"
                variant.ratios[key], variant.tflops[key] = r.ratio, r.tflops
    except Exception as err:  # noqa: BLE001 - a variant that does not build or launch is a result, not a crash
        variant.error = str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__


def table(kernel: str, variants: list[Variant]) -> str:
    keys = list(dict.fromkeys(k for v in variants for k in v.ratios))
    lines = [f"| {kernel} variant | " + " | ".join(keys) + " | mean | correct |",
             "| --- | " + " | ".join("---:" for _ in keys) + " | ---: | --- |"]
    for v in variants:
        cells = [f"{v.ratios[k]:.3f}" if k in v.ratios else "-" for k in keys]
        mean = f"{v.mean:.3f}" if v.mean is not None else v.error or "-"
        ok = {None: "-", True: "yes", False: "NO"}[v.correct]
        lines.append(f"| {v.label} | " + " | ".join(cells) + f" | {mean} | {ok} |")
    return "\n".join(lines)


def best_of(variants: list[Variant], min_gain: float) -> Variant | None:
    """The best changed variant that beats both baseline runs by ``min_gain`` (relative), or None."""
    bases = [v.mean for v in variants if not v.changes and v.mean is not None]
    if not bases:
        return None
    bar = max(bases) * (1.0 + min_gain)
    ranked = sorted((v for v in variants if v.changes and v.mean is not None and v.correct is not False),
                    key=lambda v: v.mean, reverse=True)
    return ranked[0] if ranked and ranked[0].mean >= bar else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernel")
    ap.add_argument("variants", nargs="*", metavar="KEY=INT[,KEY=INT...]")
    ap.add_argument("--shapes", default="4096", help="comma-separated cube sizes (default 4096)")
    ap.add_argument("--dtypes", default="float16", help="comma-separated dtypes (default float16)")
    ap.add_argument("--check", action="store_true", help="check_gemm each variant on odd shapes first")
    ap.add_argument("--warm-jobs", type=int, default=1, help="compile the variants in this many processes first")
    ap.add_argument("--min-gain", type=float, default=0.02, help="relative gain over the baseline to win")
    ap.add_argument("--apply", action="store_true", help="write the winner into the solutions notebook")
    ap.add_argument("--out", type=Path, help="write the results as JSON here")
    ap.add_argument("--first-call-only", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    specs = [parse_spec(s) for s in args.variants]
    assignment_of(args.kernel)
    from gemmlab.running.gpu import has_gpu

    if not has_gpu():
        print("benchmarks/sweep.py needs a CUDA GPU: it times the variants.")
        return 2
    if args.first_call_only:
        first_calls(args.kernel, specs[0] if specs else {}, dtypes)
        return 0
    shapes = [(int(s),) * 3 for s in args.shapes.split(",")]
    if args.warm_jobs > 1:
        warm(args.kernel, [{}] + specs, dtypes, args.warm_jobs)
    variants = [Variant("base", {})] + [Variant(label_of(c), c) for c in specs] + [Variant("base (again)", {})]
    for v in variants:
        measure(args.kernel, v, shapes, dtypes, args.check and (v.changes or v.label == "base"))
        print(f"  {v.label}: " + (f"mean ratio {v.mean:.3f}" if v.mean is not None else v.error), flush=True)
    print()
    print(table(args.kernel, variants))
    winner = best_of(variants, args.min_gain)
    print(f"\nbest: {args.kernel} {winner.label} ({winner.mean:.3f})" if winner else
          f"\nbest: {args.kernel} unchanged (no variant beats the baseline by {args.min_gain:.0%})")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"sweep-{args.kernel}.json").write_text(json.dumps(
            {"kernel": args.kernel, "variants": [asdict(v) for v in variants],
             "best": winner.changes if winner else None}, indent=1))
    if winner and args.apply:
        import set_solution_config

        path = set_solution_config.apply(args.kernel, winner.changes)
        print(f"applied to {path.relative_to(ROOT)}: python tools/set_solution_config.py {args.kernel} "
              + " ".join(f"{k}={v}" for k, v in winner.changes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
