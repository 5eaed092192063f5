"""How busy a host's CPUs and GPUs were while a benchmark ran: a background sampler.

Why: a grading run's speed-up from one GPU to two is only as good as the reason it stops short, and
the reason is one of three (the CPUs were full, the GPUs were, or workers sat idle at the end). The
sampler reads /proc/stat and, where ``nvidia-smi`` exists, each GPU's utilisation once a second.
"""
from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PROC_STAT = Path("/proc/stat")


def cpu_ticks() -> tuple[int, int] | None:
    """``(busy, total)`` jiffies of all CPUs since boot, or None where /proc/stat is not there."""
    try:
        first = PROC_STAT.read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    values = [int(v) for v in first[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)          # idle + iowait
    return sum(values) - idle, sum(values)


def gpu_utilisation() -> list[float]:
    """Each GPU's utilisation in percent now (``nvidia-smi``), or [] where it cannot be asked."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        out = subprocess.run([exe, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout
        return [float(v) for v in out.split()]
    except (OSError, subprocess.SubprocessError, ValueError):
        return []


_PACE_LOOP = ("import time\nt = time.perf_counter()\nx = 0\nfor i in range({n}):\n    x += i * i\n"
              "print(time.perf_counter() - t)\n")


def cpu_pace(iterations: int = 10_000_000, repeats: int = 3) -> float | None:
    """Seconds one core takes for a fixed pure-Python loop (the median of ``repeats`` fresh interpreters),
    or None where it could not run. Why: on a shared virtual machine one core's pace drifts by tens of
    percent within minutes (measured on a two-H200 host, 2026-11-27: the same loop took 2.7 s and, a
    minute later, 4.0 s alone), so two grading runs' wall times compare only as well as the host's pace
    before each; the scale benchmark prints it."""
    took = []
    for _ in range(max(1, repeats)):
        try:
            out = subprocess.run([sys.executable, "-c", _PACE_LOOP.format(n=int(iterations))],
                                 capture_output=True, text=True, timeout=300)
            took.append(float(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
    return statistics.median(took)


@dataclass
class Usage:
    """What a sampled stretch of time used: CPU cores busy on average, each GPU's mean utilisation."""

    seconds: float
    cpus: int
    cores_busy: float | None
    gpu_percent: list[float] = field(default_factory=list)

    def summary(self) -> str:
        cpu = (f"CPUs {self.cores_busy:.1f} of {self.cpus} busy on average" if self.cores_busy is not None
               else "CPU use unknown (no /proc/stat)")
        gpu = (", ".join(f"GPU {i} {p:.0f} %" for i, p in enumerate(self.gpu_percent)) if self.gpu_percent
               else "GPU use unknown (no nvidia-smi)")
        return f"{cpu}; {gpu} (mean utilisation over {self.seconds:.0f} s)"


class UsageSampler:
    """``with UsageSampler() as s: ...`` then ``s.usage``: the mean use over the block."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self.usage: Usage | None = None
        self._gpu_samples: list[list[float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.every_s):
            got = gpu_utilisation()
            if got:
                self._gpu_samples.append(got)

    def __enter__(self) -> "UsageSampler":
        import os

        self._cpus = os.cpu_count() or 1
        self._t0, self._ticks0 = time.monotonic(), cpu_ticks()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=15)
        ticks, seconds = cpu_ticks(), time.monotonic() - self._t0
        busy = None
        if ticks is not None and self._ticks0 is not None and ticks[1] > self._ticks0[1]:
            busy = (ticks[0] - self._ticks0[0]) / (ticks[1] - self._ticks0[1]) * self._cpus
        n = len(self._gpu_samples)
        width = min((len(s) for s in self._gpu_samples), default=0)
        gpus = [sum(s[i] for s in self._gpu_samples) / n for i in range(width)] if n else []
        self.usage = Usage(seconds, self._cpus, busy, gpus)
