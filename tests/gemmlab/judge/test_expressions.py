"""The launch-geometry language: what it computes, and what it refuses (with the token named)."""
from __future__ import annotations

import pytest

from gemmlab.errors import GemmlabError
from gemmlab.judge import JudgeError
from gemmlab.judge.expressions import MAX_EXPRESSION_CHARS, cdiv, check_vocabulary, evaluate

NAMES = {"M": 1000, "N": 257, "K": 64, "BM": 128, "BN": 64}


@pytest.mark.parametrize("text, value", [
    ("cdiv(N, BN)", 5), ("cdiv(M, BM)", 8), ("M * N", 257000), ("(M + 127) // 128", 8), ("M % BM", 104),
    ("min(M, N)", 257), ("max(BM, BN) * 2", 256), ("-K + 65", 1), ("  42  ", 42), ("BM*BN*2 - 0", 16384),
])
def test_evaluates_the_small_vocabulary(text: str, value: int) -> None:
    assert evaluate(text, NAMES) == value


def test_an_int_is_an_expression_too() -> None:
    assert evaluate(7, NAMES) == 7


def test_cdiv_rounds_up() -> None:
    assert [cdiv(a, 16) for a in (1, 16, 17, 32)] == [1, 1, 2, 2]


@pytest.mark.parametrize("text, token", [
    ("__import__('os').system('true')", "__import__"),
    ("M.bit_length()", "M.bit_length"),
    ("M.__class__", "M.__class__"),
    ("open('/etc/passwd')", "open"),
    ("(lambda: 1)()", "lambda"),
    ("[M, N][0]", "[M, N][0]"),
    ("'M'", "'M'"),
    ("1.5 * M", "1.5"),
    ("True + M", "True"),
    ("M if N else K", "M if N else K"),
    ("M < N", "M < N"),
    ("~M", "~M"),
    ("max(M, N, key=abs)", "max(M, N, key=abs)"),
    ("cdiv(M)", "cdiv(M)"),
])
def test_refuses_anything_outside_the_vocabulary_naming_the_token(text: str, token: str) -> None:
    for check in (lambda: check_vocabulary(text, NAMES), lambda: evaluate(text, NAMES)):
        with pytest.raises(JudgeError) as info:
            check()
        assert token in str(info.value)
        assert "cdiv(a, b)" in str(info.value)  # says what is allowed


@pytest.mark.parametrize("text", ["2 ** 100", "M ** 2", "M << 3", "M / 2", "M & 1"])
def test_refuses_other_operators(text: str) -> None:
    with pytest.raises(JudgeError, match="not allowed"):
        check_vocabulary(text, NAMES)


def test_unknown_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(JudgeError, match=r"unknown name 'os'.*known names: BM, BN, K, M, N"):
        evaluate("os", NAMES)
    with pytest.raises(JudgeError, match="unknown name 'TILE'"):
        check_vocabulary("cdiv(N, TILE)", NAMES)


def test_huge_numbers_are_refused_literal_or_computed() -> None:
    with pytest.raises(JudgeError, match="2\\*\\*62"):
        check_vocabulary("9" * 30, NAMES)
    with pytest.raises(JudgeError, match="2\\*\\*62"):
        evaluate("M * M * M * M * M * M * M", NAMES)


def test_long_texts_and_non_strings_are_refused() -> None:
    with pytest.raises(JudgeError, match=f"at most {MAX_EXPRESSION_CHARS}"):
        evaluate("1+" * MAX_EXPRESSION_CHARS + "1", NAMES)
    with pytest.raises(JudgeError, match="string"):
        evaluate(["M"], NAMES)  # type: ignore[arg-type]
    with pytest.raises(JudgeError, match="not an expression"):
        evaluate("M N", NAMES)


def test_division_by_zero_is_a_judge_error_naming_the_part() -> None:
    with pytest.raises(JudgeError, match="divides by zero in 'M // \\(K - 64\\)'"):
        evaluate("M // (K - 64)", NAMES)
    with pytest.raises(JudgeError, match="tile size of zero"):
        evaluate("cdiv(M, K - 64)", NAMES)
    check_vocabulary("M // (K - 64)", NAMES)  # legal text: it depends on the sizes


def test_judge_errors_are_gemmlab_errors() -> None:
    assert issubclass(JudgeError, GemmlabError)
