"""NVRTC logs mapped to the student's own lines: real compiles, plus the log parser on its own."""
from __future__ import annotations

import pytest

from gemmlab.compiling.compiler import compile_to
from gemmlab.compiling.diagnostics import Diagnostic, format_all, parse, short_header
from gemmlab.errors import CompileError

SYNTAX = """\
// line 1
__global__ void k(float* x) {
  int i = blockIdxx.x;
  x[i] = 1.0f
}
"""


def compile_error(source: str, name: str = "k", **kw) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_to(source, name, arch="sm_90a", use_cache=False, **kw)
    return info.value


def test_syntax_errors_point_at_the_students_lines() -> None:
    err = compile_error(SYNTAX)
    first, second = err.diagnostics
    assert (first.line, first.column, first.severity) == (3, 11, "error")
    assert first.message == 'identifier "blockIdxx" is undefined'
    assert first.source_line == "  int i = blockIdxx.x;"
    assert second.line == 5 and 'expected a ";"' in second.message
    text = str(err)
    assert text.startswith('kernel.cu:3:11: error: identifier "blockIdxx" is undefined\n    '
                           '  int i = blockIdxx.x;\n              ^')
    assert "Traceback" not in text and "/tmp" not in text and "site-packages" not in text
    assert "blockIdxx" in err.log and "2 errors detected" in err.log  # the raw log is kept


def test_program_name_is_the_given_filename() -> None:
    err = compile_error(SYNTAX, filename="cell7.cu")
    assert str(err).startswith("cell7.cu:3:11: error")


def test_too_many_errors_are_counted_not_listed() -> None:
    body = "\n".join(f"  int v{i} = undefined_{i};" for i in range(15))
    err = compile_error(f"__global__ void k() {{\n{body}\n}}\n")
    text = str(err)
    assert text.count(": error:") == 10
    assert "... and 5 more errors" in text
    assert len(err.diagnostics) == 15


def test_warnings_do_not_fail_and_are_mapped() -> None:
    compiled = compile_to("__global__ void k(float* x) {\n  int unused;\n  x[0] = 1.0f;\n}\n", "k",
                          arch="sm_90a", use_cache=False)
    assert compiled.log.startswith("kernel.cu:2:7: warning:")
    assert "unused" in compiled.log


CUTE_MISUSE = """\
#include <cute/tensor.hpp>
using namespace cute;

__global__ void k(float* x) {
  auto t = make_tensor(make_gmem_ptr(x), make_layout(make_shape(Int<4>{}, Int<8>{})));
  // a rank-2 tensor indexed with three coordinates
  auto r = t(1, 2, 3);
}
"""


@pytest.mark.slow
def test_error_inside_a_cute_header_is_traced_to_the_students_line() -> None:
    err = compile_error(CUTE_MISUSE)
    first = err.diagnostics[0]
    assert first.header is not None and first.header.startswith("cute/")
    assert first.line == 7 and first.source_line.strip() == "auto r = t(1, 2, 3);"
    text = str(err)
    assert text.startswith("kernel.cu:7: error: static assertion failed")
    assert "in a CuTe header cute/" in text and "instantiated from your line 7" in text
    assert "follow-on error" in text  # a dozen header errors folded into one entry
    assert "site-packages" not in text and "/include/" not in text


# The parser on a log in NVRTC's exact format (no compile), for the shapes a real compile may not produce.
LOG = """\
/opt/x/include/cute/stride.hpp(108): error: static assertion failed with "Mismatched Ranks"
        static_assert(tuple_size<Coord>::value == tuple_size< Shape>::value, "Mismatched Ranks");
        ^
          detected during:
            instantiation of "auto cute::crd2idx(...)" at line 171 of /opt/x/include/cute/layout.hpp
            instantiation of "auto cute::Layout::operator()" at line 4
            instantiation of "decltype(auto) cute::Tensor::operator()" at line 12 of kernel.cu

kernel.cu(3): warning #177-D: variable "y" was declared but never referenced
    int y;
        ^

/opt/x/include/cuda/std/__cccl/x.h(5): error: something deep, never reaching the user's code

kernel.cu(2): error: identifier "q" is undefined
    q = 1;
    ^

3 errors detected in the compilation of "kernel.cu".
"""


def test_parser_orders_own_errors_first_and_maps_prelude() -> None:
    source = "// prelude\n" * 2 + "\n".join(f"line {i}" for i in range(1, 20))
    diags = parse(LOG, "kernel.cu", source=source, prelude_lines=0, include_dirs=["/opt/x/include"])
    own = [d for d in diags if d.header is None]
    assert [d.line for d in own] == [3, 2]
    assert own[0].severity == "warning" and own[1].is_error
    cute, deep = [d for d in diags if d.header]
    assert cute.header == "cute/stride.hpp:108" and cute.line == 12
    assert deep.header == "cuda/std/__cccl/x.h:5" and deep.line == 0
    shifted = parse(LOG, "kernel.cu", prelude_lines=1)
    assert [d.line for d in shifted if d.header is None] == [2, 1]


def test_format_all_shows_errors_only_and_folds_header_errors() -> None:
    diags = [Diagnostic(12, 0, "error", "first", "auto r = t(1, 2, 3);", header="cute/a.hpp:1"),
             Diagnostic(12, 0, "error", "second", "auto r = t(1, 2, 3);", header="cute/b.hpp:2"),
             Diagnostic(3, 5, "warning", "unused", "int y;")]
    text = format_all(diags, "kernel.cu")
    assert "warning" not in text and "second" not in text
    assert "(+1 follow-on error inside headers from the same line)" in text


def test_short_header() -> None:
    assert short_header("/a/b/include/cute/x.hpp", ["/a/b/include"]) == "cute/x.hpp"
    assert short_header("/a/site-packages/nvidia/cu13/include/cccl/cuda/std/y.h") == "cuda/std/y.h"
