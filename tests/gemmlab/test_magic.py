"""The %%kernel magic and the short error display, in a real IPython shell."""
from __future__ import annotations

import pytest
from IPython.core.interactiveshell import InteractiveShell

from gemmlab.errors import CompileError
from gemmlab.notebook.magic import parse_line

GOOD = """\
__global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}"""

BAD = """\
__global__ void scale(float* x, float a, int n) {
  int i = blockIdxx.x * blockDim.x + threadIdx.x;
}"""


@pytest.fixture(scope="module")
def shell() -> InteractiveShell:
    sh = InteractiveShell.instance()
    sh.run_line_magic("load_ext", "gemmlab")
    return sh


def test_magic_binds_a_kernel_and_prints_a_summary(shell: InteractiveShell, capsys) -> None:
    result = shell.run_cell(f"%%kernel scale --arch sm_90a\n{GOOD}")
    assert result.success
    kernel = shell.user_ns["scale"]
    assert type(kernel).__name__ == "Kernel" and kernel.arch == "sm_90a"
    out = capsys.readouterr().out
    assert out.startswith("scale [sm_90a]: ") and "regs" in out and "B smem" in out and "no spills" in out
    again = shell.run_cell(f"%%kernel scale --arch sm_90a\n{GOOD}")
    assert again.success and "cached" in capsys.readouterr().out


def test_compile_error_is_short_and_keeps_the_old_kernel(shell: InteractiveShell, capsys) -> None:
    shell.run_cell(f"%%kernel scale --arch sm_90a\n{GOOD}")
    before = shell.user_ns["scale"]
    capsys.readouterr()
    result = shell.run_cell(f"%%kernel scale --arch sm_90a\n{BAD}")
    assert not result.success and isinstance(result.error_in_exec, CompileError)
    assert shell.user_ns["scale"] is before  # never lost work
    out = capsys.readouterr()
    text = out.out + out.err
    # Line 3 as the notebook numbers it: the %%kernel line is line 1.
    assert 'scale.cu:3:11: error: identifier "blockIdxx" is undefined' in text
    assert "CompileError" in text and "\x1b[" in text  # red
    assert "Traceback" not in text and "site-packages" not in text and "magic.py" not in text


def test_full_traceback_is_still_one_tb_away(shell: InteractiveShell, capsys) -> None:
    shell.run_cell(f"%%kernel scale --arch sm_90a\n{BAD}")
    capsys.readouterr()
    shell.run_line_magic("tb", "")
    out = capsys.readouterr()
    assert "Traceback" in out.out + out.err and "compiler.py" in out.out + out.err


def test_any_gemmlab_error_is_short(shell: InteractiveShell, capsys) -> None:
    result = shell.run_cell("import gemmlab\ngemmlab.compile('__global__ void k() {}', 'k', arch='vax')")
    assert not result.success
    out = capsys.readouterr()
    assert "not a GPU target" in out.out + out.err and "Traceback" not in out.out + out.err


def test_other_errors_keep_their_traceback(shell: InteractiveShell, capsys) -> None:
    shell.run_cell("1 / 0")
    out = capsys.readouterr()
    assert "ZeroDivisionError" in out.out + out.err and "Traceback" in out.out + out.err


def test_options_templates_and_bad_lines(shell: InteractiveShell, capsys) -> None:
    cell = "template <int N> __global__ void fill(int* x) { x[0] = N * SCALE; }"
    result = shell.run_cell(f"%%kernel fill7 --arch sm_80 --kernel 'fill<7>' --option -DSCALE=6\n{cell}")
    assert result.success
    assert "42" in shell.user_ns["fill7"].ptx
    result = shell.run_cell(f"%%kernel fill7 --arch sm_80 --bogus\n{cell}")
    assert not result.success and "Unknown %%kernel argument '--bogus'" in str(result.error_in_exec)


def test_parse_line() -> None:
    args = parse_line("gemm --arch sm_90a --option -O3 -X=-DA=1 --include ./h --no-cache")
    assert (args.name, args.arch, args.options, args.include_dirs, args.cache) == (
        "gemm", "sm_90a", ["-O3", "-DA=1"], ["./h"], False)
    with pytest.raises(CompileError, match="needs the kernel's name first"):
        parse_line("--arch sm_90a")
    with pytest.raises(CompileError, match="needs a value"):
        parse_line("gemm --arch")
    with pytest.raises(CompileError, match="cannot name a Python variable"):
        parse_line("my-kernel")
