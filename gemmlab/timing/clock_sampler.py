"""The SM clock and power draw while GPU work is timed, sampled in the background.

Why: a large GEMM on an H100 or H200 draws the whole power budget and the GPU then lowers its clock,
by how much depends on the kernel and on the data (normal fills draw more than uniform ones; zeros far
less). A ratio to cuBLAS means little without the clock and power each side ran at, and NVIDIA's
fixed-power method waits until the clock has settled before it times (docs/TIMING.md). Samples come
from NVML through ``pynvml`` (the ``nvidia-ml-py`` package) when it is installed, else from
``nvidia-smi --loop-ms``; where neither works there are none, and results say so.

Each :class:`Sample` carries the host's ``time.monotonic()`` when it was read, so a caller can keep the
samples that fall inside the windows it timed (:func:`reading`) and ask whether the clock has settled
(:func:`settled`). Power readings are what the driver reports: on recent GPUs an average over about a second.
"""
from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Protocol, Sequence

#: How often samples are read (ms).
PERIOD_MS = 20


@dataclass(frozen=True)
class Sample:
    """One reading: host monotonic time (s), SM clock (MHz), board power (W)."""

    t: float
    sm_mhz: float
    power_w: float


@dataclass(frozen=True)
class ClockReading:
    """Medians of the samples taken during some timed windows (None where there were none)."""

    sm_clock_mhz: float | None
    power_w: float | None
    samples: int
    source: str                  #: "nvml", "nvidia-smi", or "" (nothing could be sampled)

    def text(self) -> str:
        """'1,755 MHz, 698 W (nvml, 41 samples)', or why there is no reading."""
        if self.sm_clock_mhz is None:
            return "clock and power not sampled" + (f" ({self.source}: no sample fell in the timed rounds)"
                                                     if self.source else " (neither NVML nor nvidia-smi answered)")
        return f"{self.sm_clock_mhz:,.0f} MHz, {self.power_w:,.0f} W ({self.source}, {self.samples} samples)"


class Sampler(Protocol):
    """What bench_gemm asks of a sampler: start, the samples so far, stop (returns all samples)."""

    source: str

    def start(self) -> None: ...

    def samples(self) -> list[Sample]: ...

    def stop(self) -> list[Sample]: ...


class _Polling:
    """Samples kept by a background thread; subclasses read one sample (or None)."""

    source = ""

    def __init__(self, period_ms: float = PERIOD_MS) -> None:
        self.period_s = period_ms / 1e3
        self._samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def read(self) -> Sample | None:
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                sample = self.read()
            except Exception:  # noqa: BLE001 - a failed read is a missing sample, never a failed timing
                sample = None
            if sample is not None:
                with self._lock:
                    self._samples.append(sample)
            self._stop.wait(self.period_s)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"{self.source} sampler", daemon=True)
        self._thread.start()

    def samples(self) -> list[Sample]:
        with self._lock:
            return list(self._samples)

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self.samples()


class NvmlSampler(_Polling):
    """NVML through ``pynvml``: the SM clock and the board's power, every ``period_ms``."""

    source = "nvml"

    def __init__(self, uuid: str, period_ms: float = PERIOD_MS) -> None:
        super().__init__(period_ms)
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handle = pynvml.nvmlDeviceGetHandleByUUID(uuid.encode())

    def read(self) -> Sample | None:
        nvml = self._nvml
        mhz = nvml.nvmlDeviceGetClockInfo(self._handle, nvml.NVML_CLOCK_SM)
        watts = nvml.nvmlDeviceGetPowerUsage(self._handle) / 1000.0
        return Sample(time.monotonic(), float(mhz), float(watts))


class SmiSampler:
    """``nvidia-smi --query-gpu=FIELDS --loop-ms=PERIOD`` in the background.

    ``rows`` keeps every line's fields (for callers that query more than the clock and power);
    :meth:`samples` reads the first two fields as the SM clock and power."""

    source = "nvidia-smi"

    def __init__(self, gpu: str, fields: Sequence[str] = ("clocks.sm", "power.draw"),
                 period_ms: float = PERIOD_MS) -> None:
        self.gpu, self.fields, self.period_ms = str(gpu), list(fields), max(10, int(period_ms))
        self.rows: list[tuple[float, list[str]]] = []
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._proc = subprocess.Popen(
            ["nvidia-smi", "-i", self.gpu, f"--query-gpu={','.join(self.fields)}", "--format=csv,noheader,nounits",
             f"--loop-ms={self.period_ms}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._read, name="nvidia-smi sampler", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == len(self.fields):
                self.rows.append((time.monotonic(), parts))

    def samples(self) -> list[Sample]:
        return samples_from_rows(list(self.rows))

    def stop(self) -> list[Sample]:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        if self._thread is not None:
            self._thread.join(timeout=5)
        return self.samples()


def samples_from_rows(rows: Sequence[tuple[float, Sequence[str]]]) -> list[Sample]:
    """Samples from timestamped text rows whose first two fields are MHz and W; unreadable rows
    (``[N/A]``, a line cut short) are left out."""
    out = []
    for t, parts in rows:
        try:
            out.append(Sample(float(t), float(parts[0]), float(parts[1])))
        except (ValueError, IndexError):
            continue
    return out


def open_sampler(uuid: str) -> Sampler | None:
    """An NVML sampler of the GPU with this UUID ("GPU-...") if ``pynvml`` works here, else ``nvidia-smi``'s if
    it is on PATH, else None (nothing to sample with)."""
    try:
        return NvmlSampler(uuid)
    except Exception:  # noqa: BLE001 - not installed, no driver access, another NVML error: try nvidia-smi
        pass
    if shutil.which("nvidia-smi"):
        return SmiSampler(uuid)
    return None


def uuid_text(raw: bytes) -> str:
    """The 16 bytes of a GPU's UUID as NVML and nvidia-smi write it: 'GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx'."""
    h = bytes(raw)[:16].hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def device_sampler(device_index: int) -> Sampler | None:
    """:func:`open_sampler` for CUDA device ``device_index``, found by its UUID (which NVML and nvidia-smi know
    whatever ``CUDA_VISIBLE_DEVICES`` renumbers)."""
    from gemmlab.running.device import checked, driver

    d = driver()
    dev = checked(d.cuDeviceGet(int(device_index)), "finding the GPU")
    uuid = checked(d.cuDeviceGetUuid(dev), "reading the GPU's UUID")
    return open_sampler(uuid_text(uuid.bytes))


def reading(samples: Sequence[Sample], windows: Sequence[tuple[float, float]], source: str) -> ClockReading:
    """The median clock and power of the samples read inside any of ``windows`` (host monotonic times)."""
    inside = [s for s in samples if any(t0 <= s.t <= t1 for t0, t1 in windows)]
    if not inside:
        return ClockReading(None, None, 0, source)
    return ClockReading(statistics.median(s.sm_mhz for s in inside), statistics.median(s.power_w for s in inside),
                        len(inside), source)


def settled(samples: Sequence[Sample], now: float, window_s: float = 1.0, tolerance: float = 0.01,
            bins: int = 5) -> bool:
    """Whether the SM clock has settled: the last ``window_s`` before ``now``, cut into ``bins`` equal
    stretches of at least 2 samples each, has mean clocks that all lie within ``tolerance`` (relative).

    Why means over stretches: under a power cap the clock dithers between neighbouring 15 MHz steps many
    times a second, which a 200 ms mean smooths; what NVIDIA's guidelines wait out is the swing and drift
    of the first seconds, which moves those means apart."""
    width = window_s / bins
    means = []
    for b in range(bins):
        lo, hi = now - window_s + b * width, now - window_s + (b + 1) * width
        values = [s.sm_mhz for s in samples if lo <= s.t < hi or (b == bins - 1 and s.t == hi)]
        if len(values) < 2:
            return False
        means.append(statistics.fmean(values))
    return max(means) - min(means) <= tolerance * max(means)


__all__ = ["ClockReading", "NvmlSampler", "PERIOD_MS", "Sample", "Sampler", "SmiSampler", "device_sampler",
           "open_sampler", "reading", "samples_from_rows", "settled", "uuid_text"]

