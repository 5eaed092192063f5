"""The board's power and SM clock while a kernel runs back to back: NVML, read through ctypes.

Why: Nsight Compute replays the profiled launch pass by pass, each a fraction of a millisecond,
so the clock it reports is the clock of short bursts. A GEMM run back to back can draw the board's
whole power budget, and then the GPU lowers its clock (FACTS.md: the same kernel's ratio to cuBLAS
moves with it). So the readout also says what the board did while the kernel ran for half a second:
watts against the power limit, the SM clock, and the reasons NVML gives for a lower clock.

NVML comes with the driver (``libnvidia-ml.so.1``); without it the readout says "not measured".
The GPU is found by its PCI bus id, so ``CUDA_VISIBLE_DEVICES`` renumbering does not matter.
"""
from __future__ import annotations

import ctypes
import statistics
import threading
import time
from typing import Any, Callable

from .readout import Power

#: NVML's clock-event reasons (nvmlClocksEventReasons), the ones a student can act on or should know.
REASONS = {0x4: "power cap", 0x8: "hardware slowdown", 0x20: "thermal limit (software)",
           0x40: "thermal limit (hardware)", 0x80: "power brake"}
NVML_CLOCK_SM = 1


class _Nvml:
    def __init__(self, pci_bus_id: str) -> None:
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != 0:
            raise OSError("nvmlInit failed")
        self.handle = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByPciBusId_v2(pci_bus_id.encode(), ctypes.byref(self.handle)) != 0:
            raise OSError(f"no NVML device at {pci_bus_id}")

    def _uint(self, fn: str, *args: Any) -> int | None:
        value = ctypes.c_uint()
        return value.value if getattr(self.lib, fn)(self.handle, *args, ctypes.byref(value)) == 0 else None

    def sample(self) -> tuple[float | None, float | None, int]:
        """(watts, SM MHz, clock-event reasons bitmask) now."""
        mw = self._uint("nvmlDeviceGetPowerUsage")
        mhz = self._uint("nvmlDeviceGetClockInfo", ctypes.c_uint(NVML_CLOCK_SM))
        reasons = ctypes.c_ulonglong()
        ok = self.lib.nvmlDeviceGetCurrentClocksEventReasons(self.handle, ctypes.byref(reasons)) == 0
        return (mw / 1e3 if mw is not None else None, float(mhz) if mhz is not None else None,
                int(reasons.value) if ok else 0)

    def limit_watts(self) -> float | None:
        mw = self._uint("nvmlDeviceGetEnforcedPowerLimit")
        return mw / 1e3 if mw is not None else None

    def close(self) -> None:
        self.lib.nvmlShutdown()


def reason_names(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in REASONS.items() if mask & bit)


def pci_bus_id(device_index: int) -> str:
    """The PCI bus id of CUDA device ``device_index`` (as the CUDA driver numbers it in this process)."""
    from cuda.bindings import driver

    _, device = driver.cuDeviceGet(device_index)
    result, text = driver.cuDeviceGetPCIBusId(32, device)
    if int(result) != 0:
        raise OSError(f"cuDeviceGetPCIBusId: {result}")
    return (text.decode() if isinstance(text, bytes) else str(text)).rstrip("\0")


def while_running(run_once: Callable[[], None], synchronize: Callable[[], None], device_index: int,
                  seconds: float = 0.5, period_s: float = 0.02) -> Power | None:
    """Run ``run_once`` back to back for about ``seconds`` while sampling NVML; the medians of the second half
    (the board settled), or None where NVML cannot be read."""
    try:
        nvml = _Nvml(pci_bus_id(device_index))
    except (OSError, AttributeError, ImportError):
        return None
    samples: list[tuple[float, tuple[float | None, float | None, int]]] = []
    done = threading.Event()

    def sampler() -> None:
        while not done.is_set():
            samples.append((time.perf_counter(), nvml.sample()))
            time.sleep(period_s)

    try:
        run_once()
        synchronize()
        start = time.perf_counter()
        run_once()
        synchronize()
        one = max(time.perf_counter() - start, 1e-6)
        thread = threading.Thread(target=sampler, daemon=True)
        started = time.perf_counter()
        thread.start()
        while time.perf_counter() - started < seconds:
            for _ in range(max(1, min(1000, int(0.05 / one)))):   # about 50 ms of launches between host checks
                run_once()
            synchronize()
        elapsed = time.perf_counter() - started
        done.set()
        thread.join(timeout=1)
        settled = [s for t, s in samples if t >= started + elapsed / 2] or [s for _, s in samples]
        watts = [w for w, _, _ in settled if w is not None]
        mhz = [m for _, m, _ in settled if m is not None]
        mask = 0
        for _, _, r in settled:
            mask |= r
        return Power(statistics.median(watts) if watts else None, nvml.limit_watts(),
                     statistics.median(mhz) if mhz else None, reason_names(mask), round(elapsed, 2))
    finally:
        done.set()
        nvml.close()


__all__ = ["REASONS", "pci_bus_id", "reason_names", "while_running"]
