#!/usr/bin/env python3
"""Record the course's solutions' Nsight Compute readouts and timelines into gemmlab/data (what a notebook shows
without a GPU or pool: ``gemmlab.profile(..., recorded=NAME)``, ``gemmlab.timeline(..., recorded=NAME)``).

    python benchmarks/profile_solutions.py                      # every readout and timeline below, 4096³ fp16
    python benchmarks/profile_solutions.py --only hopper_ws     # one recording's name (repeatable)
    python benchmarks/profile_solutions.py --dry-run            # list what would be recorded, touch nothing

Readouts: notebook 05's kernel (no pipeline) and 06's (the cp.async ring), 07's warp-specialised kernel, each
rung of 08's ladder, 09's capstone (kernels as in benchmarks/solutions.py), and 03's transpose with the
row-major and the swizzled index, with the bank model's prediction beside the counters. Timelines: 07's
warp-specialised kernel and 09's capstone, when their cells mark their warps (gemmlab.profiling.marks);
a kernel without marks is reported and skipped. Each file says the GPU, the ncu version and the date;
the shipped files stay labelled SYNTHETIC until this has run on a GPU.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "benchmarks"))

SHAPE = (4096, 4096, 4096)
#: recording name -> solution kernel (benchmarks/solutions.py)
READOUTS = {name: name for name in ("gemm05_cpp", "gemm06_cpp", "gemm06_dsl", "hopper_ws", "ladder_naive",
                                    "ladder_smem", "ladder_wmma", "ladder_dbuf", "ladder_swizzle", "ladder_any",
                                    "capstone")}
#: recording name -> index expression of notebook 03's transpose (its solution's, and the row-major start)
TRANSPOSES = {"transpose_row_major": "NAIVE_INDEX", "transpose_swizzled": "SMEM_INDEX"}
TIMELINES = {"hopper_ws": "hopper_ws", "capstone": "capstone"}
#: recording name -> the names of the kernel's own states (ids 32-127), as its notebook cell passes them
STATE_NAMES = {"capstone": {40: "store partial", 41: "add partials"}}
TRANSPOSE_SHAPE = (4096, 4096)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = sorted({*READOUTS, *TRANSPOSES, *TIMELINES})
    p.add_argument("--only", action="append", default=[], choices=names, metavar="NAME",
                   help=f"a recording to make (repeatable); one of {', '.join(names)}")
    p.add_argument("--out", type=Path, default=ROOT / "gemmlab" / "data", help="where the files go")
    p.add_argument("--capacity", type=int, default=2048, help="timeline records per warp (default %(default)s)")
    p.add_argument("--dry-run", action="store_true", help="list the recordings, record nothing")
    p.add_argument("--synthetic", action="store_true",
                   help="write SYNTHETIC placeholders (no GPU; labelled as such) where no recording exists yet")
    return p.parse_args(argv)


def transpose_from_notebook(index_name: str, arch: str | None = None):
    """Notebook 03's transpose (its cells' source, compiled here for ``arch``, default this GPU's) and the bank
    model's prediction per instruction."""
    import nbformat
    import numpy as np

    import gemmlab
    from gemmlab.seeing import banks
    from gemmlab.checking import cexpr
    import solution_cells

    nb = nbformat.read(solution_cells.notebook_path("03_swizzle_and_banks"), as_version=4)
    ns = {"gemmlab": gemmlab, "np": np, "banks": banks, "cexpr": cexpr, "ARCH": arch or gemmlab.current_arch()}
    wanted = ("TRANSPOSE_CU = ", "SMEM_INDEX = NAIVE_INDEX", "def build_transpose")
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith(wanted):
            exec(compile(cell.source.split("\ntry:")[0], "03", "exec"), ns)   # noqa: S102 - the course's own cells
    expr = ns[index_name]
    _, transpose = ns["build_transpose"](expr)
    prediction = ns["transpose_prediction"](expr)                     # totals over one CTA's 32 + 32 instructions
    per_instruction = {"st": tuple(v / 32 for v in prediction["st32"]), "ld": tuple(v / 32 for v in prediction["ld32"])}
    return transpose, per_instruction


def record_readout(name: str, out: Path) -> str:
    import torch

    import gemmlab
    import solutions

    if name in TRANSPOSES:
        fn, predicted = transpose_from_notebook(TRANSPOSES[name])
        readout = gemmlab.profile(fn, TRANSPOSE_SHAPE, dtype=torch.float32, transpose=True, predicted=predicted,
                                  report_dir=out / "reports")
    else:
        kernel = READOUTS[name]
        fn, ns = solutions.load_kernel(solutions.assignment_of(kernel), kernel)
        convention = solutions.convention_of(fn, ns, solutions.VARIANTS.get(kernel, (kernel,))[0])
        readout = gemmlab.profile(fn, SHAPE, convention=convention, report_dir=out / "reports")
    path = out / f"readout_{name}.json"
    path.write_text(json.dumps({**readout.to_dict(), "report_file": ""}, indent=1) + "\n")
    return f"{path.name}: {readout.label}; tensor pipe {readout.bar('tensor pipe').percent}%"


def record_timeline(name: str, out: Path, capacity: int) -> str:
    import gemmlab
    import solutions
    from gemmlab.profiling.errors import TimelineError

    kernel = TIMELINES[name]
    fn, ns = solutions.load_kernel(solutions.assignment_of(kernel), kernel)
    convention = solutions.convention_of(fn, ns, kernel)
    try:
        timeline = gemmlab.timeline(fn, SHAPE, convention=convention, capacity=capacity,
                                    names=STATE_NAMES.get(name))
    except TimelineError as err:
        return f"timeline_{name}: skipped ({err})"
    path = out / f"timeline_{name}.json"
    path.write_text(json.dumps(timeline.to_dict()) + "\n")
    return f"{path.name}: {timeline.label}; {len(timeline.records):,} marks; " + "; ".join(timeline.warnings())


def write_placeholders(plan: list[tuple[str, str]], out: Path) -> None:
    """SYNTHETIC stand-ins (gemmlab.profiling.synthetic) for recordings not made yet: never over a real one."""
    from gemmlab.profiling import synthetic
    from gemmlab.profiling.readout import Readout
    from gemmlab.profiling.timeline import Timeline, parse_buffer

    device, when = "NVIDIA H100 80GB HBM3", "not measured"
    for kind, name in plan:
        path = out / f"{kind}_{name}.json"
        if path.exists() and json.loads(path.read_text()).get("source") != "synthetic":
            print(f"{path.name}: a recording exists; left alone")
            continue
        if kind == "readout":
            copy = name in TRANSPOSES
            shape = (*TRANSPOSE_SHAPE, 1) if copy else SHAPE
            data = Readout.from_counters(synthetic.counters(shape, "copy" if copy else "gemm"), kernel=name,
                                         what="copy" if copy else "gemm", shape=shape,
                                         dtype="float32" if copy else "float16", device=device, ncu_version="—",
                                         measured_on=when, source="synthetic").to_dict()
        else:
            records, full, head = parse_buffer(synthetic.trace_buffer(capacity=128, ctas=4, k_tiles=16, tiles=2))
            data = Timeline(name, "gemm", SHAPE, "float16", device, when, 132, head["warps_per_cta"], 128,
                            head["ctas"], records, tuple(full), 0, {}, "synthetic").to_dict()
        path.write_text(json.dumps(data, indent=None if kind == "timeline" else 1) + "\n")
        print(f"{path.name}: SYNTHETIC placeholder written")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    chosen = args.only or sorted({*READOUTS, *TRANSPOSES, *TIMELINES})
    plan = [("readout", n) for n in chosen if n in READOUTS or n in TRANSPOSES] + \
           [("timeline", n) for n in chosen if n in TIMELINES]
    if args.dry_run:
        for kind, name in plan:
            print(f"{kind:8s} {name}")
        return 0
    if args.synthetic:
        write_placeholders(plan, args.out)
        return 0
    from gemmlab.errors import GemmlabError
    from gemmlab.running.gpu import has_gpu

    if not has_gpu():
        print("benchmarks/profile_solutions.py records on a GPU (with ncu); there is none here.", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for kind, name in plan:
        try:
            line = record_readout(name, args.out) if kind == "readout" else record_timeline(name, args.out,
                                                                                          args.capacity)
        except (GemmlabError, LookupError) as err:
            failed += 1
            line = f"{kind}_{name}: FAILED: {err}"
        print(line, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
