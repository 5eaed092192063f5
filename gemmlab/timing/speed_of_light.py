"""The fastest a GEMM can possibly run on this GPU, so that a timing below it is refused, not reported.

A timing is only worth something if it measured the work: a kernel that launched on another stream,
skipped calls, or kept its inputs in L2 across the flush between timed calls (a persisting-L2 access
window, docs/THREAT_MODEL.md) reports a time no GPU can reach. The speed of light of one GEMM is the
larger of two times:

- **compute**: ``2·M·N·K`` FLOPs at the tensor cores' dense peak for 16-bit inputs, counted at the
  GPU's *highest* SM clock: SMs × tensor FLOPs per SM per clock (:data:`TENSOR_FLOPS_PER_SM_CLOCK`,
  by compute capability) × the maximum clock the driver reports. An H100 SXM or H200 (132 SMs, 4096
  FLOPs per SM per clock, 1,980 MHz) gives 1,070 TFLOPS; NVIDIA's datasheet quotes 989 at its 1,830 MHz
  boost clock, and cuBLAS reaches about 780.
- **memory**: when the inputs start in DRAM (L2 flushed or rotated away before each call), the bytes
  of A and B (and C, for ``nn`` with beta ≠ 0) at DRAM's theoretical bandwidth (2 × memory clock × bus
  width). The output is not counted: its writes may still sit in L2 when the call ends.

Both are upper bounds on what the hardware does, never measurements, so no honest kernel reaches
them: :func:`refuse_faster_than_light` raises :class:`FasterThanLightError` for a time below the
speed of light (less a small slack for the timer's resolution), and :func:`floor_at_light` floors
times at it before any aggregate (a median, a ratio, the leaderboard's geometric mean), so one
impossible time cannot drag an aggregate to zero. GPUs of a compute capability not in the table get
no compute bound (``None``): nothing is refused on their account.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from gemmlab.checking.integrity import BenchIntegrityError

#: Dense tensor-core FLOPs per SM per clock for 16-bit inputs (fp16/bf16), by compute capability: upper
#: bounds from NVIDIA's datasheets (e.g. H100 SXM: 989.4 TFLOPS = 132 SMs × 4096 × 1.83 GHz; A100: 312 =
#: 108 × 2048 × 1.41 GHz; V100: 125 = 80 × 1024 × 1.53 GHz). Where a part's fp32-accumulate rate is half
#: its fp16-accumulate rate (GeForce), the faster one is listed: a bound must never be below what a kernel
#: can do. 8-bit inputs run twice as fast (:func:`flops_per_sm_clock`).
TENSOR_FLOPS_PER_SM_CLOCK: dict[tuple[int, int], int] = {
    (7, 0): 1024, (7, 2): 1024, (7, 5): 1024,
    (8, 0): 2048, (8, 6): 1024, (8, 7): 2048, (8, 9): 1024,
    (9, 0): 4096,
    (10, 0): 8192, (10, 3): 8192, (11, 0): 8192,
    (12, 0): 1024, (12, 1): 2048,
}
#: How far below the speed of light a time may read before it is refused: a fraction of it, plus the
#: resolution of CUDA events (about half a microsecond) for calls too short to time exactly.
LIGHT_SLACK = 0.03
EVENT_RESOLUTION_MS = 0.002


class FasterThanLightError(BenchIntegrityError):
    """A timed call finished faster than the GPU can compute or read its problem: the timing missed the work."""


@dataclass(frozen=True)
class PeakRates:
    """A GPU's theoretical peaks: the bounds no kernel can beat (None where unknown)."""

    device: str
    compute_capability: tuple[int, int]
    sm_count: int
    max_sm_clock_mhz: float
    tensor_tflops: float | None          #: dense, 16-bit inputs, at the maximum SM clock
    dram_gbps: float | None              #: theoretical DRAM bandwidth (GB/s)

    def peak_flops(self, input_bytes: int = 2) -> float | None:
        """FLOP/s at the maximum clock for inputs of ``input_bytes`` bytes (None: no bound known)."""
        if self.tensor_tflops is None:
            return None
        return self.tensor_tflops * 1e12 * (2 if input_bytes == 1 else 1)

    def tflops_at_clock(self, sm_clock_mhz: float, input_bytes: int = 2) -> float | None:
        """The tensor peak (TFLOPS) at ``sm_clock_mhz`` instead of the maximum clock: what a kernel
        that ran at that clock could reach at most (a share of it says how busy the tensor pipe was)."""
        peak = self.peak_flops(input_bytes)
        if peak is None or not self.max_sm_clock_mhz:
            return None
        return peak / 1e12 * sm_clock_mhz / self.max_sm_clock_mhz


def flops_per_sm_clock(compute_capability: tuple[int, int], input_bytes: int = 2) -> int | None:
    """Tensor FLOPs per SM per clock for this compute capability and input size (None: not in the table)."""
    per_clock = TENSOR_FLOPS_PER_SM_CLOCK.get(tuple(compute_capability))
    if per_clock is None:
        return None
    return per_clock * (2 if input_bytes == 1 else 1)


def rates_from_attributes(device: str, compute_capability: tuple[int, int], sm_count: int, sm_clock_khz: int,
                          memory_clock_khz: int, memory_bus_bits: int) -> PeakRates:
    """:class:`PeakRates` from the driver's device attributes (clock rates in kHz, as the driver gives them).

    DRAM bandwidth is 2 transfers per memory clock × bus width: an H100 SXM's 2,619 MHz × 5,120 bits gives
    3.35 TB/s, its datasheet's figure."""
    per_clock = flops_per_sm_clock(compute_capability)
    clock_mhz = sm_clock_khz / 1e3
    tensor = sm_count * per_clock * clock_mhz * 1e6 / 1e12 if per_clock and sm_count and clock_mhz else None
    dram = 2 * memory_clock_khz * 1e3 * memory_bus_bits / 8 / 1e9 if memory_clock_khz and memory_bus_bits else None
    return PeakRates(device, (int(compute_capability[0]), int(compute_capability[1])), int(sm_count), clock_mhz,
                     tensor, dram)


#: GPUs the leaderboard may meet, by the name the driver gives, for records that do not carry their own
#: bound: (compute capability, SMs, maximum SM clock in MHz). Memory is left out (the leaderboard's shapes
#: are compute-bound).
KNOWN_GPUS: dict[str, tuple[tuple[int, int], int, int]] = {
    "NVIDIA H100 80GB HBM3": ((9, 0), 132, 1980),
    "NVIDIA H100 PCIe": ((9, 0), 114, 1755),
    "NVIDIA H100 NVL": ((9, 0), 132, 1785),
    "NVIDIA H200": ((9, 0), 132, 1980),
    "NVIDIA H200 NVL": ((9, 0), 132, 1785),
    "NVIDIA GH200 480GB": ((9, 0), 132, 1980),
    "NVIDIA A100-SXM4-80GB": ((8, 0), 108, 1410),
    "NVIDIA A100-SXM4-40GB": ((8, 0), 108, 1410),
    "NVIDIA A100 80GB PCIe": ((8, 0), 108, 1410),
}


def known_rates(device: str) -> PeakRates | None:
    """The compute bound of a GPU named in :data:`KNOWN_GPUS` (None for any other name)."""
    entry = KNOWN_GPUS.get(str(device).strip())
    if entry is None:
        return None
    capability, sms, mhz = entry
    return rates_from_attributes(device, capability, sms, mhz * 1000, 0, 0)


_rates: dict[int, PeakRates] = {}


def peak_rates(index: int | None = None) -> PeakRates:
    """This GPU's :class:`PeakRates`, from the driver's attributes (read once per device)."""
    import torch

    from gemmlab.running.device import driver, raw_attributes

    index = torch.cuda.current_device() if index is None else int(index)
    if index not in _rates:
        A = driver().CUdevice_attribute
        got = raw_attributes(index)

        def get(attr: object) -> int:
            return got.get(int(attr), 0)

        _rates[index] = rates_from_attributes(
            torch.cuda.get_device_name(index),
            (get(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), get(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
            get(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT), get(A.CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            get(A.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE), get(A.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH))
    return _rates[index]


def gemm_light_ms(shape: Sequence[int], rates: PeakRates, input_bytes: int = 2, convention: str = "tn",
                  beta: float = 0.0, inputs_from_dram: bool = True) -> float | None:
    """The speed of light of one ``M×N×K`` GEMM (ms): the larger of its compute time at the tensor peak and,
    when ``inputs_from_dram``, the time to read its inputs at DRAM's peak (None when neither bound is known)."""
    M, N, K = (int(v) for v in shape)
    bounds = []
    flops = rates.peak_flops(input_bytes)
    if flops:
        bounds.append(2.0 * M * N * K / flops * 1e3)
    if inputs_from_dram and rates.dram_gbps:
        read = (M * K + K * N) * input_bytes + (M * N * input_bytes if convention == "nn" and beta != 0 else 0)
        bounds.append(read / (rates.dram_gbps * 1e9) * 1e3)
    return max(bounds) if bounds else None


def faster_than_light(ms: float, light_ms: float | None) -> bool:
    """Whether a time of ``ms`` lies below the speed of light by more than the slack."""
    return light_ms is not None and ms < light_ms * (1 - LIGHT_SLACK) - EVENT_RESOLUTION_MS


def refuse_faster_than_light(times_ms: Iterable[float], light_ms: float | None, what: str,
                             rates: PeakRates | None = None) -> None:
    """Raise :class:`FasterThanLightError` if any time lies below ``light_ms`` (beyond the slack); ``rates``
    (optional) names the peaks in the message."""
    times = list(times_ms)
    impossible = [t for t in times if faster_than_light(t, light_ms)]
    if not impossible:
        return
    peak = ""
    if rates is not None and rates.tensor_tflops:
        peak = f": {rates.tensor_tflops:,.0f} TFLOPS at {rates.max_sm_clock_mhz:,.0f} MHz" + (
            f", DRAM {rates.dram_gbps:,.0f} GB/s" if rates.dram_gbps else "")
    raise FasterThanLightError(
        f"{what}: {len(impossible)} of {len(times)} timed calls finished faster than this GPU can do the work at all "
        f"(the fastest in {min(impossible):.4f} ms; the speed of light is {light_ms:.4f} ms, at its theoretical "
        f"peak{peak}). The timing did not "
        "measure the work: launch on torch's current stream, do all of the work on every call, and leave L2 as "
        "you found it (no persisting access window).")


def floor_at_light(times_ms: Iterable[float], light_ms: float | None) -> list[float]:
    """``times_ms`` with every time below ``light_ms`` raised to it (unchanged when there is no bound)."""
    return [t if light_ms is None else max(t, light_ms) for t in times_ms]


__all__ = ["EVENT_RESOLUTION_MS", "FasterThanLightError", "KNOWN_GPUS", "LIGHT_SLACK", "PeakRates",
           "TENSOR_FLOPS_PER_SM_CLOCK", "faster_than_light", "floor_at_light", "flops_per_sm_clock", "gemm_light_ms",
           "known_rates", "peak_rates", "rates_from_attributes", "refuse_faster_than_light"]
