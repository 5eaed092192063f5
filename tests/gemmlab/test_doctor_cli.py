"""`gemmlab doctor` and the `gemmlab` command line, run as a student would run them."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemmlab.notebook.doctor import Report, Row, doctor

from tests.support import ROOT as REPO
from tests.support import KERNELS


def gemmlab_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`gemmlab ARGS` through the same entry point pyproject installs (gemmlab.cli:main)."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-c", "import sys, gemmlab.cli as c; sys.exit(c.main())", *args],
                          env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def test_doctor_report_covers_the_toolchain(no_gpu: None) -> None:
    report = doctor()
    items = {r.item: r for r in report.rows}
    for item in ("Python", "gemmlab", "torch", "GPU", "NVRTC", "test compile", "CUDA runtime headers",
                 "CCCL headers", "CuTe/CUTLASS headers", "crt/mma.h (WMMA)", "CuTe DSL", "cache"):
        assert item in items, item
    assert items["test compile"].status == "ok" and "sm_90a" in items["test compile"].detail
    assert report.ok and report.exit_code == 0
    assert "gemmlab doctor: healthy" in str(report)
    assert "<table>" in report._repr_html_()
    assert items["GPU"].status == "warn" and "compiling kernels" in items["GPU"].detail


def test_report_fails_only_on_fail_rows() -> None:
    warn = Report([Row("a", "ok", "x"), Row("b", "warn", "y", "do z")])
    assert warn.ok and "fix: do z" in str(warn)
    broken = Report([Row("a", "fail", "x", "pip install a")])
    assert not broken.ok and broken.exit_code == 1 and "BROKEN" in str(broken)


def test_cli_doctor_exits_0_on_a_healthy_machine() -> None:
    run = gemmlab_cli("doctor")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "NVRTC" in run.stdout and "gemmlab doctor: healthy" in run.stdout


def test_cli_compile_bad_file_exits_1_with_the_mapped_diagnostic(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k(float* x) {\n  x[0] = 1.0f;\n  int i = blockIdxx.x;\n}\n")
    run = gemmlab_cli("compile", str(bad), "--name", "k", "--arch", "sm_90a")
    assert run.returncode == 1
    assert 'bad.cu:3:11: error: identifier "blockIdxx" is undefined' in run.stderr
    assert "Traceback" not in run.stderr and str(tmp_path) not in run.stderr


def test_cli_compile_good_file_writes_cubin_and_ptx(tmp_path: Path) -> None:
    cubin = tmp_path / "wmma.cubin"
    run = gemmlab_cli("compile", str(KERNELS / "wmma_gemm.cu"), "--name", "wmma_gemm", "--arch", "sm_80",
                      "-o", str(cubin))
    assert run.returncode == 0, run.stderr
    assert "registers / thread" in run.stdout and "static shared memory" in run.stdout
    assert cubin.read_bytes()[:4] == b"\x7fELF"
    ptx = gemmlab_cli("compile", str(KERNELS / "wmma_gemm.cu"), "--name", "wmma_gemm", "--arch", "sm_80", "--ptx")
    assert ptx.returncode == 0 and ".entry _Z9wmma_gemm" in ptx.stdout


def test_cli_compile_missing_kernel_and_file(tmp_path: Path) -> None:
    run = gemmlab_cli("compile", str(KERNELS / "wmma_gemm.cu"), "--name", "gemm", "--arch", "sm_80")
    assert run.returncode == 1 and "Kernels found: wmma_gemm" in run.stderr
    missing = gemmlab_cli("compile", str(tmp_path / "nope.cu"), "--name", "k", "--arch", "sm_80")
    assert missing.returncode == 2 and "cannot read" in missing.stderr


GEMM_PY = """\
import torch

def torch_gemm(A, B, D):
    D.copy_((A.float() @ B.float().T).to(D.dtype))
"""


@pytest.mark.parametrize("command", ["check", "bench"])
def test_cli_check_and_bench_without_gpu_exit_2(tmp_path: Path, command: str, no_gpu: None) -> None:
    path = tmp_path / "mygemm.py"
    path.write_text(GEMM_PY)
    run = gemmlab_cli(command, str(path), "--name", "torch_gemm")
    assert run.returncode == 2
    assert "NoGPUError" in run.stderr and "needs a CUDA GPU" in run.stderr and "Traceback" not in run.stderr


def test_cli_usage_errors_exit_2() -> None:
    run = gemmlab_cli("bench", "x.py", "--name", "f", "--shape", "12x34")
    assert run.returncode == 2 and "MxNxK" in run.stderr


# --------------------------------------------------------------------------- GPU


@pytest.mark.gpu
def test_gpu_doctor_reports_the_gpu() -> None:
    items = {r.item: r for r in doctor().rows}
    assert items["GPU"].status == "ok" and "compute capability" in items["GPU"].detail


@pytest.mark.gpu
def test_gpu_cli_check_and_bench(tmp_path: Path) -> None:
    path = tmp_path / "mygemm.py"
    path.write_text(GEMM_PY)
    check = gemmlab_cli("check", str(path), "--name", "torch_gemm", "--shapes", "aligned")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "PASSED" in check.stdout
    bench = gemmlab_cli("bench", str(path), "--name", "torch_gemm", "--shape", "1024x1024x1024")
    assert bench.returncode == 0, bench.stdout + bench.stderr
    print(bench.stdout)
    missing = gemmlab_cli("check", str(path), "--name", "nope")
    assert missing.returncode == 1 and "defines no callable named 'nope'" in missing.stderr


@pytest.mark.gpu
def test_gpu_cli_check_of_a_wrong_gemm_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "wrong.py"
    path.write_text("def wrong(A, B, D):\n    D.copy_((A @ B.T) * 1.5)\n")
    run = gemmlab_cli("check", str(path), "--name", "wrong", "--shapes", "aligned")
    assert run.returncode == 1 and "FAILED" in run.stdout
