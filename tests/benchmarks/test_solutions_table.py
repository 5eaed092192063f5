"""benchmarks/solutions.py's table with a fake GPU backend: every row carries its interval, stands
beside the previous best row of the same GPU with the verdict beyond or within the noise, the
--update-best file round-trips, the committed best file is well-formed, the capstone and the
CUTLASS reference are part of the run, and a missing CUTLASS checkout is a clear skip."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from gemmlab.timing.bench import result_from_rounds
from tests.support import ROOT

DEVICE = "GPU X"
ROUND_RATIOS = [0.972, 0.968, 0.975, 0.970, 0.979, 0.965, 0.971, 0.973, 0.969, 0.974, 0.977, 0.966]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_solutions_table", ROOT / "benchmarks" / "solutions.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class FakeBackend:
    """Per kernel, the per-round ratios its timing returns (scaled from ROUND_RATIOS)."""

    def __init__(self, scale: dict[str, float], wrong: tuple[str, ...] = ()):
        self.scale, self.wrong, self.calls = scale, wrong, []

    def first_call(self, fn, convention, shape, dtype):
        self.calls.append(("first", shape, dtype))

    def check(self, fn, convention, dtype, shapes):
        name = getattr(fn, "__name__", "")
        return name not in self.wrong, f"check of {name}"

    def bench(self, fn, shape, convention, dtype, label, method="flushed"):
        self.calls.append(("bench", label, shape, dtype, method))
        ratios = [r * self.scale.get(label, 1.0) for r in ROUND_RATIOS]
        kernel = [[0.2, 0.2, 0.2] for _ in ratios]
        cublas = [[0.2 * r] * 3 for r in ratios]
        return result_from_rounds(kernel, cublas, shape, convention, dtype, dtype, DEVICE, label)


def _gemm(A, B, D):
    return None


def _args(bench, tmp_path: Path, *extra: str):
    return bench.parse_args(["--quick", "--best", str(tmp_path / "best.json"), "--out", str(tmp_path / "out"), *extra])


def test_rows_carry_intervals_and_stand_beside_the_previous_best(bench, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(bench, "load_kernel", lambda assignment, name, overrides=None: (_gemm, {}))
    args = _args(bench, tmp_path, "--only", "hopper_ws", "--only", "capstone")
    backend = FakeBackend({"hopper_ws": 1.0, "capstone": 1.0})
    reports, table = bench.run_all(args, backend, DEVICE)
    assert [r.kernel for r in reports] == ["hopper_ws", "capstone"]
    row = reports[0].rows[0]
    assert row.ratio_low == pytest.approx(0.968) and row.ratio_high == pytest.approx(0.975) and len(row.round_ratios) == 12
    assert "| 687.2 | 707.4 | 0.972 | 96% interval 0.968–0.975 | - | - | float16: yes |" in table

    best = bench.load_best(args.best)
    assert best == {"devices": {}}
    assert bench.update_best(best, reports, DEVICE, "2026-11-25", "abc1234") == [
        "hopper_ws 4096x4096x4096 float16", "capstone 4096x4096x4096 float16"]
    bench.save_best(best, args.best)

    # the next run: hopper_ws 3 % faster (beyond the noise), capstone the same up to noise
    backend = FakeBackend({"hopper_ws": 1.03, "capstone": 1.0005})
    reports, table = bench.run_all(args, backend, DEVICE)
    ws, cap = reports[0].rows[0], reports[1].rows[0]
    assert ws.previous["ratio"] == pytest.approx(0.9715, abs=1e-4) and ws.versus.startswith("faster (1.030×")
    assert cap.versus.startswith("within noise")
    ws_line = next(line for line in table.splitlines() if line.startswith("| hopper_ws |"))
    assert "0.972 (0.968–0.975) [2026-11-25, abc1234]" in ws_line and "faster" in ws_line
    assert bench.update_best(bench.load_best(args.best), reports, DEVICE, "2026-11-26", "def5678") == [
        "hopper_ws 4096x4096x4096 float16", "capstone 4096x4096x4096 float16"]
    assert bench.update_best(bench.load_best(args.best), reports, "GPU Y", "d", "c") != [], "another GPU: its own best"
    # a previous best without rounds (recorded before intervals): the plain difference, noise unknown
    old = {"ratio": 0.95}
    assert bench.versus(ws, old).endswith("(no rounds on both sides: noise unknown)")


def test_a_wrong_kernel_is_not_timed_and_the_table_says_so(bench, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(bench, "load_kernel", lambda assignment, name, overrides=None: (_gemm, {}))
    backend = FakeBackend({}, wrong=("_gemm",))
    reports, table = bench.run_all(_args(bench, tmp_path, "--only", "gemm06_cpp"), backend, DEVICE)
    assert reports[0].status == "failed" and not reports[0].rows
    assert not [c for c in backend.calls if c[0] == "bench"]
    assert "| gemm06_cpp | tn | - |" in table and "float16: NO" in table


def test_the_committed_best_file_is_well_formed(bench) -> None:
    best = bench.load_best(bench.BEST)
    names = {n for _, n in bench.KERNELS} | set(bench.REFERENCES)
    for device, kernels in best["devices"].items():
        for kernel, rows in kernels.items():
            assert kernel in names, kernel
            for key, row in rows.items():
                shape, dtype, *method = key.split()
                assert len(shape.split("x")) == 3 and dtype in bench.DTYPES and method in ([], ["nvidia"])
                assert 0 < row["ratio"] < 10 and row["date"]
                if row.get("ratio_low") is not None:
                    assert row["ratio_low"] <= row["ratio"] <= row["ratio_high"]


def test_the_capstone_is_one_of_the_kernels(bench) -> None:
    fn, ns = bench.load_kernel("09_capstone", "capstone")
    assert fn is ns["capstone_gemm"] and bench.convention_of(fn, ns, "capstone") == "tn"


def test_cutlass_reference_row_and_a_missing_checkout(bench, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(bench, "load_kernel", lambda assignment, name, overrides=None: (_gemm, {}))
    args = _args(bench, tmp_path, "--only", "hopper_ws", "--cutlass", str(tmp_path / "no-cutlass"))
    reports, table = bench.run_all(args, FakeBackend({}), DEVICE)
    assert reports[0].kernel == "cutlass_persistent" and reports[0].status == "skipped"
    assert "dense_gemm_persistent.py under" in reports[0].reason and "skipped" in table

    import cutlass_reference

    example = tmp_path / "cutlass" / cutlass_reference.EXAMPLE
    example.parent.mkdir(parents=True)
    example.write_text("class Other:\n    pass\n")
    with pytest.raises(LookupError, match="defines no HopperWgmmaGemmPersistentKernel"):
        cutlass_reference.load_example(tmp_path / "cutlass")
    example.write_text("import no_such_module_here\n")
    with pytest.raises(LookupError, match="did not import: ModuleNotFoundError"):
        cutlass_reference.load_example(tmp_path / "cutlass")
    example.write_text("class HopperWgmmaGemmPersistentKernel:\n    pass\n")
    monkeypatch.setattr(cutlass_reference, "persistent_gemm", lambda module: _gemm)
    args = _args(bench, tmp_path, "--only", "hopper_ws", "--cutlass", str(tmp_path / "cutlass"))
    reports, _ = bench.run_all(args, FakeBackend({"cutlass_persistent": 1.02}), DEVICE)
    ref = reports[0]
    assert ref.status == "ok" and ref.rows[0].ratio == pytest.approx(1.02 * 0.9715, abs=1e-4)
    assert ref.convention == "tn"


def test_chart_with_intervals_and_previous_best(bench, tmp_path) -> None:
    rep = bench.KernelReport("hopper_ws", "07_hopper")
    row = bench.Row("hopper_ws", (4096, 4096, 4096), "float16", 700.0, 720.0, 0.972, ratio_low=0.968,
                    ratio_high=0.975, coverage=0.96, previous={"ratio": 0.97})
    rep.rows.append(row)
    bench.chart([rep], tmp_path / "c.png", DEVICE)
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    json.dumps([r.__dict__ for r in rep.rows])
