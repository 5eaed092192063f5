"""gemmlab.cexpr evaluates integer C expressions with C's meaning, where Python's differs."""
from __future__ import annotations

import numpy as np
import pytest

from gemmlab import cexpr
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


def test_named_functions_are_called_only_when_given_and_with_their_arity() -> None:
    got = cexpr.evaluate("min(r - 3, 2) * 2", functions={"min": np.minimum}, r=np.arange(6))
    assert got.tolist() == [-6, -4, -2, 0, 2, 4]
    with pytest.raises(cexpr.CExpressionError, match="takes 2 arguments"):
        cexpr.evaluate("min(r)", functions={"min": np.minimum}, r=1)
    with pytest.raises(cexpr.CExpressionError, match="not allowed"):
        cexpr.evaluate("min(r, 1)", r=1)
