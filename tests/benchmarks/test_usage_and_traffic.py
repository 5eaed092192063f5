"""benchmarks/usage.py (how busy CPUs and GPUs were) and ladder_traffic's --set parsing, without a GPU."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import ladder_traffic  # noqa: E402
import usage  # noqa: E402


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="needs Linux's /proc/stat")
def test_a_busy_block_counts_busy_cores_and_says_when_gpu_use_is_unknown(monkeypatch) -> None:
    monkeypatch.setattr(usage, "gpu_utilisation", lambda: [])        # as on a machine without nvidia-smi
    with usage.UsageSampler(every_s=0.05) as sampler:
        end = time.monotonic() + 0.5
        while time.monotonic() < end:
            pass
    u = sampler.usage
    assert u is not None and u.cpus == (os.cpu_count() or 1) and u.seconds >= 0.5
    assert u.cores_busy is not None and 0.3 < u.cores_busy <= u.cpus, u     # this thread spun the whole time
    assert u.gpu_percent == [] and "GPU use unknown" in u.summary()


def test_gpu_samples_are_averaged_per_gpu(monkeypatch) -> None:
    samples = iter([[10.0, 90.0], [30.0, 70.0]] + [[20.0, 80.0]] * 1000)
    monkeypatch.setattr(usage, "gpu_utilisation", lambda: next(samples))
    with usage.UsageSampler(every_s=0.01) as sampler:
        time.sleep(0.3)
    assert len(sampler.usage.gpu_percent) == 2
    assert sampler.usage.gpu_percent[0] == pytest.approx(20.0, abs=0.5)
    assert sampler.usage.gpu_percent[1] == pytest.approx(80.0, abs=0.5)
    assert "GPU 0 20 %, GPU 1 80 %" in sampler.usage.summary()


def test_settings_parse_and_bad_ones_say_why() -> None:
    assert ladder_traffic.parse_settings(["PAD=0", "STAGES=3"]) == {"PAD": 0, "STAGES": 3}
    for bad in ("PAD", "PAD=x", "=4", "PAD=1.5"):
        with pytest.raises(SystemExit, match="expected KEY=INTEGER"):
            ladder_traffic.parse_settings([bad])
