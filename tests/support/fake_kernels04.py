"""Stand-ins for notebook 04's and 04b's compiled kernels and GPU, for CPU tests of their graded cells.

Why: which thread writes which element of D is checked on a GPU (gemmlab.checking.thread_shares launches the
kernel with fewer threads). Its logic, and the graded cell around it, are tested here on the CPU with
a fake launch that writes D by a TiledMMA's ownership, so a right permutation passes and an
interleaved one fails without a GPU. (What the kernels' machine code holds is read from real kernels:
tests/support/kernels04.py.)
"""
from __future__ import annotations

import types

import numpy as np


class FakeResult:
    """check_gemm's result as the graded cells read it."""

    def __init__(self, passed: bool) -> None:
        self.passed = passed

    def __str__(self) -> str:
        return "a stand-in for check_gemm's result"


def owner_map(tiled_mma) -> np.ndarray:
    """[M, N] array: the thread that computes each element of C in one step of ``tiled_mma`` (a gemmlab TiledMMA)."""
    import gemmlab.layout as L

    M, N, _ = tiled_mma.tile_mnk
    idx = L.layout_to_array(tiled_mma.tv_c).ravel(order="F")
    owner = np.empty(M * N, dtype=int)
    owner[idx] = np.arange(idx.size) % tiled_mma.num_threads
    return owner.reshape(N, M).T


def fake_kernel(owner: np.ndarray):
    """A launcher on CPU tensors: thread t writes (some value into) the elements of D with owner == t, when fewer
    than ``threads`` threads run."""
    import torch

    def launch(A, B, D, threads=int(owner.max()) + 1):
        D[torch.from_numpy(owner < threads)] = 0.25
    return launch


def gpu_world(nbh, passed: bool = True) -> dict:
    """Names that make a graded cell take its GPU branch on the CPU: GPU true, ``nbh.gpu_graded`` true, and a
    ``gemmlab.check_gemm`` that reports ``passed``."""
    proxy = types.SimpleNamespace(**{k: getattr(nbh, k) for k in dir(nbh) if not k.startswith("__")})
    proxy.gpu_graded = lambda points, what, pool=False: True
    result = FakeResult(passed)
    return {"GPU": True, "nbh": proxy, "gemmlab": types.SimpleNamespace(check_gemm=lambda *a, **k: result)}
