"""gemmlab.dsl turns the CuTe DSL's printed launch complaints (too much shared memory) into a
LaunchError, and loses none of what C code printed meanwhile."""
from __future__ import annotations

import ctypes

import pytest

from gemmlab.dsl.launch_messages import captured_c_stdout, first_launch, launch_error
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


def _prints(text: str):
    libc = ctypes.CDLL(None)

    def run():
        libc.printf(text.encode())
        return 0
    return run


def test_first_launch_raises_the_complaint_whether_the_launch_returned_or_failed(capfd) -> None:
    # Seen on an H100: the DSL printed the complaint and skipped the launch (4 stages), or printed it
    # and then raised cudaErrorInvalidValue from the driver (5 stages).
    with pytest.raises(LaunchError, match="did not run"):
        first_launch(_prints(OVER), "gemm06_dsl_jit")

    def printed_then_failed():
        _prints(OVER)()
        raise RuntimeError("CUDA launch failed: cudaErrorInvalidValue (1)")

    with pytest.raises(LaunchError, match="did not run.*262,528"):
        first_launch(printed_then_failed, "gemm06_dsl_jit")
    assert "launch shared memory exceeds" in capfd.readouterr().out     # printed on, not swallowed


def test_first_launch_passes_other_results_and_failures_through() -> None:
    assert first_launch(lambda: 0, "k") == 0

    def fails():
        raise ValueError("something else")

    with pytest.raises(ValueError, match="something else"):
        first_launch(fails, "k")
