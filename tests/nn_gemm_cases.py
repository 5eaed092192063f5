"""GPU checks shared by the "nn" GEMM tests (C = alpha*A*B + beta*C) of notebooks 05 and 08."""
from __future__ import annotations

from typing import Any, Callable


def check_padded_rows(fn: Callable[..., Any], label: str, pad: int, M: int = 300, N: int = 257, K: int = 131) -> None:
    """``fn`` on operands whose rows are ``pad`` elements apart beyond their width (lda > K...):
    the result must be right and the padding of C untouched."""
    import torch

    A = torch.randn(M, K + pad, device="cuda").half()[:, :K]
    B = torch.randn(K, N + pad, device="cuda").half()[:, :N]
    Cbig = torch.randn(M, N + pad, device="cuda").half()
    C = Cbig[:, :N]
    ref = 0.5 * A.double() @ B.double() + 0.25 * C.double()
    outside = Cbig[:, N:].clone()
    fn(A, B, C, 0.5, 0.25)
    torch.cuda.synchronize()
    err = float((C.double() - ref).norm() / ref.norm())
    assert err < 1e-3, f"{label} pad={pad}: relative error {err:.2e}"
    assert torch.equal(Cbig[:, N:], outside), f"{label} pad={pad}: wrote into the padding"
