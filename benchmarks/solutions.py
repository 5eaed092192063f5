#!/usr/bin/env python3
"""The course's solution GEMM kernels against cuBLAS: correctness, TFLOPS, ratio with its noise, compile time.

    python benchmarks/solutions.py                       # every solution kernel, fp16+bf16, 4096³ and 8192³
    python benchmarks/solutions.py --quick               # 4096³ fp16 only
    python benchmarks/solutions.py --only gemm06_cpp     # one kernel (repeatable)
    python benchmarks/solutions.py --only gemm06_cpp --set gemm06_cpp:STAGES=5 --set gemm06_cpp:BK=32
    python benchmarks/solutions.py --cutlass ~/cutlass   # + NVIDIA's persistent Hopper example, same run
    python benchmarks/solutions.py --update-best         # record rows that beat benchmarks/solutions_best.json

The kernels come from the solutions notebooks (cells tagged ``kernel:<name>``, read with
tools/solution_cells.py), so this measures exactly what the course ships. Each kernel is
first checked with ``gemmlab.check_gemm`` on odd shapes (fp16 and bf16), then timed with
``gemmlab.bench_gemm``, which measures cuBLAS on the same problem in the same run. Prints a
markdown table, saves ``results.json`` and ``solutions.png`` under ``--out``, and exits 1
if any correctness check fails (2 if there is no GPU). ``--set NAME:KEY=VALUE`` changes a
kernel's configuration through the ``configure_<front-end>(**changes)`` function its cell
defines, or through the cell's integer constants (e.g. ``--set hopper_ws:WS_GROUP_M=16``) where
it defines no such function, for tuning runs.

An attempt too different to be a change of settings (``ATTEMPTS``: the ping-pong capstone) is a file
under ``benchmarks/attempts/`` run right after its kernel's cell, in the same namespace, redefining what
it changes; its row stands beside the others, losers included.

Every ratio comes with its interval (``bench_gemm``'s interleaved rounds, docs/TIMING.md), and
each row stands beside the previous best row of the same kernel, shape and dtype on the same GPU
from ``benchmarks/solutions_best.json``, with the verdict of comparing the two beyond the noise
(an exact rank-sum interval on both runs' per-round ratios, where both have them).
``--update-best`` writes the rows whose ratio beats the previous best back into that file.
``--cutlass PATH`` also times ``examples/python/CuTeDSL/hopper/dense_gemm_persistent.py`` of
that CUTLASS checkout (128×256 tiles, 2×1 clusters) as the public reference
(benchmarks/cutlass_reference.py).
"""
from __future__ import annotations

import argparse
import datetime
import inspect
import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

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
    ("09_capstone", "capstone_no_stream_k"),
    ("09_capstone", "capstone_pingpong"),
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
    # 4 stages and slices, every item whole: the partial last wave left idle
    "capstone_no_stream_k": ("capstone", {"CAP_STREAM_K": 0}),
    # the two consumer warpgroups in ping-pong on 64x256 tiles (ATTEMPTS: code run after the cell)
    "capstone_pingpong": ("capstone", {}),
}
#: Attempts too different from their kernel to be a change of its settings: a file of code run right after
#: the kernel's cell, in its namespace, that redefines what it changes (name -> file under benchmarks/).
ATTEMPTS = {"capstone_pingpong": "attempts/capstone_pingpong.py"}
#: Kernels that compute one fixed tile (notebook 07's first step, one CTA): checked and timed at that
#: shape only; their "ratio" is a latency comparison with cuBLAS on the same tiny problem.
FIXED_SHAPE = {"hopper_one_tile": (64, 128, 64)}
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192)]
DTYPES = ["float16", "bfloat16"]
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

    @property
    def key(self) -> str:
        """How the row is filed in BEST: '4096x4096x4096 float16'."""
        return f"{'x'.join(map(str, self.shape))} {self.dtype}"


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only 4096³ with fp16")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="benchmark only this kernel (e.g. gemm06_cpp); repeatable")
    ap.add_argument("--set", action="append", default=[], metavar="NAME:KEY=VALUE", dest="settings",
                    help="configuration change passed to the kernel cell's configure_* function; repeatable")
    ap.add_argument("--out", type=Path, default=Path("bench-out"), help="folder for results.json and solutions.png")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness suite (tuning runs only)")
    ap.add_argument("--best", type=Path, default=BEST, help="JSON of previous best rows (default: %(default)s)")
    ap.add_argument("--update-best", action="store_true",
                    help="write rows whose ratio beats the previous best (same GPU) into --best")
    ap.add_argument("--cutlass", type=Path, metavar="PATH",
                    help="a CUTLASS checkout: also time its persistent Hopper CuTe DSL example in this run")
    args = ap.parse_args(argv)
    names = [n for _, n in KERNELS]
    unknown = [n for n in args.only if n not in names]
    if unknown:
        ap.error(f"unknown kernel(s) {unknown}; choose from {names}")
    args.overrides = parse_settings(args.settings, names, ap.error)
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
    """Which kernels, shapes and dtypes this run covers."""
    kernels = [(a, n) for a, n in KERNELS if not args.only or n in args.only]
    shapes = SHAPES[:1] if args.quick else SHAPES
    dtypes = DTYPES[:1] if args.quick else DTYPES
    return kernels, shapes, dtypes


def assignment_of(name: str) -> str | None:
    """The assignment whose notebook defines solution kernel (or step) ``name``, else None."""
    return next((a for a, n in KERNELS if n == name), None)


def tags_for(assignment: str, name: str) -> list[str]:
    """The ``kernel:*`` cells to run for ``name``, in notebook order: its own cell plus the shared
    helper cells (a launcher, a vector-width helper...), but not the other solution kernels' cells."""
    import nbformat
    import solution_cells

    nb = nbformat.read(solution_cells.notebook_path(assignment), as_version=4)
    others = {f"kernel:{n}" for _, n in KERNELS if n != name and n not in VARIANTS}
    tags = [t for c in nb.cells if c.cell_type == "code" for t in c.get("metadata", {}).get("tags", [])
            if t.startswith("kernel:") and t not in others]
    if f"kernel:{name}" not in tags:
        raise solution_cells.SolutionCellError(f"{assignment}: no code cell tagged 'kernel:{name}'")
    return list(dict.fromkeys(tags))


def load_kernel(assignment: str, name: str, overrides: dict[str, int] | None = None,
                sources: dict[str, str] | None = None):
    """(gemm function, namespace), or raise LookupError with a reason to print and skip.

    ``sources``: code to run instead of some of the cells, by tag (see solution_cells.load_namespace)."""
    import solution_cells

    alias = name
    name, settings = VARIANTS.get(name, (name, {}))
    if alias in ATTEMPTS:
        tag = f"kernel:{name}"
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

    def first_call(self, fn, convention: str, shape: tuple) -> None: ...

    def check(self, fn, convention: str, dtype: str, shapes: list) -> tuple[bool, str]: ...

    def bench(self, fn, shape: tuple, convention: str, dtype: str, label: str) -> Any: ...


class GpuBackend:
    """The real thing: torch tensors on the GPU, ``gemmlab.check_gemm`` and ``gemmlab.bench_gemm``."""

    def first_call(self, fn, convention: str, shape: tuple) -> None:
        import torch

        m, n, k = shape
        A = torch.randn(m, k, device="cuda").half()
        B = torch.randn((n, k) if convention == "tn" else (k, n), device="cuda").half()
        D = torch.empty(m, n, device="cuda").half()
        fn(A, B, D) if convention == "tn" else fn(A, B, D, 1.0, 0.0)
        torch.cuda.synchronize()

    def check(self, fn, convention: str, dtype: str, shapes: list) -> tuple[bool, str]:
        import torch

        import gemmlab

        result = gemmlab.check_gemm(fn, convention=convention, dtype=getattr(torch, dtype), shapes=shapes)
        return bool(result.passed), str(result)

    def bench(self, fn, shape: tuple, convention: str, dtype: str, label: str) -> Any:
        import torch

        import gemmlab

        return gemmlab.bench_gemm(fn, shape=shape, convention=convention, dtype=getattr(torch, dtype), label=label)


def run_kernel(assignment: str, name: str, args, shapes, dtypes, backend: Backend | None = None,
               loaded: tuple | None = None) -> KernelReport:
    """Load (or take ``loaded`` = (fn, ns)), call once, check and time one kernel."""
    from gemmlab.errors import GemmlabError

    backend = backend or GpuBackend()
    rep = KernelReport(name, assignment)
    try:
        fn, ns = loaded if loaded is not None else load_kernel(assignment, name, args.overrides.get(name))
    except LookupError as err:
        rep.status, rep.reason = "skipped", str(err)
        print(f"- {name}: skipped ({err})")
        return rep
    base = VARIANTS.get(name, (name,))[0]
    rep.convention = conv = convention_of(fn, ns, base)
    check_shapes = declared(ns, base, "CHECK_SHAPES", ODD_SHAPES)
    if name in FIXED_SHAPE:
        check_shapes = shapes = [FIXED_SHAPE[name]]
    kernel_dtypes = declared(ns, base, "DTYPES", DTYPES)
    t0 = time.perf_counter()
    try:
        backend.first_call(fn, conv, FIXED_SHAPE.get(name, (256, 256, 256)))
    except Exception as err:  # noqa: BLE001 - report any build or launch failure and go on
        rep.status, rep.reason = "failed", f"first call failed: {err}"
        print(f"- {name}: FAILED on its first call: {err}")
        return rep
    rep.first_call_s = time.perf_counter() - t0
    print(f"- {name} ({conv}): compile + first call {rep.first_call_s:.1f} s")
    if not args.no_check:
        t0 = time.perf_counter()
        for dt in [d for d in (dtypes if args.quick else DTYPES) if d in kernel_dtypes]:
            passed, text = backend.check(fn, conv, dt, check_shapes)
            rep.correct[dt] = passed
            if not passed:
                rep.status = "failed"
                rep.reason = f"check_gemm failed ({dt})"
                print(text)
        rep.check_s = time.perf_counter() - t0
        verdict = "correct" if rep.status == "ok" else "WRONG"
        print(f"  check_gemm on {len(check_shapes)} shapes: {verdict} ({rep.check_s:.1f} s incl. compiles)")
        if rep.status != "ok":
            return rep
    for shape in shapes:
        for dt in [d for d in dtypes if d in kernel_dtypes]:
            row = Row(name, shape, dt)
            try:
                r = backend.bench(fn, shape, conv, dt, name)
                row.tflops, row.cublas_tflops, row.ratio = r.tflops, r.cublas_tflops, r.ratio
                row.ratio_low, row.ratio_high, row.coverage = r.ratio_low, r.ratio_high, r.coverage
                row.round_ratios = list(r.round_ratios)
                print(f"  {'x'.join(map(str, shape)):>14} {dt:9s} {r.tflops:7.1f} TFLOPS  cuBLAS {r.cublas_tflops:7.1f}"
                      f"  ratio {r.ratio:.3f} ({interval(row) or 'no interval'})")
            except GemmlabError as err:
                row.note = str(err).splitlines()[0]
                print(f"  {'x'.join(map(str, shape)):>14} {dt:9s} failed: {row.note}")
            rep.rows.append(row)
    return rep


def cutlass_report(root: Path, args, shapes, dtypes, backend: Backend | None = None) -> KernelReport:
    """NVIDIA's persistent Hopper example from the checkout at ``root``, checked and timed like a course kernel."""
    import cutlass_reference

    try:
        fn = cutlass_reference.persistent_gemm(cutlass_reference.load_example(root))
    except LookupError as err:
        rep = KernelReport(cutlass_reference.LABEL, "CUTLASS example", status="skipped", reason=str(err))
        print(f"- {rep.kernel}: skipped ({err})")
        return rep
    ns = {"CONVENTION": "tn", "CHECK_SHAPES": cutlass_reference.CHECK_SHAPES}
    return run_kernel("CUTLASS example", cutlass_reference.LABEL, args, shapes, dtypes, backend, (fn, ns))


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
    from gemmlab import spread

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
                "date": date, "commit": commit}
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
    from gemmlab.spread import interval_text

    return interval_text(row.ratio_low, row.ratio_high, row.coverage or 0.0)


def _previous_text(previous: dict | None) -> str:
    if previous is None:
        return "-"
    span = (f" ({previous['ratio_low']:.3f}–{previous['ratio_high']:.3f})"
            if previous.get("ratio_low") is not None and previous.get("ratio_high") is not None else "")
    when = ", ".join(str(previous[k]) for k in ("date", "commit") if previous.get(k))
    return f"{float(previous['ratio']):.3f}{span}" + (f" [{when}]" if when else "")


def markdown(reports: list[KernelReport], device: str) -> str:
    lines = [f"Solution kernels on {device}", "",
             "| kernel | conv | shape | dtype | TFLOPS | cuBLAS | ratio | interval | previous best | vs previous "
             "| correct | compile+1st call |",
             "| --- | --- | --- | --- | ---: | ---: | ---: | --- | --- | --- | --- | ---: |"]
    for rep in reports:
        correct = ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in rep.correct.items()) or "-"
        first = f"{rep.first_call_s:.1f} s" if rep.first_call_s is not None else "-"
        if not rep.rows:
            lines.append(f"| {rep.kernel} | {rep.convention} | - | - | - | - | - | - | - | - | {correct} | {first} |"
                         + (f" {rep.status}: {rep.reason}" if rep.status != "ok" else ""))
        for row in rep.rows:
            tf = f"{row.tflops:.1f}" if row.tflops else "-"
            cb = f"{row.cublas_tflops:.1f}" if row.cublas_tflops else "-"
            ratio = f"{row.ratio:.3f}" if row.ratio else row.note or "-"
            lines.append(f"| {rep.kernel} | {rep.convention} | {'×'.join(map(str, row.shape))} | {row.dtype} | {tf} | "
                         f"{cb} | {ratio} | {interval(row) or '-'} | {_previous_text(row.previous)} | "
                         f"{row.versus or '-'} | {correct} | {first} |")
    lines += ["", "interval: holds the median per-round ratio of this run's conditions with the stated probability "
              "(bench_gemm's rounds, docs/TIMING.md); vs previous: this row against the previous best row on this "
              "GPU, beyond the noise or within it."]
    return "\n".join(lines)


def run_all(args, backend: Backend, device: str) -> tuple[list[KernelReport], str]:
    """Every planned kernel (and the CUTLASS reference, with --cutlass) in one run, each row beside its
    previous best; the reports and the markdown table."""
    kernels, shapes, dtypes = plan(args)
    reports = []
    if args.cutlass is not None:
        reports.append(cutlass_report(args.cutlass, args, shapes, dtypes, backend))
    reports += [run_kernel(a, n, args, shapes, dtypes, backend) for a, n in kernels]
    attach_previous(reports, load_best(args.best), device)
    return reports, markdown(reports, device)


def chart(reports: list[KernelReport], path: Path, device: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(rep.kernel, row) for rep in reports for row in rep.rows if row.ratio]
    if not rows:
        return
    labels = [f"{k}\n{'×'.join(map(str, r.shape[:1]))}³ {r.dtype}" for k, r in rows]
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
    args = parse_args(argv)
    kernels, shapes, dtypes = plan(args)
    from gemmlab.gpu import has_gpu

    if not has_gpu():
        print("benchmarks/solutions.py needs a CUDA GPU: it runs and times the kernels. "
              "Run it on a GPU machine (tests/benchmarks/test_solutions.py covers the CPU-side logic).")
        return 2
    import torch

    device = torch.cuda.get_device_name()
    print(f"device: {device}; kernels: {[n for _, n in kernels]}; shapes: {shapes}; dtypes: {dtypes}"
          + (f"; reference: {args.cutlass}" if args.cutlass else ""))
    reports, table = run_all(args, GpuBackend(), device)
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
    print(f"\nsaved {args.out / 'results.json'}, results.md and solutions.png")
    from gemmlab.timing import gate_extensions

    print(f"timed batches queued again behind a longer GPU sleep (their first gate ran out early): {gate_extensions()}")
    failed = [r.kernel for r in reports if r.status == "failed"]
    if failed:
        print(f"FAILED: {failed}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
