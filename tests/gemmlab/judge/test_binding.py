"""Kernel parameters bound by name to the GEMM's operands; unknown or missing names refused."""
from __future__ import annotations

import pytest

from gemmlab.judge import JudgeError
from gemmlab.judge.binding import Operands, arguments, check_parameters
from gemmlab.compiling.signature import find_kernel


def params(declaration: str):
    decl = find_kernel(f"#include <cuda_fp16.h>\nextern \"C\" __global__ void k({declaration}) {{}}", "k")
    assert decl is not None
    return decl.params


OPS = Operands(A="A-tensor", B="B-tensor", out="out-tensor", M=100, N=200, K=300, alpha=2.0, beta=0.5)


def test_tn_binds_by_name_in_the_kernels_order() -> None:
    p = params("int K, const half* B, half* D, const half* A, int N, int M")
    assert arguments(p, "tn", OPS) == [300, "B-tensor", "out-tensor", "A-tensor", 200, 100]


def test_pitches_follow_the_convention() -> None:
    p = params("const half* A, const half* B, half* C, int lda, int ldb, int ldc")
    assert arguments(p, "tn", OPS) == ["A-tensor", "B-tensor", "out-tensor", 300, 300, 200]
    assert arguments(p, "nn", OPS) == ["A-tensor", "B-tensor", "out-tensor", 300, 200, 200]


def test_nn_binds_alpha_and_beta() -> None:
    p = params("const half* A, const half* B, half* C, int M, int N, int K, float alpha, float beta")
    assert arguments(p, "nn", OPS)[-2:] == [2.0, 0.5]


@pytest.mark.parametrize("declaration, convention, message", [
    ("const half* A, const half* B, half* D, int rows", "tn", "parameter 'rows'.*understands pointers A, B"),
    ("const half* A, const half* B, half* D, float alpha", "tn", "parameter 'alpha'"),
    ("const half* A, const half* B, half* D, int* M", "tn", "'M' is a pointer.*as a scalar"),
    ("const half* A, int B, half* D", "tn", "'B' is a scalar.*as a pointer"),
    ("const half* A, const half* B", "tn", "exactly one output pointer, named C or D; it has none"),
    ("const half* A, const half* B, half* C, half* D", "tn", "it has C, D"),
    ("const half* A, half* D, int M", "tn", "no parameter B"),
    ("const half* A, const half* B, half* D, int M, int M", "tn", "more than one parameter M"),
])
def test_parameters_the_judge_cannot_bind_are_refused(declaration: str, convention: str, message: str) -> None:
    with pytest.raises(JudgeError, match=message):
        check_parameters(params(declaration), convention)


def test_a_recorded_null_pointer_binds_to_none_and_only_to_a_pointer() -> None:
    """A launcher that passes None for a pointer (02's copy kernel without its who map) is recorded as ``null``."""
    from gemmlab.judge.binding import NULL, check_positional, check_value, positional_arguments

    p = params("const half* A, half* D, int* B, int M, int N")
    check_positional(p, ["A", "out", NULL, 64, 32])
    assert positional_arguments(["A", "out", NULL, 64, 32], OPS) == ["A-tensor", "out-tensor", None, 64, 32]
    assert check_value(NULL, 2) == NULL
    with pytest.raises(JudgeError, match="is a scalar"):
        check_positional(p, ["A", "out", "B", NULL, 32])
    with pytest.raises(JudgeError, match="operand argument is one of"):
        check_value("nil", 0)
