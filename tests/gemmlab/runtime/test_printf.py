"""gemmlab.running.printf without a GPU: what is written to file descriptor 1 reaches sys.stdout, bounded."""
from __future__ import annotations

import os
import re

import pytest

from gemmlab.running import printf
from gemmlab.running.printf import captured_fd_output, forward_device_printf, reset_budget, uses_printf


@pytest.fixture(autouse=True)
def fresh_budget() -> None:
    reset_budget()


def test_writes_to_fd_1_are_captured_and_fd_1_is_restored(capfd) -> None:
    with captured_fd_output(1) as printed:
        os.write(1, b"from the driver\n")
    assert printed == ["from the driver\n"] and printed.total_bytes == 16
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


def _flood(lines: int, width: int = 20) -> bytes:
    return b"".join(b"thread %05d: %s\n" % (i, b"x" * width) for i in range(lines))


def test_a_flood_shows_the_first_lines_then_says_how_much_was_dropped(capsys) -> None:
    """A printf in a loop fills the device buffer at every launch: the cell shows its first lines and one note."""
    forward_device_printf(lambda: os.write(1, _flood(10_000)))
    out = capsys.readouterr().out
    shown = [line for line in out.splitlines() if line.startswith("thread ")]
    assert shown == [f"thread {i:05d}: {'x' * 20}" for i in range(printf.MAX_LINES)], "the first lines, in order"
    note = re.search(r"\[device printf: ([\d,]+) more lines, (.+?), of this launch were dropped", out)
    assert note and int(note[1].replace(",", "")) == 10_000 - printf.MAX_LINES, out[-400:]
    assert f"the first {printf.MAX_LINES} lines" in out
    forward_device_printf(lambda: os.write(1, _flood(50)))       # the same cell: nothing more, no second note
    assert capsys.readouterr().out == ""
    reset_budget()                                                # the next cell shows again
    forward_device_printf(lambda: os.write(1, b"next cell\n"))
    assert capsys.readouterr().out == "next cell\n"


def test_a_flood_that_fits_in_lines_is_bounded_in_bytes_and_never_read_whole(capsys) -> None:
    """One enormous line (or a buffer grown with cudaDeviceSetLimit) is cut at the byte budget; what is not
    shown is counted from the capture file's size, not read into memory."""
    big = b"y" * (8 << 20) + b"\n"
    with captured_fd_output(1, limit=100) as printed:
        os.write(1, big)
    assert len(printed[0]) == 100 and printed.total_bytes == len(big)
    forward_device_printf(lambda: os.write(1, big))
    out = capsys.readouterr().out
    assert len(out) < printf.MAX_BYTES + 1000 and out.startswith("y" * 1000)
    assert "[device printf: 0 more lines, 8.3 MB, of this launch were dropped" in out, out[-300:]


def test_a_notebook_cell_gets_its_own_budget(capsys) -> None:
    """In IPython the budget follows the cell's execution count: each cell shows its first lines again."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        for _ in range(2):
            shell.run_cell("import os\nfrom gemmlab.running.printf import forward_device_printf\n"
                           f"forward_device_printf(lambda: os.write(1, {_flood(300)!r}))", store_history=True)
            text = capsys.readouterr().out
            assert text.count("thread ") == printf.MAX_LINES and "100 more lines" in text, text[-300:]
    finally:
        InteractiveShell.clear_instance()


FLOOD_GEMM = r"""
#include <cuda_fp16.h>
extern "C" __global__ void gemm_flood(const __half* A, const __half* B, __half* D, int M, int N, int K) {
  int m = blockIdx.y * 16 + threadIdx.y, n = blockIdx.x * 16 + threadIdx.x;
  for (int i = 0; i < 4; ++i) printf("m=%d n=%d i=%d\n", m, n, i);
  if (m < M && n < N) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += __half2float(A[m * K + k]) * __half2float(B[n * K + k]);
    D[m * N + n] = __float2half(acc);
  }
}
"""


def test_a_printf_flood_through_check_gemm_is_bounded_where_it_lands(gpu, capsys) -> None:
    """Every thread printing at every launch of a check (19.8 MB on an H200 before the bound): the cell shows the
    first lines and one note, and the check's verdict is the kernel's."""
    import gemmlab

    k = gemmlab.compile(FLOOD_GEMM, "gemm_flood")

    def my_gemm(A, B, D):
        M, K = A.shape
        N = B.shape[0]
        k(A, B, D, M, N, K, grid=((N + 15) // 16, (M + 15) // 16), block=(16, 16))

    result = gemmlab.check_gemm(my_gemm, shapes=[(256, 256, 64), (128, 64, 32), (33, 17, 9)])
    out = capsys.readouterr().out
    assert result.passed, result
    assert out.count("m=") <= printf.MAX_LINES and len(out.encode()) < printf.MAX_BYTES + 2000, len(out)
    assert out.count("of this launch were dropped") == 1, out[-500:]
