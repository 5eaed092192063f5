"""GPU checks shared by the "nn" GEMM tests (C = alpha*A*B + beta*C) of notebooks 05 and 08."""
from __future__ import annotations

from typing import Any, Callable

from gemmlab.notebook.nbhelpers import check_padded


def check_padded_rows(fn: Callable[..., Any], label: str, pad: int, M: int = 300, N: int = 257, K: int = 131) -> None:
    """``fn`` on operands whose rows are ``pad`` elements apart beyond their width (lda > K...):
    the result must be right and the padding of C untouched (the notebooks' own check)."""
    check_padded(fn, f"{label} pad={pad}", M, N, K, pad)
