"""benchmarks/ncu.py without a GPU or ncu: reading ncu's CSV, its units, finding ncu, and the run loop
(retry without unknown metrics, failures with ncu's output) against a stand-in for ncu."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

import ladder_traffic  # noqa: E402
import ncu  # noqa: E402

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def row(launch: int, kernel: str, metric: str, unit: str, value: str) -> str:
    return (f'"{launch}","4242","python3","127.0.0.1","{kernel}","1","7","(384, 1, 1)","(132, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","{metric}","{unit}","{value}"')


def csv_text(*rows: str, child: str = "") -> str:
    return "\n".join(["==PROF== Connected to process 4242 (/usr/bin/python3)", child,
                      '==PROF== Profiling "k" - 0: 0%....50%....100% - 3 passes',
                      "==PROF== Disconnected from process 4242", HEADER, *rows]) + "\n"


METRICS = {"sectors": "lts__t_sectors_srcunit_tex.sum", "dram": "dram__bytes_read.sum",
           "time": "gpu__time_duration.sum", "clock": "sm__cycles_elapsed.avg.per_second"}


def test_csv_rows_become_launches_in_order_with_thousands_separators_and_units() -> None:
    text = csv_text(
        row(10, "second_kernel", "lts__t_sectors_srcunit_tex.sum", "sector", "7"),
        row(9, "kernel_cutlass_cap_kernel_CopyAtom", "lts__t_sectors_srcunit_tex.sum", "sector", "1,190,493,632"),
        row(9, "kernel_cutlass_cap_kernel_CopyAtom", "dram__bytes_read.sum", "Mbyte", "201.33"),
        row(9, "kernel_cutlass_cap_kernel_CopyAtom", "gpu__time_duration.sum", "usecond", "1,234.5"),
        row(9, "kernel_cutlass_cap_kernel_CopyAtom", "sm__cycles_elapsed.avg.per_second", "cycle/nsecond", "1.75"),
        row(9, "kernel_cutlass_cap_kernel_CopyAtom", "sm__not_asked_for.sum", "", "5"),
        row(10, "second_kernel", "dram__bytes_read.sum", "byte", "n/a"),
        child="KERNEL_COUNTERS {}")
    first, second = ncu.parse_csv(text, METRICS)          # launch 9 before launch 10: numeric order
    assert first["kernel"] == "kernel_cutlass_cap_kernel_CopyAtom"
    assert first["sectors"] == 1_190_493_632
    assert first["dram"] == pytest.approx(201.33e6)
    assert first["time"] == pytest.approx(1_234_500)      # nanoseconds
    assert first["clock"] == pytest.approx(1.75e9)        # per second
    assert set(first) == {"kernel", *METRICS}             # a metric nobody asked for is left out
    assert second["kernel"] == "second_kernel" and second["sectors"] == 7
    assert math.isnan(second["dram"])                     # n/a: not counted
    assert "time" not in second and "clock" not in second  # not reported at all: absent


def test_output_without_csv_rows_has_no_launches() -> None:
    assert ncu.parse_csv("==PROF== Connected\n==WARNING== No kernels were profiled.\n", METRICS) == []


@pytest.mark.parametrize("value, unit, expected", [
    (3.0, "sector", 3.0), (2.0, "Ksector", 2e3), (1.5, "Gbyte", 1.5e9), (4.0, "byte", 4.0),
    (85.2, "%", 85.2), (12.0, "nsecond", 12.0), (1.5, "msecond", 1.5e6), (2.0, "us", 2e3),
    (1.98, "Ghz", 1.98e9), (1.98, "GHz", 1.98e9), (1755.0, "cycle/usecond", 1.755e9),
    (3.2, "Tbyte/second", 3.2e12), (7.0, "inst", 7.0), (7.0, "", 7.0),
])
def test_units_become_base_units(value, unit, expected) -> None:
    assert ncu.to_base(value, unit) == pytest.approx(expected)


def test_number_reads_separators_and_not_counted() -> None:
    assert ncu.number("1,190,493,632", "sector") == 1_190_493_632
    assert ncu.number(" 0.5 ", "Kbyte") == 500
    assert math.isnan(ncu.number("n/a")) and math.isnan(ncu.number(""))


def test_missing_metrics_named_in_ncu_errors() -> None:
    out = "==ERROR== Failed to find metric sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed\n"
    assert ncu.missing_metrics(out) == {"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"}
    assert ncu.missing_metrics("==PROF== all fine") == set()


def test_find_ncu_says_how_to_get_it(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu, "FALLBACKS", (str(tmp_path / "cuda" / "ncu"), str(tmp_path / "opt" / "*" / "ncu")))
    with pytest.raises(SystemExit, match=r"ncu \(NVIDIA Nsight Compute\) not found.*PATH"):
        ncu.find_ncu()
    for version in ("2024.1.0", "2025.3.1"):
        (tmp_path / "opt" / version).mkdir(parents=True)
        (tmp_path / "opt" / version / "ncu").write_text("")
    assert ncu.find_ncu() == str(tmp_path / "opt" / "2025.3.1" / "ncu")   # the newest install
    found = tmp_path / "ncu"
    found.write_text("#!/bin/sh\n")
    found.chmod(0o755)
    assert ncu.find_ncu() == str(found)                                   # PATH first


class FakeNcu:
    """Stands in for subprocess.run of ncu: answers each call with the next (returncode, stdout, stderr)."""

    def __init__(self, *answers: tuple[int, str, str]) -> None:
        self.answers = list(answers)
        self.commands: list[list[str]] = []

    def __call__(self, cmd, **kwargs):
        self.commands.append(cmd)
        code, out, err = self.answers.pop(0)
        return subprocess.CompletedProcess(cmd, code, out, err)


def test_profile_drops_an_unknown_metric_and_runs_again(monkeypatch) -> None:
    monkeypatch.setattr(ncu, "find_ncu", lambda: "/x/ncu")
    fake = FakeNcu((1, "", "==ERROR== Failed to find metric dram__bytes_read.sum\n"),
                   (0, csv_text(row(0, "k", "lts__t_sectors_srcunit_tex.sum", "sector", "1,024"), child="HELLO"), ""))
    monkeypatch.setattr(ncu.subprocess, "run", fake)
    launches, stdout = ncu.profile(["python", "child.py"], {"sectors": METRICS["sectors"], "dram": METRICS["dram"]},
                                   ["--clock-control", "none"])
    assert fake.commands[0] == ["/x/ncu", "--csv", "--clock-control", "none", "--metrics",
                                "lts__t_sectors_srcunit_tex.sum,dram__bytes_read.sum", "python", "child.py"]
    assert fake.commands[1][5] == "lts__t_sectors_srcunit_tex.sum"
    assert launches == [{"kernel": "k", "sectors": 1024.0}] and "HELLO" in stdout


def test_a_failed_run_shows_the_end_of_ncus_output(monkeypatch) -> None:
    monkeypatch.setattr(ncu, "find_ncu", lambda: "/x/ncu")
    err = "\n".join(f"line {i}" for i in range(100)) + "\ncapstone computed a wrong result: 3 of 16 elements\n"
    monkeypatch.setattr(ncu.subprocess, "run", FakeNcu((1, "==ERROR== ERR_NVGPUCTRPERM\n", err)))
    with pytest.raises(SystemExit) as exc:
        ncu.profile(["python", "child.py"], METRICS)
    text = str(exc.value)
    assert "exit status 1" in text and "computed a wrong result" in text and "line 99" in text
    assert "line 3\n" not in text                       # the end only
    assert "performance counters" in text               # the hint for ERR_NVGPUCTRPERM


def test_ladder_traffic_runs_ncu_as_before(monkeypatch) -> None:
    """The command line ladder_traffic built before ncu.py existed, and its CONFIGS line read back."""
    monkeypatch.setattr(ncu, "find_ncu", lambda: "/x/ncu")
    out = csv_text(row(1, "ladder_wmma(const __half *)", "lts__t_sectors_srcunit_tex_op_read.sum", "sector", "2,048"),
                   child='CONFIGS {"ladder_wmma": {"BM": 128, "BN": 128, "BK": 32}}')
    fake = FakeNcu((0, out, ""))
    monkeypatch.setattr(ncu.subprocess, "run", fake)
    launches, configs = ladder_traffic.profile(4096, {"PAD": 0})
    assert fake.commands == [["/x/ncu", "--csv", "--kernel-name", "regex:ladder_", "--metrics",
                              ",".join(ladder_traffic.METRICS.values()), sys.executable, ladder_traffic.__file__,
                              "--child", "--shape", "4096", "--set=PAD=0"]]
    assert launches == [{"kernel": "ladder_wmma(const __half *)", "l2_read_from_l1": 2048.0}]
    assert configs == {"ladder_wmma": {"BM": 128, "BN": 128, "BK": 32}}
