"""gemmlab.checking.cexpr evaluates integer C expressions with C's meaning, where Python's differs."""
from __future__ import annotations

import numpy as np
import pytest

from gemmlab.checking import cexpr
from gemmlab.errors import GemmlabError


@pytest.mark.parametrize("expr,want", [
    ("-7 / 2", -3), ("7 / -2", -3), ("-7 % 2", -1), ("7 % -2", 1), ("-1 % 32", -1),   # truncation toward zero
    ("-8 >> 1", -4), ("-1 >> 5", -1),                                                    # arithmetic right shift
    ("-1 & 31", 31), ("~0", -1), ("0x1f ^ 0b101", 26), ("3 << 2", 12),
    ("1 + 2 * 3 << 1", 14), ("1 | 2 ^ 3 & 6", 1 | (2 ^ (3 & 6))),                      # C's precedence
    ("2 - 3 - 4", -5), ("100 / 10 / 5", 2),                                               # left to right
])
def test_constant_expressions_have_c_values(expr: str, want: int) -> None:
    assert int(cexpr.evaluate(expr)) == want


def test_variables_broadcast_and_negative_modulo_differs_from_python() -> None:
    r, c = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    got = cexpr.evaluate("(r) * 32 + ((c) - (r)) % 32", r=r, c=c)
    assert got.shape == (32, 32) and got.dtype == np.int64
    assert got[1, 0] == 31 and (r * 32 + (c - r) % 32)[1, 0] == 63          # C's -1, Python's 31
    assert len(np.unique(got)) < 1024 and len(np.unique(r * 32 + (c - r) % 32)) == 1024
    assert np.array_equal(cexpr.evaluate("r ^ 1", r=np.arange(4), c=0), [1, 0, 3, 2])


@pytest.mark.parametrize("expr,match", [
    ("r // 2", "comment"), ("r ** 2", "not a C operator"), ("abs(r)", "not allowed"), ("r < c", "not allowed"),
    ("0o17", "not a C int literal"), ("1_000", "not a C int literal"), ("2.0 * r", "not allowed"),
    ("r @ c", "operator"), ("x + r", "'x'"), ("r +", "not an expression"), ("1 << 32", "shift count"),
    ("r >> -1", "shift count"), ("r / 0", "division by zero"), ("r % (c - c)", "division by zero"),
    ("2147483647 + r", "overflows"), ("65536 * 65536", "overflows"), ("4294967296", "does not fit"),
    ("True + r", "not allowed"),
])
def test_what_c_would_not_compute_is_refused(expr: str, match: str) -> None:
    with pytest.raises(cexpr.CExpressionError, match=match):
        cexpr.evaluate(expr, r=np.arange(1, 4), c=np.arange(3))


def test_a_non_string_is_refused_with_a_gemmlab_error() -> None:
    with pytest.raises(GemmlabError, match="string"):
        cexpr.evaluate(5, r=1)  # type: ignore[arg-type]


def test_min_and_max_are_cudas_device_functions_of_two_ints() -> None:
    assert np.array_equal(cexpr.evaluate("min(r, 2) + max(c - 1, 0)", r=np.arange(4), c=np.arange(4)), [0, 1, 3, 4])
    for expr in ("min(r)", "min(r, c, 1)"):
        with pytest.raises(cexpr.CExpressionError, match="takes 2 arguments"):
            cexpr.evaluate(expr, r=np.arange(3), c=np.arange(3))
    for expr in ("abs(r)", "r.min()"):
        with pytest.raises(cexpr.CExpressionError, match="not allowed"):
            cexpr.evaluate(expr, r=np.arange(3), c=np.arange(3))


GROUPED = """
// a grouped tile order, as notebook 08 asks for it
__device__ int2 tile(int pid, int tiles_m, int tiles_n)
{
    const int per_band = GROUP_M * tiles_n, first_m = pid / per_band * GROUP_M;   /* two at once */
    int rows = min(tiles_m - first_m, GROUP_M);
    int in_band = pid;
    in_band %= per_band;
    return make_int2(first_m + in_band % rows, in_band / rows);
}
"""


def test_a_straight_line_function_is_evaluated_for_every_argument_at_once() -> None:
    from gemmlab.seeing import draw

    pid = np.arange(11 * 3)
    m, n = cexpr.evaluate_function(GROUPED, "tile", pid=pid, tiles_m=11, tiles_n=3, GROUP_M=4)
    order = draw.raster_order(11, 3, 4)
    assert [int(order[m[i], n[i]]) for i in pid] == list(pid)
    (one,) = cexpr.evaluate_function("int f(int a) { return -a / 2; }", "f", a=np.array([3, -3]))
    assert list(one) == [-1, 1]                                     # C's truncation, not Python's floor


@pytest.mark.parametrize("source,match", [
    ("int f(int a) { if (a > 1) { return 1; } return 0; }", "straight-line"),
    ("int f(int a) { int b = a > 1 ? 1 : 0; return b; }", "not an expression"),
    ("#define A 3\nint f(int a) { return a + A; }", "preprocessor"),
    ("int f(int a) { b = 3; return a; }", "not declared"),
    ("int f(int a) { const int b = 3; b += 1; return b; }", "const"),
    ("int f(int a) { return a; } int f(int a, int b) { return b; }", "defines it 2 time"),
    ("int g(int a) { return a; }", "defines it 0 time"),
    ("int f(float a) { return 1; }", "not an int"),
    ("int f(int a) { return a; a = 2; }", "last statement"),
    ("int f(int a) { a += 1 }", "does not end with ';'"),
    ("int f(int a) { a += 1; }", "no return"),
    ("int f(int a) { return make_int2(a); }", "two values"),
    ("int f(int a) { int2 t = make_int2(a, a); return t.x; }", "not a statement"),
    ("int f(int a) { return x; }", "'x'"),
    ('#include "order.h"\nint f(int a) { return a; }', "preprocessor"),   # a header could #define anything
    ("int f(int a) { int b = 1; int b = 2; return b; }", "declared twice"),
    ("int f(int a) { int a = 1; return a; }", "declared twice"),
    ("int f(const int a) { a += 1; return a; }", "const"),
    ("void f(int a, int& b) { b = a; }", "int& parameters"),
])
def test_what_is_not_straight_line_c_of_ints_is_refused_with_its_reason(source: str, match: str) -> None:
    with pytest.raises(cexpr.CExpressionError, match=match):
        cexpr.evaluate_function(source, "f", a=np.arange(3))


def test_the_function_reader_is_shared_with_cfunction_and_reads_qualified_min_and_max() -> None:
    source = ("__device__ __forceinline__ int2 f(int a) "
              "{ const int b = std::min(a, 2) + ::max(a, 0); return make_int2(b, cute::min(a, 1)); }")
    b, c = cexpr.evaluate_function(source, "f", a=np.array([-1, 1, 5]))
    assert b.tolist() == [-1, 2, 7] and c.tolist() == [-1, 1, 1]
    fn = cexpr.definition(source, "f")
    assert fn.inputs == ("a",) and not fn.outputs and not fn.is_void


def test_a_missing_parameter_and_a_non_string_are_refused() -> None:
    with pytest.raises(cexpr.CExpressionError, match="no value given for f's parameter"):
        cexpr.evaluate_function("int f(int a, int b) { return a + b; }", "f", a=1)
    with pytest.raises(GemmlabError, match="string"):
        cexpr.evaluate_function(None, "f", a=1)  # type: ignore[arg-type]

def test_named_functions_are_called_only_when_given_and_with_their_arity() -> None:
    got = cexpr.evaluate("min(r - 3, 2) * 2", functions={"min": np.minimum}, r=np.arange(6))
    assert got.tolist() == [-6, -4, -2, 0, 2, 4]
    with pytest.raises(cexpr.CExpressionError, match="takes 2 arguments"):
        cexpr.evaluate("min(r)", functions={"min": np.minimum}, r=1)
    with pytest.raises(cexpr.CExpressionError, match="not allowed"):
        cexpr.evaluate("abs(r)", r=1)
    assert cexpr.evaluate("abs(r - 3)", functions={"abs": np.absolute}, r=np.arange(5)).tolist() == [3, 2, 1, 0, 1]
