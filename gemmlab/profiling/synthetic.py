"""Synthetic profiler output, clearly labelled as such: for CPU tests, the fake judge and a demo without a GPU.

Nothing here was measured. :func:`raw_csv` prints launches in the exact form of ``ncu --csv --page raw
--print-units base`` (a header of metric names, a row of units, a row per launch), and
:func:`trace_buffer` writes a timeline buffer as a warp-specialised kernel's marks would (a producer
warp waiting for free slots and issuing loads, two consumer warpgroups waiting for tiles, issuing
MMAs and running the epilogue), so the parsers, the readout and the pictures are tested on the real
formats. Every readout or timeline made from them says SYNTHETIC.
"""
from __future__ import annotations

import csv
import io
import struct
from typing import Any, Mapping, Sequence

from .metrics import SPEED_OF_LIGHT, STALLS, stall_metric
from .ncu import LAUNCH_COLUMNS
from .trace_format import (HEADER_BYTES, MAGIC, PARTIAL_BIT, RECORD_BYTES, SM_SHIFT, STATES, VERSION)

#: Units ncu prints for the metrics below with --print-units base.
UNITS = {"pct": "%", "sum": "", "ratio": "", "per_second": "cycle/second", "time": "nsecond", "limit": "block",
         "register": "register/thread", "smem": "byte"}


def counters(shape: tuple[int, int, int], what: str = "gemm", seed: int = 0) -> dict[str, float]:
    """Plausible counters of one launch (a tensor-bound GEMM, or a DRAM-bound copy). Not a measurement."""
    import random

    rnd = random.Random(seed)
    M, N, K = shape
    gemm = what == "gemm"
    values: dict[str, float] = {
        SPEED_OF_LIGHT["tensor pipe"][0]: 70.0 + 10 * rnd.random() if gemm else 0.0,
        SPEED_OF_LIGHT["tensor pipe"][1]: 0.0,
        SPEED_OF_LIGHT["issue slots"][0]: 12.0 + 5 * rnd.random(),
        SPEED_OF_LIGHT["L1 / shared"][0]: 35.0 + 10 * rnd.random() if gemm else 20.0,
        SPEED_OF_LIGHT["L2"][0]: 50.0 + 10 * rnd.random() if gemm else 85.0,
        SPEED_OF_LIGHT["DRAM"][0]: 20.0 + 5 * rnd.random() if gemm else 88.0 + 5 * rnd.random(),
        "smsp__inst_executed_op_shared_ld.sum": float(M * N // 64) if gemm else 0.0,
        "smsp__inst_executed_op_ldsm.sum": 0.0,
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": float(M * N // 64) if gemm else 0.0,
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": 0.0,
        "smsp__inst_executed_op_shared_st.sum": float(M * N // 256),
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": float(M * N // 128),
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": float(M * N // 256),
        "sm__warps_active.avg.pct_of_peak_sustained_active": 17.5 if gemm else 60.0,
        "sm__maximum_warps_per_active_cycle_pct": 18.75 if gemm else 100.0,
        "launch__occupancy_limit_registers": 1.0 if gemm else 8.0,
        "launch__occupancy_limit_shared_mem": 1.0 if gemm else 8.0,
        "launch__occupancy_limit_warps": 5.0 if gemm else 8.0,
        "launch__occupancy_limit_blocks": 32.0,
        "launch__registers_per_thread": 168.0 if gemm else 32.0,
        "launch__block_size": 384.0 if gemm else 256.0,
        "launch__grid_size": 132.0 if gemm else float(M * N // 8192 or 1),
        "launch__shared_mem_per_block_dynamic": 213_000.0 if gemm else 0.0,
        "launch__shared_mem_per_block_static": 0.0 if gemm else 16_384.0,
        "launch__waves_per_multiprocessor": 1.0,
        "device__attribute_multiprocessor_count": 132.0,
        "gpu__time_duration.sum": 2 * M * N * K / 700e12 * 1e9 if gemm else 4 * M * N / 3e12 * 1e9,
        "sm__cycles_elapsed.avg.per_second": 1.755e9,
        "dram__cycles_elapsed.avg.per_second": 2.6e9,
    }
    stalls = {"math_pipe_throttle": 4.0, "long_scoreboard": 1.5, "barrier": 1.0, "wait": 0.8, "selected": 1.0,
              "not_selected": 0.3, "sleeping": 0.6} if gemm else \
        {"long_scoreboard": 12.0, "lg_throttle": 3.0, "selected": 1.0, "wait": 0.5}
    for reason in STALLS:
        values[stall_metric(reason)] = stalls.get(reason.key, 0.0) * (0.9 + 0.2 * rnd.random())
    return values


def _unit(metric: str) -> str:
    if metric.endswith("pct") or ".pct_of_" in metric:
        return UNITS["pct"]
    if metric.startswith("gpu__time_duration"):
        return UNITS["time"]
    if metric.endswith("per_second"):
        return UNITS["per_second"]
    if metric.startswith("launch__occupancy_limit"):
        return UNITS["limit"]
    if metric == "launch__registers_per_thread":
        return UNITS["register"]
    if "shared_mem" in metric:
        return UNITS["smem"]
    return ""


def raw_csv(launches: Sequence[tuple[str, Mapping[str, float]]], child_output: str = "") -> str:
    """``ncu --import R --csv --page raw --print-units base``'s output for ``launches`` ((kernel, counters) each)."""
    metrics = sorted({m for _, c in launches for m in c})
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow([*LAUNCH_COLUMNS, *metrics])
    writer.writerow([""] * len(LAUNCH_COLUMNS) + [_unit(m) for m in metrics])
    for i, (kernel, values) in enumerate(launches):
        writer.writerow([str(i), "4242", "python3", "127.0.0.1", kernel, "1", "7", "(384, 1, 1)", "(132, 1, 1)", "0",
                         "9.0", *(f"{values[m]:,.4f}".rstrip("0").rstrip(".") if m in values else "n/a"
                                  for m in metrics)])
    return (child_output + "\n" if child_output else "") + out.getvalue()


def trace_buffer(capacity: int = 512, ctas: int = 4, warps_per_cta: int = 12, k_tiles: int = 16, tiles: int = 2,
                 sms: int = 132, seed: int = 0, partial_every: int = 0) -> bytes:
    """A timeline buffer as a warp-specialised kernel's marks would write it: warp 0 the producer, warps from 4 on
    consumer warpgroups of four (from 1 on when a CTA has four warps or fewer), the others idle after START. Times in ns from an arbitrary origin; the SM clock at
    1.755 GHz. ``partial_every``: flag every n-th mark as reached by part of a warp."""
    import random

    rnd = random.Random(seed)
    records: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    hz = 1.755e9
    for cta in range(ctas):
        start = 1_000_000 + cta * 1_500 + (cta // sms) * 400_000
        sm = cta % sms
        clock0 = rnd.randrange(1 << 31)

        def add(warp: int, t: float, state: str, _cta: int = cta, _sm: int = sm, _c0: int = clock0) -> None:
            records.setdefault((_cta, warp), []).append((int(t), (_c0 + int((t - start) * hz / 1e9)) % (1 << 32),
                                                         STATES[state] | (_sm << SM_SHIFT)))

        for warp in range(warps_per_cta):
            add(warp, start + 20 * warp, "START")
        t_prod = start + 400.0
        for _ in range(tiles):
            for k in range(k_tiles):
                add(0, t_prod, "WAIT_SLOT")
                t_prod += 30 if k < 3 else 180 + 40 * rnd.random()
                add(0, t_prod, "LOAD")
                t_prod += 60
        add(0, t_prod, "DONE")
        consumers = list(range(4, warps_per_cta)) if warps_per_cta > 4 else list(range(1, warps_per_cta))
        for group, first in enumerate(range(0, len(consumers), 4)):
            members = consumers[first:first + 4]
            t = start + 500.0 + 15 * group
            for _ in range(tiles):
                for k in range(k_tiles):
                    for warp in members:
                        add(warp, t + warp, "WAIT_LOAD")
                    t += 200 if k == 0 else 25 + 30 * rnd.random()
                    for warp in members:
                        add(warp, t + warp, "MMA")
                    t += 210 + 10 * rnd.random()
                for warp in members:
                    add(warp, t + warp, "EPILOGUE")
                t += 900
            for warp in members:
                add(warp, t + warp, "DONE")
    body = bytearray(HEADER_BYTES + ctas * warps_per_cta * capacity * RECORD_BYTES)
    struct.pack_into("<5I", body, 0, MAGIC, VERSION, capacity, ctas, warps_per_cta)
    count = 0
    for (cta, warp), marks in records.items():
        base = HEADER_BYTES + (cta * warps_per_cta + warp) * capacity * RECORD_BYTES
        for i, (t, clock, meta) in enumerate(sorted(marks)[:capacity]):
            count += 1
            if partial_every and count % partial_every == 0:
                meta |= PARTIAL_BIT
            struct.pack_into("<QII", body, base + i * RECORD_BYTES, t, clock, meta)
    return bytes(body)


def labelled(data: Any) -> Any:
    """``data`` (a readout's or timeline's dict) marked as synthetic."""
    return {**data, "source": "synthetic"}


__all__ = ["UNITS", "counters", "labelled", "raw_csv", "trace_buffer"]
