"""benchmarks/pool.py with the fake judge: both tables come out with their numbers, targets and verdicts."""
from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from pool.worker import sandbox_problem
from tests.support import ROOT
from tests.support.fake_judge import fake_judge_command


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_pool", ROOT / "benchmarks" / "pool.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_tables_of_a_small_class_with_the_fake_judge(bench) -> None:
    sandbox = not sandbox_problem()
    overhead = bench.measure_overhead(2, fake_judge_command(), "0", sandbox)
    load = bench.simulate_class(4, 2, 0.05, fake_judge_command(), "0", sandbox, slots=2)
    assert load["checks"] == load["passed"] == 8
    assert 0 <= load["wait_median_s"] <= load["wait_p90_s"] and load["total_median_s"] > 0
    assert overhead["device"].startswith("fake GPU") and overhead["local_median_s"] > 0
    text = bench.report(overhead, load, overhead["device"])
    lines = text.splitlines()
    assert lines[0] == "device: fake GPU (CPU tests)"
    overhead_row = lines[lines.index("1. overhead of one remote check (medians)") + 3].split()
    assert overhead_row[3:5] == ["<=", "0.3"] and overhead_row[5] in ("met", "MISSED")
    assert float(overhead_row[2]) == pytest.approx(overhead["overhead_s"], abs=1e-3)
    class_row = lines[lines.index("2. a class sharing one GPU") + 3].split()
    assert class_row[:3] == ["4", "8", "8"] and class_row[-1] in ("met", "MISSED")
    assert float(class_row[3]) == pytest.approx(load["wait_median_s"], abs=1e-3)


def test_percentiles_and_verdicts_follow_the_numbers(bench) -> None:
    assert bench.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 0.9) == 5.0
    assert bench.percentile([1.0, 2.0], 0.5) == 2.0
    slow = {"local_median_s": 1.0, "remote_median_s": 1.5, "overhead_s": 0.5, "device": "GPU X"}
    busy = {"students": 30, "checks": 90, "passed": 90, "wait_median_s": 2.5, "wait_p90_s": 6.0,
            "total_median_s": 4.0, "total_p90_s": 8.0}
    text = bench.report(slow, busy, "GPU X")
    assert len(re.findall(r"MISSED", text)) == 2
