"""Time the bank model and the TV picture against the course's interactivity targets.

    python benchmarks/layout_speed.py

Targets: every instruction of a 128x64 fp16 half-tile copy through the bank model in
< 50 ms; the owner table of a 128x128 TiledMMA accumulator in < 0.5 s; a 128x128 TV-layout
picture drawn and rendered to PNG in < 1 s.
"""
from __future__ import annotations

import io
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from gemmlab.seeing import banks, draw  # noqa: E402
from gemmlab import layout as L  # noqa: E402


def best_of(fn: Callable[[], object], repeat: int = 5) -> tuple[float, float]:
    """(min, median) seconds over ``repeat`` runs after one warm-up."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times), statistics.median(times)


def main() -> int:
    smem = L.composition(L.Swizzle(3, 3, 3), L.Layout((128, 64), (64, 1)))
    copy = L.make_tiled_copy(L.copy_atom("UniversalCopy", 128), L.Layout((16, 8), (8, 1)), L.Layout((1, 8)))
    mma = L.make_tiled_mma("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1))
    smem_a = L.composition(L.Swizzle(3, 3, 3), L.Layout((32, 64), (64, 1)))
    tv = L.Layout((128, 128), (1, 128))
    big_mma = L.make_tiled_mma("SM80_16x8x16_F32F16F16F32_TN", (2, 2, 1), (128, 128, 16))

    def render() -> None:
        buf = io.BytesIO()
        draw.tv_layout(tv, (128, 128)).savefig(buf, format="png")

    rows = [
        ("bank model: 128x64 fp16 st128 half-tile copy", lambda: banks.copy_conflicts(smem, copy, 2, "st128"), 0.050),
        ("bank model: ldmatrix.x4 of a 32x64 A tile", lambda: banks.ldmatrix_conflicts(smem_a, mma), 0.050),
        ("owner table: 128x128 TiledMMA accumulator", lambda: L.tv_to_tile_table(big_mma.tv_c, (128, 128)), 0.5),
        ("picture: 128x128 TV layout to PNG", render, 1.0),
    ]
    print(f"{'what':48s} {'min':>9s} {'median':>9s} {'target':>8s}  ok")
    failed = 0
    for name, fn, target in rows:
        lo, med = best_of(fn)
        ok = med < target
        failed += not ok
        print(f"{name:48s} {lo * 1e3:7.1f}ms {med * 1e3:7.1f}ms {target * 1e3:6.0f}ms  {'yes' if ok else 'NO'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
