"""gemmlab.runtime.printf without a GPU: what is written to file descriptor 1 reaches sys.stdout."""
from __future__ import annotations

import os

import pytest

from gemmlab.runtime.printf import captured_fd_output, forward_device_printf, uses_printf


def test_writes_to_fd_1_are_captured_and_fd_1_is_restored(capfd) -> None:
    with captured_fd_output(1) as printed:
        os.write(1, b"from the driver\n")
    assert printed == ["from the driver\n"]
    os.write(1, b"after\n")
    out = capfd.readouterr().out
    assert "after" in out and "from the driver" not in out


def test_forwarded_output_goes_to_sys_stdout(capsys) -> None:
    forward_device_printf(lambda: os.write(1, b"thread 7 says hi\n"))
    assert capsys.readouterr().out == "thread 7 says hi\n"


def test_output_before_a_failing_synchronise_is_still_forwarded(capsys) -> None:
    def fails() -> None:
        os.write(1, b"last words\n")
        raise RuntimeError("illegal memory access")

    with pytest.raises(RuntimeError):
        forward_device_printf(fails)
    assert "last words" in capsys.readouterr().out


def test_printf_is_recognised_in_ptx() -> None:
    assert uses_printf("call.uni (retval0), vprintf, (param0, param1);")
    assert not uses_printf(".entry k() { ret; }")
    assert not uses_printf(None)
