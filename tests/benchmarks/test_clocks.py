"""benchmarks/clocks.py: what it makes of nvidia-smi's samples (the GPU part runs on the device)."""
from __future__ import annotations


import pytest

import clocks  # noqa: E402


def test_summary_of_samples() -> None:
    rows = [["1980", "420.5", "50", "Not Active", "Not Active", "Not Active"],
            ["1410", "699.0", "61", "Active", "Not Active", "Not Active"],
            ["1395", "700.2", "63", "Active", "Not Active", "Not Active"],
            ["[N/A]", "[N/A]", "63", "Active", "Not Active", "Not Active"],   # unreadable: left out
            ["1400", "12"]]                                                      # cut short: left out
    s = clocks.summarize(rows)
    assert s["samples"] == 3
    assert s["clock_mhz"] == 1410 and s["power_w"] == 699.0 and s["temp_c"] == 63
    assert s["power_cap"] == pytest.approx(2 / 3) and s["hw_slow"] == 0 and s["thermal"] == 0


def test_no_readable_sample_gives_an_empty_summary() -> None:
    assert clocks.summarize([["[N/A]", "[N/A]", "[N/A]", "[N/A]", "[N/A]", "[N/A]"]]) == {}


def test_unknown_input_kind_is_refused() -> None:
    with pytest.raises(SystemExit, match="randn, zeros or swapped"):
        clocks.inputs("ones", 4, None)


def test_without_a_gpu_it_says_so(capsys, no_gpu) -> None:
    assert clocks.main(["hopper_ws"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out
