#!/usr/bin/env python3
"""Run a notebook headless and print how long each code cell took (slowest first).

    python tools/nbtime.py solutions/00_gpu_and_roofline/00_gpu_and_roofline.ipynb

Why: a notebook that is slow on a GPU machine is slow for every student; this finds the cell.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gemmlab.notebook.headless import notebook_client  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", type=Path)
    ap.add_argument("--timeout", type=int, default=600, help="per-cell limit in seconds")
    args = ap.parse_args(argv)
    nb = nbformat.read(args.notebook, as_version=4)
    times: list[tuple[float, int, str]] = []
    started: dict[int, float] = {}

    def before(cell, cell_index, **_):
        started[cell_index] = time.perf_counter()

    def after(cell, cell_index, **_):
        first = cell.source.strip().splitlines()[0][:70] if cell.source.strip() else ""
        times.append((time.perf_counter() - started[cell_index], cell_index, first))

    client = notebook_client(nb, timeout=args.timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(args.notebook.parent)}},
                            on_cell_start=before, on_cell_executed=after, allow_errors=True)
    t0 = time.perf_counter()
    client.execute()
    print(f"{args.notebook}: {time.perf_counter() - t0:.1f} s in all")
    for seconds, index, first in sorted(times, reverse=True)[:15]:
        print(f"{seconds:8.2f} s  cell {index:3d}  {first}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
