"""gemmlab.profiling.ncu without a GPU or ncu: versions, the raw-page CSV, export and import against stand-ins,
and a stuck profile stopped with the process it profiles. The CSV here is SYNTHETIC (gemmlab.profiling.synthetic
prints ncu's format), not a measurement."""
from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gemmlab.profiling import ncu, synthetic, versions
from gemmlab.profiling.errors import ProfilerError
from gemmlab.profiling.ncu import NcuVersion

VERSION_TEXT = ("NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2025 NVIDIA Corporation\n"
                "Version 2025.3.1.0 (build 36398880) (public-release)\n")


def test_versions_are_read_and_ordered() -> None:
    assert NcuVersion.parse(VERSION_TEXT) == NcuVersion(2025, 3, 1, 0)
    assert str(NcuVersion.parse(VERSION_TEXT)) == "2025.3.1"
    assert NcuVersion.parse("2024.3.2") < NcuVersion(2024, 3, 10) < NcuVersion(2025, 1, 0)
    with pytest.raises(ProfilerError, match="could not read Nsight Compute's version"):
        NcuVersion.parse("ncu: command not found")


@pytest.mark.parametrize("version, arch, refused", [
    ("2022.2.1", "sm_90a", True),      # before CUDA 11.8: no Hopper
    ("2022.3.0", "sm_90a", False),
    ("2025.3.1", "sm_90", False),
    ("2024.3.1", "sm_89", True),       # Ada's peak throughputs fixed in 2024.3.2
    ("2024.3.2", "sm_89", False),
    ("2024.3.1", "sm_90a", False),     # that fix was for Ada only
    ("2021.1.0", "sm_80", False),
])
def test_refused_versions_say_why_and_where_documented(version: str, arch: str, refused: bool) -> None:
    v = NcuVersion.parse(version)
    assert (versions.refusal(v, arch) is not None) == refused
    if refused:
        with pytest.raises(ProfilerError) as exc:
            versions.check_version(v, arch)
        text = str(exc.value)
        assert f"Nsight Compute {version} is refused" in text and "Source: " in text and "http" in text
        assert "or newer" in text
    else:
        versions.check_version(v, arch)


def test_the_raw_page_becomes_launches_in_base_units() -> None:
    first = synthetic.counters((4096, 4096, 4096), "gemm", seed=1)
    second = {"gpu__time_duration.sum": 1234.5, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 88.0}
    text = synthetic.raw_csv([("kernel_cutlass_ws_kernel_0", first), ("fill_kernel", second)],
                             child_output="==PROF== Connected to process 4242\nhello from the child")
    launches = ncu.parse_raw_csv(text)
    assert [x["kernel"] for x in launches] == ["kernel_cutlass_ws_kernel_0", "fill_kernel"]
    assert launches[0]["block"] == "(384, 1, 1)" and launches[0]["grid"] == "(132, 1, 1)"
    for metric, value in first.items():
        assert launches[0][metric] == pytest.approx(value, rel=1e-4), metric
    assert math.isnan(launches[1]["launch__block_size"])          # printed as n/a: not counted
    assert launches[1]["gpu__time_duration.sum"] == pytest.approx(1234.5)


def test_a_raw_page_in_scaled_units_and_without_a_unit_row() -> None:
    header = '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",' \
             '"Grid Size","Device","CC","gpu__time_duration.sum","dram__bytes_read.sum"'
    units = '"","","","","","","","","","","","usecond","Mbyte"'
    row = '"0","1","p","h","k","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","12.5","1,024"'
    (launch,) = ncu.parse_raw_csv("\n".join([header, units, row]))
    assert launch["gpu__time_duration.sum"] == pytest.approx(12_500) and launch["dram__bytes_read.sum"] == 1.024e9
    (bare,) = ncu.parse_raw_csv("\n".join([header, row]))
    assert bare["gpu__time_duration.sum"] == 12.5
    assert ncu.parse_raw_csv("==PROF== No kernels were profiled.\n") == []


def _stand_in(tmp_path: Path, script: str) -> str:
    """An executable named ncu: a Python script (the stand-in for Nsight Compute)."""
    path = tmp_path / "ncu"
    path.write_text(f"#!{sys.executable}\n{script}")
    path.chmod(0o755)
    return str(path)


NCU_STAND_IN = r'''
import sys, pathlib, subprocess, json
args = sys.argv[1:]
if args[:1] == ["--version"]:
    print("Version 2025.3.1.0 (build 1) (public-release)"); sys.exit(0)
if "--import" in args:
    sys.path.insert(0, {root!r})
    from gemmlab.profiling import synthetic
    print(synthetic.raw_csv([("k", {{"gpu__time_duration.sum": 5.0}})])); sys.exit(0)
metrics = args[args.index("--metrics") + 1].split(",")
if "nope__unknown.sum" in metrics:
    print("==ERROR== Failed to find metric nope__unknown.sum"); sys.exit(1)
pathlib.Path(args[args.index("--export") + 1]).write_bytes(b"NCU-REPORT")
child = args[args.index("--metrics") + 2:]
sys.exit(subprocess.call(child))
'''


def test_export_drops_an_unknown_metric_runs_the_child_and_import_reads_the_report(tmp_path) -> None:
    root = str(Path(__file__).resolve().parents[3])
    tool = _stand_in(tmp_path, NCU_STAND_IN.format(root=root))
    assert ncu.ncu_version(tool) == NcuVersion(2025, 3, 1)
    marker = tmp_path / "child-ran"
    child = [sys.executable, "-c", f"open({str(marker)!r}, 'w').write('yes'); print('child says hi')"]
    report = tmp_path / "r.ncu-rep"
    output, known = ncu.export(tool, child, ["gpu__time_duration.sum", "nope__unknown.sum"], report, ["--set", "full"],
                               timeout=60)
    assert known == ["gpu__time_duration.sum"] and marker.read_text() == "yes" and "child says hi" in output
    assert report.read_bytes() == b"NCU-REPORT"
    (launch,) = ncu.import_raw(tool, report)
    assert launch["kernel"] == "k" and launch["gpu__time_duration.sum"] == 5.0


def test_a_failing_ncu_is_an_error_with_its_output_and_the_permission_hint(tmp_path) -> None:
    tool = _stand_in(tmp_path, "import sys\nprint('==ERROR== ERR_NVGPUCTRPERM - no access')\nsys.exit(1)\n")
    with pytest.raises(ProfilerError) as exc:
        ncu.export(tool, ["true"], ["gpu__time_duration.sum"], tmp_path / "r", timeout=30)
    assert "exit status 1" in str(exc.value) and "NVreg_RestrictProfilingToAdminUsers=0" in str(exc.value)


def test_a_profile_past_its_time_is_stopped_with_the_process_it_profiles(tmp_path) -> None:
    pid_file = tmp_path / "child.pid"
    tool = _stand_in(tmp_path, "import subprocess, sys\nsubprocess.call([sys.executable, '-c', "
                               f"\"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
                               "time.sleep(600)\"])\n")
    started = time.monotonic()
    with pytest.raises(ProfilerError, match="longer than 2 s and was stopped"):
        ncu.run_stoppable([tool], 2, None)
    assert time.monotonic() - started < 30
    pid = int(pid_file.read_text())
    for _ in range(50):                                   # the grandchild (the profiled process) is gone too
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the profiled process outlived its stopped profiler")


def test_find_ncu_says_how_to_get_it(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ProfilerError, match=r"not found: it comes with the CUDA toolkit"):
        ncu.find_ncu((str(tmp_path / "none" / "ncu"),))


def test_the_benchmarks_share_the_toolkits_ncu_plumbing() -> None:
    import ncu as bench_ncu   # benchmarks/ncu.py

    assert bench_ncu.parse_csv is ncu.parse_csv and bench_ncu.to_base is ncu.to_base
    assert bench_ncu.FALLBACKS == ncu.FALLBACKS
    done = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'benchmarks'); import ncu"],
                          cwd=Path(__file__).resolve().parents[3], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
