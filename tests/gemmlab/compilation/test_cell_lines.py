"""Compile errors name the notebook line a student sees, not the line of the source string.

A kernel string written as ``SRC = r\"\"\"`` + newline under a comment starts two lines below the
top of its cell, and sources joined from several cells start anywhere; NVRTC only knows the string.
"""
from __future__ import annotations

import pytest

from gemmlab.compiling.cell_lines import CellLine, annotate, cell_line
from gemmlab.errors import CompileError

KERNEL_CELL = '''# The kernel (this comment is line 1 of the cell)
SRC = r"""
__global__ void broken(float* x)
{
    x[0] = not_declared;
}
"""
'''
SOURCE = KERNEL_CELL.split('r"""', 1)[1].split('"""', 1)[0]   # what the string holds


def test_a_line_of_the_string_is_found_in_its_cell() -> None:
    # `x[0] = not_declared;` is line 4 of the string (it starts with a newline) and line 5 of the cell.
    assert SOURCE.splitlines()[3].strip() == "x[0] = not_declared;"
    assert cell_line(SOURCE, 4, [("[3]", KERNEL_CELL)]) == CellLine("[3]", 5)
    assert str(CellLine("[3]", 5)) == "line 5 of cell [3]"


def test_joined_sources_map_each_part_to_its_own_cell_and_the_newest_cell_wins() -> None:
    head_cell = 'HEAD = r"""\n#define BM 64\n"""\n'
    old_cell = 'BODY = r"""\n__global__ void k() {\n  oops;\n}\n"""\n'
    new_cell = '# fixed?\n' + old_cell
    source = '\n#define BM 64\n' + '\n__global__ void k() {\n  oops;\n}\n'
    cells = [("[9]", new_cell), ("[4]", old_cell), ("[2]", head_cell)]     # newest first
    assert cell_line(source, 2, cells) == CellLine("[2]", 2)                # #define BM 64
    assert cell_line(source, 5, cells) == CellLine("[9]", 4)                # oops; in the re-run cell
    assert cell_line(source, 99, cells) is None


def test_escaped_and_one_line_strings_are_not_used() -> None:
    cells = [("[1]", 'S = """\\nint x;\nint y;\n"""'), ("[2]", 'T = "int y;"')]
    assert cell_line("\\nint x;\nint y;\n", 2, cells) is None


def test_annotate_adds_the_cell_line_to_each_location() -> None:
    error = CompileError('kernel.cu:4:12: error: identifier "not_declared" is undefined\n'
                         '        x[0] = not_declared;', log="raw")
    out = annotate(error, SOURCE, "kernel.cu", cells=[("[3]", KERNEL_CELL)])
    assert str(out).startswith("kernel.cu:4:12 (line 5 of cell [3]): error:")
    assert out.log == "raw"
    assert annotate(error, SOURCE, "kernel.cu", cells=[]) is error


def test_compile_error_in_ipython_names_the_cell_line() -> None:
    """End to end: a real NVRTC error (a tiny raw CUDA kernel, well under a second) in an IPython shell."""
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        assert shell.run_cell(KERNEL_CELL, store_history=True).success
        cell_number = shell.execution_count - 1
        result = shell.run_cell('import gemmlab\n'
                                'gemmlab.compile(SRC, "broken", arch="sm_90a", cache=False)', store_history=True)
        error = result.error_in_exec
        assert isinstance(error, CompileError), error
        assert "kernel.cu:4:" in str(error) and f"(line 5 of cell [{cell_number}])" in str(error), str(error)
    finally:
        InteractiveShell.clear_instance()
