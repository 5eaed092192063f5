"""gemmlab.dsl turns the CuTe DSL's printed launch complaints (too much shared memory) into a
LaunchError, and loses none of what C code printed meanwhile."""
from __future__ import annotations

import ctypes

import pytest

from gemmlab.dsl.launch_messages import captured_c_stdout, launch_error
from gemmlab.errors import LaunchError

OVER = ("\nError: kernel '@kernels::@kernel_cutlass_gemm06_kernel_tensorptrf16_0' launch shared memory exceeds "
        "current GPU arch sm_90a allowed. Allocated: 262528 bytes. Max: 232448 bytes.\n\n")
UNDER = ("\nError: shared memory usage in 'kernel_x' may exceed available memory set in kernel launch. "
         "Allocated: 1024 bytes. Used: 4096 bytes.\n\n")


def test_what_c_code_prints_is_captured_and_printed_on(capfd) -> None:
    libc = ctypes.CDLL(None)
    with captured_c_stdout() as printed:
        libc.printf(b"from C: %d\n", 42)
    assert printed == ["from C: 42\n"]
    assert "from C: 42" in capfd.readouterr().out


def test_shared_memory_complaints_become_launch_errors() -> None:
    over = launch_error("other output" + OVER, "gemm06_dsl_jit")
    assert isinstance(over, LaunchError)
    assert "262,528 bytes" in str(over) and "232,448" in str(over) and "fewer pipeline stages" in str(over)
    under = launch_error(UNDER, "k")
    assert isinstance(under, LaunchError) and "4,096" in str(under) and "smem=" in str(under)
    assert launch_error("all fine\n", "k") is None


def test_capture_restores_stdout_when_the_call_raises(capfd) -> None:
    libc = ctypes.CDLL(None)
    with pytest.raises(RuntimeError):
        with captured_c_stdout():
            libc.printf(b"before the crash\n")
            raise RuntimeError("boom")
    libc.printf(b"after\n")
    libc.fflush(None)
    out = capfd.readouterr().out
    assert "before the crash" in out and "after" in out
