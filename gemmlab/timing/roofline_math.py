"""Arithmetic intensity and the roofline bound for a GEMM, in plain arithmetic.

Intensity = floating-point operations per byte moved to or from DRAM. A GEMM does
2·M·N·K flops (one multiply and one add per FMA); how many bytes it moves depends on
how much reuse the kernel gets, which is the whole point of tiling. Kept free of
matplotlib and torch so it can be checked exactly and used anywhere.
"""
from __future__ import annotations

import math
from typing import Literal


def flops(M: int, N: int, K: int) -> int:
    """Floating-point operations of one GEMM: an FMA counts as two."""
    return 2 * M * N * K


def _positive(**values: float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be > 0, not {value!r}")


def intensity_ideal(M: int, N: int, K: int, in_bytes: int = 2, out_bytes: int = 2,
                    read_output: bool = False) -> float:
    """Best case: each input element read from DRAM once, the output written once.

    ``read_output=True`` also counts reading C once (``C = α·A·B + β·C`` with β ≠ 0).
    """
    _positive(M=M, N=N, K=K, in_bytes=in_bytes, out_bytes=out_bytes)
    moved = (M * K + N * K) * in_bytes + M * N * out_bytes * (2 if read_output else 1)
    return flops(M, N, K) / moved


def intensity_tiled(M: int, N: int, K: int, tile_m: int, tile_n: int, in_bytes: int = 2,
                    out_bytes: int = 2, read_output: bool = False) -> float:
    """One CTA per ``tile_m × tile_n`` output tile, no reuse between CTAs (no L2 help).

    Every column of CTA tiles streams all of A once, and every row of tiles all of B, so
    A is read ceil(N / tile_n) times and B ceil(M / tile_m) times.
    """
    _positive(M=M, N=N, K=K, tile_m=tile_m, tile_n=tile_n, in_bytes=in_bytes, out_bytes=out_bytes)
    tiles_m = math.ceil(M / tile_m)
    tiles_n = math.ceil(N / tile_n)
    moved = (M * K * tiles_n + N * K * tiles_m) * in_bytes + M * N * out_bytes * (2 if read_output else 1)
    return flops(M, N, K) / moved


def naive_intensity(M: int, N: int, K: int, in_bytes: int = 2, out_bytes: int = 2) -> float:
    """No reuse at all: every FMA fetches its A and B element from DRAM (one thread per output)."""
    _positive(M=M, N=N, K=K, in_bytes=in_bytes, out_bytes=out_bytes)
    moved = M * N * K * 2 * in_bytes + M * N * out_bytes
    return flops(M, N, K) / moved


def ridge(peak_tflops: float, bw_gbps: float) -> float:
    """Intensity (flop/byte) where the memory roof meets the compute roof."""
    _positive(peak_tflops=peak_tflops, bw_gbps=bw_gbps)
    return peak_tflops * 1e12 / (bw_gbps * 1e9)


def attainable(intensity: float, peak_tflops: float, bw_gbps: float) -> float:
    """The roofline: min(compute peak, intensity × bandwidth), in TFLOPS."""
    _positive(intensity=intensity, peak_tflops=peak_tflops, bw_gbps=bw_gbps)
    return min(peak_tflops, intensity * bw_gbps * 1e9 / 1e12)


def bound(intensity: float, peak_tflops: float, bw_gbps: float) -> Literal["memory", "compute"]:
    """Which roof limits a kernel of this intensity on this machine."""
    return "memory" if intensity < ridge(peak_tflops, bw_gbps) else "compute"
