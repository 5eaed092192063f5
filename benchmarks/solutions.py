#!/usr/bin/env python3
"""The course's solution GEMM kernels against cuBLAS and public references: correctness, TFLOPS, ratio with its
noise, under both timing methods, with the clock and power they ran at.

    python benchmarks/solutions.py --plan                 # what a run covers and how long it should take (no GPU)
    python benchmarks/solutions.py                        # every kernel, fp16+bf16, 4096³ 6144³ 8192³, both methods
    python benchmarks/solutions.py --budget-s 450 --out OUT      # the most important rows that fit in 450 s ...
    python benchmarks/solutions.py --budget-s 450 --out OUT --resume   # ... and the rest, in a second command
    python benchmarks/solutions.py --quick                # 4096³ fp16, the flushed method only
    python benchmarks/solutions.py --only gemm06_cpp --set gemm06_cpp:STAGES=5 --set gemm06_cpp:BK=32
    python benchmarks/solutions.py --cutlass ~/cutlass --fastcu ~/fast.cu   # + NVIDIA's and fast.cu's kernels
    python benchmarks/solutions.py --update-best          # record rows that beat benchmarks/solutions_best.json

The kernels come from the solutions notebooks (cells tagged ``kernel:<name>``, read with
tools/solution_cells.py), so this measures exactly what the course ships. Each kernel is
first checked with ``gemmlab.check_gemm`` on odd shapes (fp16 and bf16), then timed with
``gemmlab.bench_gemm``, which measures cuBLAS on the same problem in the same run, by each method of
``--methods``: ``flushed`` (the course's: interleaved rounds, L2 flushed) and ``nvidia`` (NVIDIA's
fixed-power method: settled clocks, rotated operands, 1,000+ back-to-back calls; about ten seconds a
row). Prints a markdown table, saves ``results.json``, ``results.md`` and ``solutions.png`` under
``--out``, and exits 1 if any correctness check fails (2 if there is no GPU). ``--set
NAME:KEY=VALUE`` changes a kernel's configuration through the ``configure_<front-end>(**changes)``
function its cell defines, or through the cell's integer constants (e.g. ``--set
hopper_ws:WS_GROUP_M=16``) where it defines no such function, for tuning runs.

An attempt too different to be a change of settings (``ATTEMPTS``: the ping-pong capstone) is a file under
``benchmarks/attempts/`` run right after its kernel's cell, in the same namespace, redefining what it changes;
its row stands beside the others, losers included.

Public references run in the same run, from checkouts given by path (none of their code is in this
repository): ``--cutlass PATH`` times NVIDIA's persistent Hopper CuTe DSL example (128×256 tiles, 2×1
clusters; benchmarks/cutlass_reference.py), ``--fastcu PATH`` fast.cu's kernel 12 (bf16, built with
nvcc; benchmarks/fastcu_reference.py). ``cublas`` (torch's matmul timed as if it were a kernel) shows
each method's own bias: its ratio should be 1.

A full run is long (``--plan`` estimates it: compiles and checks per kernel, and each row's time by
method from its expected speed). ``--budget-s`` keeps the most important rows that fit (the capstone
and the references under both methods first; ``PRIORITIES``), stops starting rows once the budget is
spent, and writes every finished row to ``OUT/rows.jsonl`` as it goes; ``--resume`` skips the rows and
correctness checks already there, so a second command finishes the run. The table covers all rows.

Every ratio comes with its interval (``bench_gemm``'s rounds, docs/TIMING.md), and each row stands
beside the previous best row of the same kernel, shape, dtype and method on the same GPU from
``benchmarks/solutions_best.json`` (keyed by GPU name: H100 and H200 rows stand side by side), with
the verdict of comparing the two beyond the noise (an exact rank-sum interval on both runs' per-round
ratios, where both have them). ``--update-best`` writes the rows whose ratio beats the previous best
back into that file.
"""
from __future__ import annotations

import argparse
import datetime
import inspect
import json
import math
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Protocol

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from autograder.cell_metadata import KERNEL_TAG, kernel_tag, tags  # noqa: E402

#: (assignment, kernel name): the cell tag is ``kernel:<name>``, the GEMM function ``<name>``.
KERNELS = [
    ("05_global_gemm", "gemm05_cpp"),
    ("05_global_gemm", "gemm05_dsl"),
    ("06_pipelining", "gemm06_cpp"),
    ("06_pipelining", "gemm06_dsl"),
    ("07_hopper", "hopper_one_tile"),
    ("07_hopper", "hopper_pipelined"),
    ("07_hopper", "hopper_ws_one_tile_per_cta"),
    ("07_hopper", "hopper_ws_persistent"),
    ("07_hopper", "hopper_ws"),
    ("08_cuda_ladder", "ladder_naive"),
    ("08_cuda_ladder", "ladder_smem"),
    ("08_cuda_ladder", "ladder_wmma"),
    ("08_cuda_ladder", "ladder_dbuf"),
    ("08_cuda_ladder", "ladder_swizzle"),
    ("08_cuda_ladder", "ladder_any"),
    ("09_capstone", "capstone_whole_tile_epilogue"),
    ("09_capstone", "capstone_3_stages"),
    ("09_capstone", "capstone_stream_k"),
    ("09_capstone", "capstone_pingpong"),
    ("09_capstone", "capstone_all_clusters"),
    ("09_capstone", "capstone"),
]
#: Kernels whose GEMM function is not named like their cell tag: tag name -> function name.
FUNCTIONS = {"capstone": "capstone_gemm"}
#: The committed previous best rows (see --update-best).
BEST = Path(__file__).resolve().parent / "solutions_best.json"
#: Notebook 07's steps that are the capstone kernel with fewer of its ideas switched on: the
#: cell's module-level settings are changed before the first compile (the DSL's compile cache
#: keys on the globals a kernel reads). name -> (kernel whose cell defines it, settings).
VARIANTS = {
    # warp-specialized producer/consumers, but one output tile per CTA (grid = all tiles), no cluster
    "hopper_ws_one_tile_per_cta": ("hopper_ws", {"WS_CLUSTER_M": 1, "WS_SMS": 1 << 30}),
    # + persistent CTAs (one per SM) walking tiles in grouped (L2-friendly) order, no cluster
    "hopper_ws_persistent": ("hopper_ws", {"WS_CLUSTER_M": 1}),
    # hopper_ws itself adds 2-CTA clusters with TMA multicast of B: 07's last step
    # the capstone before its epilogue went into 128x32 slices: D in one 64 KiB buffer, so 3 stages fit
    "capstone_whole_tile_epilogue": ("capstone", {"CAP_EPI_N": 0, "CAP_STAGES": 3, "CAP_STREAM_K": 0}),
    # sliced stmatrix epilogue, but the ring kept at 3 stages: what the slices buy without the 4th stage
    "capstone_3_stages": ("capstone", {"CAP_STAGES": 3, "CAP_STREAM_K": 0}),
    # the fewest clusters for the waves, with stream-K where a partial wave follows 8 full ones (none of SHAPES)
    "capstone_stream_k": ("capstone", {"CAP_STREAM_K": 1}),
    # the two consumer warpgroups in ping-pong on 64x256 tiles (ATTEMPTS: code run after the cell)
    "capstone_pingpong": ("capstone", {}),
    # the capstone before 2026-12-07: every cluster that fits (132 CTAs on an H100), stream-K from 8 full waves
    "capstone_all_clusters": ("capstone", {"CAP_FEWEST_CLUSTERS": 0, "CAP_STREAM_K": 1}),
}
#: Attempts too different from their kernel to be a change of its settings: a file of code run right after
#: the kernel's cell, in its namespace, that redefines what it changes (name -> file under benchmarks/).
ATTEMPTS = {"capstone_pingpong": "attempts/capstone_pingpong.py"}
#: Kernels that compute one fixed tile (notebook 07's first step, one CTA): checked and timed at that
#: shape only; their "ratio" is a latency comparison with cuBLAS on the same tiny problem.
FIXED_SHAPE = {"hopper_one_tile": (64, 128, 64)}
SHAPES = [(4096, 4096, 4096), (6144, 6144, 6144), (8192, 8192, 8192)]
DTYPES = ["float16", "bfloat16"]
#: bench_gemm's timing methods (gemmlab.timing.bench.METHODS).
METHODS = ["flushed", "nvidia"]
#: The public references and the cuBLAS self-check: rows that come from outside the notebooks.
CUTLASS, FASTCU, CUBLAS = "cutlass_persistent", "fastcu_12", "cublas"
REFERENCES = [CUBLAS, CUTLASS, FASTCU]
#: Odd, tiny, skinny and unaligned shapes every solution must get right.
ODD_SHAPES = [(1, 1, 1), (3, 5, 7), (17, 33, 9), (129, 257, 65), (1000, 1001, 999), (1, 4096, 7),
              (129, 3, 515), (256, 512, 256), (640, 384, 4096)]


@dataclass
class Row:
    kernel: str
    shape: tuple
    dtype: str
    tflops: float | None = None
    cublas_tflops: float | None = None
    ratio: float | None = None
    note: str = ""
    ratio_low: float | None = None
    ratio_high: float | None = None
    coverage: float | None = None
    round_ratios: list = field(default_factory=list)
    previous: dict | None = None           # the previous best row (from BEST), if any
    versus: str = ""                       # this row against it: faster / slower / within noise
    method: str = "flushed"                # bench_gemm's method
    fill: str = ""
    sm_clock_mhz: float | None = None      # medians while the kernel, and while cuBLAS, was timed
    power_w: float | None = None
    cublas_sm_clock_mhz: float | None = None
    cublas_power_w: float | None = None
    tensor_share: float | None = None      # the kernel's TFLOPS over the tensor peak at its clock
    settled: bool | None = None            # "nvidia": whether the clock had settled before timing

    @property
    def key(self) -> str:
        """How the row is filed in BEST: '4096x4096x4096 float16', with ' nvidia' for NVIDIA's method."""
        return row_key(self.shape, self.dtype, self.method)


def row_key(shape: Iterable[int], dtype: str, method: str) -> str:
    """'4096x4096x4096 float16' (the flushed method, as rows were filed before methods) or '... nvidia'."""
    return f"{'x'.join(map(str, shape))} {dtype}" + ("" if method == "flushed" else f" {method}")


@dataclass
class KernelReport:
    kernel: str
    assignment: str
    status: str = "ok"                      # ok | skipped | failed
    reason: str = ""
    convention: str = "tn"
    first_call_s: float | None = None       # compile (or cache hit) + first run of the fast path
    check_s: float | None = None            # correctness suite, includes compiles of other variants
    correct: dict = field(default_factory=dict)
    rows: list = field(default_factory=list)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--quick", action="store_true", help="only 4096³ with fp16, the flushed method")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="benchmark only this kernel (e.g. gemm06_cpp, or a reference: cublas, cutlass_persistent, "
                         "fastcu_12); repeatable")
    ap.add_argument("--set", action="append", default=[], metavar="NAME:KEY=VALUE", dest="settings",
                    help="configuration change passed to the kernel cell's configure_* function; repeatable")
    ap.add_argument("--out", type=Path, default=Path("bench-out"),
                    help="folder for results.json, results.md, solutions.png and the progress of the run")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness suite (tuning runs only)")
    ap.add_argument("--best", type=Path, default=BEST, help="JSON of previous best rows (default: %(default)s)")
    ap.add_argument("--update-best", action="store_true",
                    help="write rows whose ratio beats the previous best (same GPU) into --best")
    ap.add_argument("--cutlass", type=Path, metavar="PATH",
                    help="a CUTLASS checkout: also time its persistent Hopper CuTe DSL example in this run")
    ap.add_argument("--fastcu", type=Path, metavar="PATH",
                    help="a fast.cu checkout: also time its kernel 12 (bf16; built with nvcc) in this run")
    ap.add_argument("--methods", default=",".join(METHODS), help="timing methods, comma-separated (default: %(default)s)")
    ap.add_argument("--sizes", default=",".join(str(s[0]) for s in SHAPES),
                    help="M = N = K of the timed problems, comma-separated (default: %(default)s)")
    ap.add_argument("--budget-s", type=float, metavar="SECONDS",
                    help="keep the most important rows whose estimated time fits, and start no row past it")
    ap.add_argument("--plan", action="store_true", help="print the plan and its time estimate; run nothing")
    ap.add_argument("--resume", action="store_true",
                    help="skip the rows and checks already finished in --out (an earlier run with a budget)")
    args = ap.parse_args(argv)
    names = [n for _, n in KERNELS] + REFERENCES
    unknown = [n for n in args.only if n not in names]
    if unknown:
        ap.error(f"unknown kernel(s) {unknown}; choose from {names}")
    args.overrides = parse_settings(args.settings, names, ap.error)
    args.method_list = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in args.method_list if m not in METHODS]
    if bad or not args.method_list:
        ap.error(f"--methods takes {', '.join(METHODS)}, not {args.methods!r}")
    try:
        args.size_list = [int(v) for v in args.sizes.split(",") if v.strip()]
    except ValueError:
        ap.error(f"--sizes takes whole numbers, e.g. 4096,8192, not {args.sizes!r}")
    if not args.size_list or min(args.size_list) <= 0:
        ap.error(f"--sizes takes positive sizes, not {args.sizes!r}")
    if args.budget_s is not None and args.budget_s <= 0:
        ap.error("--budget-s takes a positive number of seconds")
    return args


def parse_settings(settings: list[str], names: list[str], error) -> dict[str, dict[str, int]]:
    """``["gemm06_cpp:STAGES=5"]`` -> ``{"gemm06_cpp": {"STAGES": 5}}`` (integer values)."""
    out: dict[str, dict[str, int]] = {}
    for item in settings:
        try:
            name, assignment = item.split(":", 1)
            key, value = assignment.split("=", 1)
            number = int(value)
        except ValueError:
            error(f"--set {item!r}: expected NAME:KEY=INTEGER, e.g. gemm06_cpp:STAGES=5")
        if name not in names:
            error(f"--set {item!r}: unknown kernel {name!r}; choose from {names}")
        out.setdefault(name, {})[key.strip()] = number
    return out


def plan(args: argparse.Namespace) -> tuple[list[tuple[str, str]], list[tuple[int, int, int]], list[str]]:
    """Which kernels, shapes and dtypes this run covers: cuBLAS's self-check and the notebooks' kernels (those of
    ``--only``, if given), and the references whose checkouts were given, whatever ``--only`` says."""
    given = ([(None, CUTLASS)] if args.cutlass else []) + ([(None, FASTCU)] if args.fastcu else [])
    chosen = [(a, n) for a, n in [(None, CUBLAS)] + KERNELS if not args.only or n in args.only]
    kernels = chosen[:1] + given + chosen[1:] if chosen[:1] == [(None, CUBLAS)] else given + chosen
    shapes = [(4096,) * 3] if args.quick else [(n, n, n) for n in args.size_list]
    dtypes = DTYPES[:1] if args.quick else DTYPES
    return kernels, shapes, dtypes


def methods_of(args: argparse.Namespace) -> list[str]:
    return ["flushed"] if args.quick else list(args.method_list)


# ----------------------------------------------------------------------------- the plan and its time
#: Seconds to build a kernel and check it on both dtypes the first time, on the GPU machine (16 cores; CuTe
#: C++ compiles take 12-17 s there, several variants in parallel; a CuTe DSL compile 1-3 s; fast.cu's nvcc
#: build about 10 s), and to start (Python, torch, the CUDA context, the DSL's import).
SETUP_S = {"cpp": 60.0, "cuda": 12.0, "dsl": 20.0, CUTLASS: 20.0, FASTCU: 30.0, CUBLAS: 3.0}
START_S = 25.0
#: cuBLAS's TFLOPS at the planned sizes on an H100 or H200 (753-792 measured), for the estimate only.
CUBLAS_TFLOPS = 760.0
#: Time of one L2 flush (zeroing 256 MiB) and Python's overhead per flushed row, ms and s.
FLUSH_MS, ROW_OVERHEAD_S = 0.1, 0.5
#: Expected ratio to cuBLAS where benchmarks/solutions_best.json has no row, by name prefix.
DEFAULT_RATIO = {"ladder_": 0.2, "gemm05": 0.3, "gemm06": 0.6, "hopper_": 0.8, "capstone": 1.0}
#: Kernels that take fewer dtypes than both (their cells say so in DTYPES; the plan must know before loading).
PLANNED_DTYPES = {"ladder_": ["float16"], FASTCU: ["bfloat16"]}


def priority(kernel: str, method: str) -> int:
    """0 first: the capstone, its grid before 2026-12-07 (every cluster that fits) and the public references
    under both methods, and cuBLAS's self-check, flushed; 1: 07's last kernel and the ladder's last rung under both
    methods; 2: every other kernel, flushed; 3: the other capstone attempts and cuBLAS's self-check under
    NVIDIA's method; 4: the rest under NVIDIA's method."""
    if kernel in ("capstone", "capstone_all_clusters", CUTLASS, FASTCU):
        return 0
    if kernel == CUBLAS:
        return 0 if method == "flushed" else 3
    if kernel in ("hopper_ws", "ladder_any"):
        return 1
    if method == "flushed":
        return 2
    return 3 if kernel.startswith("capstone") else 4


def kind_of(kernel: str) -> str:
    """Which SETUP_S entry a kernel's build and check take."""
    if kernel in (CUTLASS, FASTCU, CUBLAS):
        return kernel
    if kernel.endswith("_cpp"):
        return "cpp"
    return "cuda" if kernel.startswith("ladder_") else "dsl"


def planned_dtypes(kernel: str, dtypes: list[str]) -> list[str]:
    for prefix, allowed in PLANNED_DTYPES.items():
        if kernel.startswith(prefix):
            return [d for d in dtypes if d in allowed]
    return list(dtypes)


def expected_ratio(kernel: str, size: int, best: dict) -> float:
    """The kernel's ratio to cuBLAS at about ``size``: its best flushed row nearest in size (any GPU, fp16
    first), else by its name (DEFAULT_RATIO), else 1."""
    found = []
    for rows in best.get("devices", {}).values():
        for key, row in rows.get(kernel, {}).items():
            parts = key.split()
            if len(parts) == 2 and row.get("ratio"):
                n = int(parts[0].split("x")[0])
                found.append((abs(math.log(n / size)), parts[1] != "float16", float(row["ratio"])))
    if found:
        return min(found)[2]
    return next((r for prefix, r in DEFAULT_RATIO.items() if kernel.startswith(prefix)), 1.0)


def row_seconds(method: str, kernel_ms: float, cublas_ms: float) -> float:
    """Estimated seconds of one bench_gemm row: both sides of ``method`` (gemmlab.timing.bench) at these call times."""
    from gemmlab.timing.steady_timing import SteadyPlan, steady_iterations
    from gemmlab.timing.events import round_reps

    total = 0.0
    for ms in (kernel_ms, cublas_ms):
        if method == "flushed":
            calls = 12 * round_reps(ms, 12)
            total += 0.025 + 8 * ms / 1e3 + calls * (ms + FLUSH_MS) / 1e3
        else:
            steady = SteadyPlan()
            total += steady.warmup_s + steady_iterations(ms, steady) * ms / 1e3 + steady.cooldown_s + 0.3
    return total + ROW_OVERHEAD_S


@dataclass(frozen=True)
class PlannedRow:
    kernel: str
    shape: tuple
    dtype: str
    method: str
    priority: int
    estimate_s: float

    @property
    def key(self) -> tuple:
        return (self.kernel, row_key(self.shape, self.dtype, self.method))


@dataclass
class RunPlan:
    """The rows a run times, in the order it times them, what the budget left out, and the estimate."""

    kernels: list                                         # (assignment or None, name), in table order
    rows: list = field(default_factory=list)              # PlannedRow, run order: by priority, then kernel
    left_out: list = field(default_factory=list)
    setup_s: dict = field(default_factory=dict)           # kernel -> build and check seconds
    budget_s: float | None = None

    @property
    def total_s(self) -> float:
        used = {r.kernel for r in self.rows}
        return START_S + sum(self.setup_s[k] for k in used) + sum(r.estimate_s for r in self.rows)

    def text(self) -> str:
        """The plan as a table of tiers, with the estimate and what was left out."""
        lines = ["| priority | rows | kernels | methods | estimated s |", "| ---: | ---: | --- | --- | ---: |"]
        for tier in sorted({r.priority for r in self.rows}):
            rows = [r for r in self.rows if r.priority == tier]
            kernels = list(dict.fromkeys(r.kernel for r in rows))
            methods = ", ".join(sorted({r.method for r in rows}))
            lines.append(f"| {tier} | {len(rows)} | {', '.join(kernels)} | {methods} | "
                         f"{sum(r.estimate_s for r in rows):.0f} |")
        used = list(dict.fromkeys(r.kernel for r in self.rows))
        setup = sum(self.setup_s[k] for k in used)
        lines += ["", f"builds and correctness checks of {len(used)} kernels: {setup:.0f} s; start: {START_S:.0f} s; "
                      f"total estimate {self.total_s:.0f} s ({self.total_s / 60:.1f} min)"
                      + (f" within a budget of {self.budget_s:.0f} s" if self.budget_s else "")]
        if self.left_out:
            left = sum(r.estimate_s for r in self.left_out)
            kernels = list(dict.fromkeys(r.kernel for r in self.left_out))
            lines.append(f"left out by the budget: {len(self.left_out)} rows (about {left:.0f} s more, plus builds) "
                         f"of {', '.join(kernels)}: run again with --resume")
        return "\n".join(lines)


def build_plan(args: argparse.Namespace, best: dict, done: frozenset = frozenset()) -> RunPlan:
    """Every row the arguments ask for with its estimate, but those in ``done`` ((kernel, row key) pairs an
    earlier command finished); under ``--budget-s`` only the most important rows whose estimates (with their
    kernels' builds and checks) fit: by priority, and once one row does not fit, no row of a lower priority;
    the rest in ``left_out``."""
    kernels, shapes, dtypes = plan(args)
    methods = methods_of(args)
    cublas_ms = {s: 2.0 * s[0] * s[1] * s[2] / (CUBLAS_TFLOPS * 1e12) * 1e3 for s in shapes}
    candidates = []
    for _, name in kernels:
        fixed = FIXED_SHAPE.get(name)
        for method in (["flushed"] if fixed else methods):      # a one-tile latency is no fixed-power test
            for shape in ([fixed] if fixed else shapes):
                base = 2.0 * shape[0] * shape[1] * shape[2] / (CUBLAS_TFLOPS * 1e12) * 1e3
                ms = base / max(expected_ratio(name, shape[0], best), 1e-3)
                for dtype in planned_dtypes(name, dtypes):
                    if (name, row_key(shape, dtype, method)) in done:
                        continue
                    candidates.append(PlannedRow(name, tuple(shape), dtype, method, priority(name, method),
                                                 row_seconds(method, ms, cublas_ms.get(shape, base))))
    order = {name: i for i, (_, name) in enumerate(kernels)}
    candidates.sort(key=lambda r: (r.priority, order[r.kernel], METHODS.index(r.method), r.shape, r.dtype))
    result = RunPlan(kernels, setup_s={name: SETUP_S[kind_of(name)] for _, name in kernels}, budget_s=args.budget_s)
    spent, built, full_at = START_S, set(), None
    for row in candidates:
        cost = row.estimate_s + (0.0 if row.kernel in built else result.setup_s[row.kernel])
        # Once a row does not fit, rows of its priority may still fill the budget, but none of a lower one.
        if args.budget_s is not None and (spent + cost > args.budget_s or (full_at is not None and row.priority > full_at)):
            full_at = row.priority if full_at is None else full_at
            result.left_out.append(row)
            continue
        result.rows.append(row)
        spent += cost
        built.add(row.kernel)
    return result


def assignment_of(name: str) -> str | None:
    """The assignment whose notebook defines solution kernel (or step) ``name``, else None."""
    return next((a for a, n in KERNELS if n == name), None)


def tags_for(assignment: str, name: str) -> list[str]:
    """The ``kernel:*`` cells to run for ``name``, in notebook order: its own cell plus the shared
    helper cells (a launcher, a vector-width helper...), but not the other solution kernels' cells."""
    import nbformat
    import solution_cells

    nb = nbformat.read(solution_cells.notebook_path(assignment), as_version=4)
    others = {kernel_tag(n) for _, n in KERNELS if n != name and n not in VARIANTS}
    wanted = [t for c in nb.cells if c.cell_type == "code" for t in tags(c)
              if t.startswith(KERNEL_TAG) and t not in others]
    if kernel_tag(name) not in wanted:
        raise solution_cells.SolutionCellError(f"{assignment}: no code cell tagged {kernel_tag(name)!r}")
    return list(dict.fromkeys(wanted))


def load_kernel(assignment: str, name: str, overrides: dict[str, int] | None = None,
                sources: dict[str, str] | None = None):
    """(gemm function, namespace), or raise LookupError with a reason to print and skip.

    ``sources``: code to run instead of some of the cells, by tag (see solution_cells.load_namespace)."""
    import solution_cells

    alias = name
    name, settings = VARIANTS.get(name, (name, {}))
    if alias in ATTEMPTS:
        tag = kernel_tag(name)
        code = (Path(__file__).resolve().parent / ATTEMPTS[alias]).read_text()
        sources = {**(sources or {}), tag: solution_cells.cell_source(assignment, tag) + "\n\n" + code}
    try:
        ns = solution_cells.load_namespace(assignment, tags_for(assignment, name), sources)
    except solution_cells.SolutionCellError as err:
        raise LookupError(str(err)) from None
    for key, value in settings.items():
        if key not in ns:
            raise LookupError(f"{alias}: the cell of {name} no longer defines {key}")
        ns[key] = value
    if overrides:
        configure = ns.get(f"configure_{name.rsplit('_', 1)[-1]}")
        if callable(configure):
            configure(**overrides)
        else:  # a DSL cell configured by module-level constants (WS_STAGES = 3 ...): set them
            unknown = [k for k in overrides if not isinstance(ns.get(k), int)]
            if unknown:
                raise LookupError(f"the cell of {name} defines no configure_{name.rsplit('_', 1)[-1]}(**changes) "
                                  f"and no integer constant {', '.join(unknown)} to apply --set")
            ns.update(overrides)
    # The cell defines the GEMM function itself (notebook 05 builds it with cpp_gemm_from/dsl_gemm_from);
    # wrapping it again would hand the finished 5-argument function to a factory that expects a kernel.
    function = FUNCTIONS.get(name, name)
    fn = ns.get(function)
    if not callable(fn):
        raise LookupError(f"the cell tagged kernel:{name} does not define a callable {function!r}")
    return fn, ns


def convention_of(fn, ns: dict, name: str) -> str:
    """'tn' for fn(A, B, D), 'nn' for fn(A, B, C, alpha, beta): declared by the cell, else from the signature."""
    declared = ns.get(f"{name.upper()}_CONVENTION") or ns.get("CONVENTION")
    if declared in ("tn", "nn"):
        return declared
    params = getattr(fn, "_params", None)  # a gemmlab DslKernel: its jit function's parameters
    if params is not None:
        from gemmlab.dsl import convert

        count = len(convert.user_params(params))
    else:
        try:
            count = len([p for p in inspect.signature(fn).parameters.values()
                         if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])
        except (TypeError, ValueError):
            count = 3
    return "nn" if count >= 5 else "tn"


def declared(ns: dict, name: str, key: str, default):
    """What the kernel's cells declare as ``<NAME>_<KEY>`` (or plain ``<KEY>``), else ``default``:
    ``CHECK_SHAPES`` narrows the correctness shapes (a kernel for whole tiles only), ``DTYPES`` the dtypes."""
    value = ns.get(f"{name.upper()}_{key}")
    return value if value is not None else ns.get(key, default)


class Backend(Protocol):
    """What the benchmark asks of the GPU: a first call, the correctness suite and a timing."""

    def first_call(self, fn, convention: str, shape: tuple, dtype: str) -> None: ...

    def check(self, fn, convention: str, dtype: str, shapes: list) -> tuple[bool, str]: ...

    def bench(self, fn, shape: tuple, convention: str, dtype: str, label: str, method: str) -> Any: ...


class GpuBackend:
    """The real thing: torch tensors on the GPU, ``gemmlab.check_gemm`` and ``gemmlab.bench_gemm``."""

    def first_call(self, fn, convention: str, shape: tuple, dtype: str = "float16") -> None:
        import torch

        m, n, k = shape
        t = getattr(torch, dtype)
        A = torch.randn(m, k, device="cuda").to(t)
        B = torch.randn((n, k) if convention == "tn" else (k, n), device="cuda").to(t)
        D = torch.empty(m, n, device="cuda", dtype=t)
        fn(A, B, D) if convention == "tn" else fn(A, B, D, 1.0, 0.0)
        torch.cuda.synchronize()

    def check(self, fn, convention: str, dtype: str, shapes: list) -> tuple[bool, str]:
        import torch

        import gemmlab

        result = gemmlab.check_gemm(fn, convention=convention, dtype=getattr(torch, dtype), shapes=shapes)
        return bool(result.passed), str(result)

    def bench(self, fn, shape: tuple, convention: str, dtype: str, label: str, method: str = "flushed") -> Any:
        import torch

        import gemmlab

        return gemmlab.bench_gemm(fn, shape=shape, convention=convention, dtype=getattr(torch, dtype), label=label,
                                  method=method)


def cublas_gemm(A, B, D) -> None:
    """cuBLAS through torch, timed as if it were a kernel: each method's ratio of cuBLAS to itself."""
    import torch

    torch.matmul(A, B.T, out=D)


def load_reference(name: str, args) -> tuple:
    """(gemm function, namespace) of a reference row, or LookupError with the reason to skip it."""
    if name == CUBLAS:
        return cublas_gemm, {"CONVENTION": "tn", "CHECK_SHAPES": [(256, 512, 256), (640, 384, 4096), (3, 5, 7)]}
    if name == CUTLASS:
        import cutlass_reference

        fn = cutlass_reference.persistent_gemm(cutlass_reference.load_example(args.cutlass))
        return fn, {"CONVENTION": "tn", "CHECK_SHAPES": cutlass_reference.CHECK_SHAPES}
    if name == FASTCU:
        import fastcu_reference

        library = fastcu_reference.build(args.fastcu, Path(args.out) / "fastcu-build")
        return fastcu_reference.gemm_from(library), {"CONVENTION": "tn", "CHECK_SHAPES": fastcu_reference.CHECK_SHAPES,
                                                     "DTYPES": fastcu_reference.DTYPES}
    raise LookupError(f"no reference named {name!r}")


@dataclass
class Prepared:
    """A kernel loaded, called once and checked: what its rows need."""

    fn: Any
    convention: str
    dtypes: list


class Progress:
    """Rows and correctness checks of a run, written as each finishes (``rows.jsonl``, ``checks.json`` under
    ``--out``), so a run stopped by its budget or its time limit loses nothing and ``--resume`` goes on."""

    def __init__(self, folder: Path, fresh: bool) -> None:
        self.folder = Path(folder)
        self.rows_file, self.checks_file = self.folder / "rows.jsonl", self.folder / "checks.json"
        self.folder.mkdir(parents=True, exist_ok=True)
        if fresh:
            self.rows_file.unlink(missing_ok=True)
            self.checks_file.unlink(missing_ok=True)

    def rows(self) -> list[tuple[str, Row]]:
        out = []
        if self.rows_file.is_file():
            for line in self.rows_file.read_text().splitlines():
                try:
                    item = json.loads(line)
                    fields = {k: v for k, v in item["row"].items() if k in Row.__dataclass_fields__}
                    fields["shape"] = tuple(fields["shape"])
                    out.append((item["kernel"], Row(**fields)))
                except (ValueError, KeyError, TypeError):
                    continue                    # a line cut short by a stopped run
        return out

    def add_row(self, kernel: str, row: Row) -> None:
        data = {k: v for k, v in asdict(row).items() if k not in ("previous", "versus")}
        with self.rows_file.open("a") as f:
            f.write(json.dumps({"kernel": kernel, "row": data}, default=str) + "\n")

    def checks(self) -> dict:
        try:
            return json.loads(self.checks_file.read_text()) if self.checks_file.is_file() else {}
        except ValueError:
            return {}

    def set_check(self, kernel: str, record: dict) -> None:
        checks = self.checks()
        checks[kernel] = record
        self.checks_file.write_text(json.dumps(checks, indent=1))


def prepare(rep: KernelReport, assignment: str | None, args, backend: Backend, progress: Progress) -> Prepared | None:
    """Load the kernel, call it once and check it (unless an earlier run of ``--resume`` did): None when it is
    skipped or wrong (``rep`` says why)."""
    name = rep.kernel
    try:
        fn, ns = load_reference(name, args) if assignment is None else load_kernel(assignment, name,
                                                                                    args.overrides.get(name))
    except LookupError as err:
        rep.status, rep.reason = "skipped", str(err)
        print(f"- {name}: skipped ({err})")
        return None
    base = VARIANTS.get(name, (name,))[0]
    rep.convention = conv = convention_of(fn, ns, base)
    check_shapes = [FIXED_SHAPE[name]] if name in FIXED_SHAPE else declared(ns, base, "CHECK_SHAPES", ODD_SHAPES)
    kernel_dtypes = [d for d in declared(ns, base, "DTYPES", DTYPES) if d in DTYPES]
    t0 = time.perf_counter()
    try:
        backend.first_call(fn, conv, FIXED_SHAPE.get(name, (256, 256, 256)), kernel_dtypes[0])
    except Exception as err:  # noqa: BLE001 - report any build or launch failure and go on
        rep.status, rep.reason = "failed", f"first call failed: {err}"
        print(f"- {name}: FAILED on its first call: {err}")
        progress.set_check(name, {"status": rep.status, "reason": rep.reason, "correct": {}})
        return None
    rep.first_call_s = time.perf_counter() - t0
    print(f"- {name} ({conv}): compile + first call {rep.first_call_s:.1f} s")
    earlier = progress.checks().get(name)
    if earlier and earlier.get("status") == "ok" and earlier.get("correct"):
        rep.correct, rep.check_s = dict(earlier["correct"]), earlier.get("check_s")
        print(f"  check_gemm: correct in the earlier run ({', '.join(rep.correct)})")
    elif not args.no_check:
        t0 = time.perf_counter()
        for dt in [d for d in (DTYPES[:1] if args.quick else DTYPES) if d in kernel_dtypes]:
            passed, text = backend.check(fn, conv, dt, check_shapes)
            rep.correct[dt] = passed
            if not passed:
                rep.status = "failed"
                rep.reason = f"check_gemm failed ({dt})"
                print(text)
        rep.check_s = time.perf_counter() - t0
        verdict = "correct" if rep.status == "ok" else "WRONG"
        print(f"  check_gemm on {len(check_shapes)} shapes: {verdict} ({rep.check_s:.1f} s incl. compiles)")
        progress.set_check(name, {"status": rep.status, "reason": rep.reason, "correct": rep.correct,
                                  "check_s": rep.check_s})
    if rep.status != "ok":
        return None
    return Prepared(fn, conv, kernel_dtypes)


def bench_row(name: str, ready: Prepared, planned: "PlannedRow", backend: Backend) -> Row | None:
    """One timed row (None when the kernel does not take the row's dtype); a failure is the row's note."""
    if planned.dtype not in ready.dtypes:
        return None
    shape, dt, method = planned.shape, planned.dtype, planned.method
    row = Row(name, shape, dt, method=method)
    where = f"  {'x'.join(map(str, shape)):>14} {dt:9s} {method:8s}"
    try:
        r = backend.bench(ready.fn, shape, ready.convention, dt, name, method)
    except Exception as err:  # noqa: BLE001 - one row's failure is that row's note, never the end of the run
        row.note = f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}"[:300]
        print(f"{where} failed: {row.note}")
        return row
    row.tflops, row.cublas_tflops, row.ratio = r.tflops, r.cublas_tflops, r.ratio
    row.ratio_low, row.ratio_high, row.coverage = r.ratio_low, r.ratio_high, r.coverage
    row.round_ratios = list(r.round_ratios)
    for attr in ("fill", "sm_clock_mhz", "power_w", "cublas_sm_clock_mhz", "cublas_power_w", "tensor_share", "settled"):
        setattr(row, attr, getattr(r, attr, getattr(row, attr)))
    print(f"{where} {r.tflops:7.1f} TFLOPS  cuBLAS {r.cublas_tflops:7.1f}  ratio {r.ratio:.3f} "
          f"({interval(row) or 'no interval'}; {clock_text(row)})", flush=True)
    return row


# ----------------------------------------------------------------------------- previous best rows
def load_best(path: Path) -> dict:
    """``{"devices": {device: {kernel: {"4096x4096x4096 float16": row}}}}`` ({} when there is no file)."""
    path = Path(path)
    if not path.is_file():
        return {"devices": {}}
    data = json.loads(path.read_text())
    data.setdefault("devices", {})
    return data


def previous_best(best: dict, device: str, kernel: str, key: str) -> dict | None:
    return best.get("devices", {}).get(device, {}).get(kernel, {}).get(key)


def versus(row: Row, previous: dict | None) -> str:
    """This row against the previous best: 'faster', 'slower' or 'within noise' (beyond the noise
    where both carry per-round ratios), else the plain difference of the ratios."""
    if previous is None or not row.ratio:
        return ""
    from gemmlab.timing import spread

    old = previous.get("round_ratios") or []
    if len(row.round_ratios) >= 2 and len(old) >= 2:
        c = spread.between(row.kernel, "previous best", row.round_ratios, old)
        return f"{c.verdict} ({c.ratio:.3f}×, {spread.interval_text(c.low, c.high, c.coverage)})"
    return f"{row.ratio - float(previous['ratio']):+.3f} (no rounds on both sides: noise unknown)"


def attach_previous(reports: list[KernelReport], best: dict, device: str) -> None:
    for rep in reports:
        for row in rep.rows:
            row.previous = previous_best(best, device, row.kernel, row.key)
            row.versus = versus(row, row.previous)


def update_best(best: dict, reports: list[KernelReport], device: str, date: str, commit: str) -> list[str]:
    """Put every row whose ratio beats (or first fills) its previous best into ``best``; the names of those rows."""
    changed = []
    for rep in reports:
        for row in rep.rows:
            old = previous_best(best, device, row.kernel, row.key)
            if not row.ratio or (old is not None and row.ratio <= float(old["ratio"])):
                continue
            best.setdefault("devices", {}).setdefault(device, {}).setdefault(row.kernel, {})[row.key] = {
                "ratio": round(row.ratio, 4), "ratio_low": _rounded(row.ratio_low), "ratio_high": _rounded(row.ratio_high),
                "coverage": _rounded(row.coverage), "round_ratios": [round(v, 5) for v in row.round_ratios],
                "tflops": round(row.tflops, 1), "cublas_tflops": round(row.cublas_tflops, 1),
                "date": date, "commit": commit, "method": row.method, "fill": row.fill,
                "sm_clock_mhz": _rounded(row.sm_clock_mhz), "power_w": _rounded(row.power_w),
                "cublas_sm_clock_mhz": _rounded(row.cublas_sm_clock_mhz), "cublas_power_w": _rounded(row.cublas_power_w)}
            changed.append(f"{row.kernel} {row.key}")
    return changed


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def save_best(best: dict, path: Path) -> None:
    Path(path).write_text(json.dumps(best, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


# ----------------------------------------------------------------------------- the table
def interval(row: Row) -> str:
    if row.ratio_low is None or row.ratio_high is None:
        return ""
    from gemmlab.timing.spread import interval_text

    return interval_text(row.ratio_low, row.ratio_high, row.coverage or 0.0)


def _previous_text(previous: dict | None) -> str:
    if previous is None:
        return "-"
    span = (f" ({previous['ratio_low']:.3f}–{previous['ratio_high']:.3f})"
            if previous.get("ratio_low") is not None and previous.get("ratio_high") is not None else "")
    when = ", ".join(str(previous[k]) for k in ("date", "commit") if previous.get(k))
    return f"{float(previous['ratio']):.3f}{span}" + (f" [{when}]" if when else "")


def clock_text(row: Row) -> str:
    """'1,710/1,695 MHz 699/700 W' (the kernel's and cuBLAS's), or '-' where nothing was sampled."""
    if row.sm_clock_mhz is None or row.cublas_sm_clock_mhz is None:
        return "-"
    return (f"{row.sm_clock_mhz:,.0f}/{row.cublas_sm_clock_mhz:,.0f} MHz "
            f"{row.power_w:,.0f}/{row.cublas_power_w:,.0f} W")


def markdown(reports: list[KernelReport], device: str) -> str:
    lines = [f"Solution kernels on {device}", "",
             "| kernel | conv | shape | dtype | method | TFLOPS | cuBLAS | ratio | interval | previous best | vs previous "
             "| correct | compile+1st call | clock, power (yours/cuBLAS) |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | --- | --- | --- | --- | ---: | --- |"]
    for rep in reports:
        correct = ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in rep.correct.items()) or "-"
        first = f"{rep.first_call_s:.1f} s" if rep.first_call_s is not None else "-"
        if not rep.rows:
            lines.append(f"| {rep.kernel} | {rep.convention} | - | - | - | - | - | - | - | - | - | {correct} | {first} | - |"
                         + (f" {rep.status}: {rep.reason}" if rep.status != "ok" else ""))
        for row in rep.rows:
            tf = f"{row.tflops:.1f}" if row.tflops else "-"
            cb = f"{row.cublas_tflops:.1f}" if row.cublas_tflops else "-"
            ratio = f"{row.ratio:.3f}" if row.ratio else row.note or "-"
            lines.append(f"| {rep.kernel} | {rep.convention} | {'×'.join(map(str, row.shape))} | {row.dtype} | "
                         f"{row.method} | {tf} | {cb} | {ratio} | {interval(row) or '-'} | {_previous_text(row.previous)} | "
                         f"{row.versus or '-'} | {correct} | {first} | {clock_text(row)} |")
    lines += ["", "method: flushed = the course's (interleaved rounds, L2 flushed, normal fills); nvidia = NVIDIA's "
              "fixed-power method (settled clocks, rotated operands, uniform fills), docs/TIMING.md. interval: holds "
              "the median per-round ratio of this run's conditions with the stated probability; vs previous: this row "
              "against the previous best row on this GPU by the same method, beyond the noise or within it; clock, "
              "power: medians while the kernel and while cuBLAS were timed."]
    return "\n".join(lines)


def run_all(args, backend: Backend, device: str, started: float | None = None,
            clock=time.monotonic) -> tuple[list[KernelReport], str]:
    """Every planned row (the references, asked for, among them) in one run, most important first, each row
    beside its previous best; stops starting rows once ``--budget-s`` is spent. The reports (with the rows of
    an earlier run under ``--resume``) and the markdown table."""
    best = load_best(args.best)
    progress = Progress(args.out, fresh=not args.resume)
    finished = progress.rows()
    run_plan = build_plan(args, best, frozenset((kernel, row.key) for kernel, row in finished))
    reports = {name: KernelReport(name, assignment or "reference") for assignment, name in run_plan.kernels}
    assignments = dict((name, assignment) for assignment, name in run_plan.kernels)
    for kernel, row in finished:
        if kernel in reports:
            reports[kernel].rows.append(row)
    for kernel, record in progress.checks().items():
        if kernel in reports and record.get("status") in ("failed", "skipped"):
            reports[kernel].status, reports[kernel].reason = record["status"], record.get("reason", "")
            reports[kernel].correct = dict(record.get("correct") or {})
    done = {(kernel, row.key) for kernel, rep in reports.items() for row in rep.rows}
    start = clock() if started is None else started
    ready: dict[str, Prepared | None] = {}
    left = list(run_plan.left_out)
    for index, planned in enumerate(run_plan.rows):
        rep = reports[planned.kernel]
        if planned.key in done or rep.status != "ok":
            continue
        setup = 0.0 if planned.kernel in ready else run_plan.setup_s[planned.kernel]
        if args.budget_s is not None and clock() - start + setup + planned.estimate_s > args.budget_s:
            left.append(planned)
            continue
        if planned.kernel not in ready:
            ready[planned.kernel] = prepare(rep, assignments[planned.kernel], args, backend, progress)
        if ready[planned.kernel] is None:
            continue
        row = bench_row(planned.kernel, ready[planned.kernel], planned, backend)
        if row is None:
            continue
        rep.rows.append(row)
        progress.add_row(planned.kernel, row)
        if row.note.startswith("ContextLostError"):
            print("the CUDA context is lost: no later row can run in this process; run again with --resume")
            left += [r for r in run_plan.rows[index + 1:] if r.key not in done]
            break
    if left:
        print(f"\n{len(left)} row(s) not run here (budget or a lost context), about "
              f"{sum(r.estimate_s for r in left):.0f} s: run again with --resume --out {args.out}")
    ordered = [reports[name] for _, name in run_plan.kernels]
    attach_previous(ordered, best, device)
    return ordered, markdown(ordered, device)


def chart(reports: list[KernelReport], path: Path, device: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(rep.kernel, row) for rep in reports for row in rep.rows if row.ratio]
    if not rows:
        return
    labels = [f"{k}\n{r.shape[0]}³ {r.dtype}" + ("\nnvidia" if r.method == "nvidia" else "") for k, r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows)), 4))
    yerr = [[r.ratio - (r.ratio_low if r.ratio_low is not None else r.ratio) for _, r in rows],
            [(r.ratio_high if r.ratio_high is not None else r.ratio) - r.ratio for _, r in rows]]
    ax.bar(range(len(rows)), [r.ratio for _, r in rows], yerr=yerr, capsize=2, color="tab:blue")
    previous = [(i, float(r.previous["ratio"])) for i, (_, r) in enumerate(rows) if r.previous]
    if previous:
        ax.scatter([i for i, _ in previous], [v for _, v in previous], marker="_", s=200, color="tab:red",
                   zorder=3, label="previous best")
        ax.legend(fontsize=7)
    ax.axhline(1.0, color="black", lw=1)
    ax.set_xticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylabel("ratio to cuBLAS, same run (whiskers: interval)")
    ax.set_title(f"Course solution kernels vs cuBLAS on {device}")
    for i, (_, r) in enumerate(rows):
        ax.text(i, r.ratio, f"{r.tflops:.0f}", ha="center", va="bottom", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    args = parse_args(argv)
    if args.plan:
        finished = Progress(args.out, fresh=False).rows() if args.resume else []
        print(build_plan(args, load_best(args.best), frozenset((k, r.key) for k, r in finished)).text())
        return 0
    from gemmlab.running.gpu import has_gpu

    if not has_gpu():
        print("benchmarks/solutions.py needs a CUDA GPU: it runs and times the kernels. "
              "Run it on a GPU machine (--plan shows what it would run; tests/benchmarks/test_solutions.py covers the "
              "CPU-side logic).")
        return 2
    import torch

    device = torch.cuda.get_device_name()
    kernels, shapes, dtypes = plan(args)
    print(f"device: {device}; kernels: {[n for _, n in kernels]}; shapes: {shapes}; dtypes: {dtypes}; "
          f"methods: {methods_of(args)}" + (f"; resuming {args.out}" if args.resume else ""))
    finished = Progress(args.out, fresh=False).rows() if args.resume else []
    print(build_plan(args, load_best(args.best), frozenset((k, r.key) for k, r in finished)).text() + "\n", flush=True)
    reports, table = run_all(args, GpuBackend(), device, started)
    print()
    print(table)
    if args.update_best:
        best = load_best(args.best)
        changed = update_best(best, reports, device, datetime.date.today().isoformat(), git_commit())
        save_best(best, args.best)
        print(f"\n{args.best}: {len(changed)} row(s) recorded as the new best" + (f": {changed}" if changed else ""))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"device": device, "reports": [asdict(r) for r in reports]},
                                                      indent=1, default=str))
    (args.out / "results.md").write_text(table + "\n")
    chart(reports, args.out / "solutions.png", device)
    print(f"\nsaved {args.out / 'results.json'}, results.md and solutions.png; {time.monotonic() - started:.0f} s in all")
    from gemmlab.timing.events import gate_extensions

    print(f"timed batches queued again behind a longer GPU sleep (their first gate ran out early): {gate_extensions()}")
    failed = [r.kernel for r in reports if r.status == "failed"]
    if failed:
        print(f"FAILED: {failed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
