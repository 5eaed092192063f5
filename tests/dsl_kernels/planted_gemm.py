"""The simple DSL GEMM with one planted bug each; check_gemm must catch every one.

They mirror the C++ planted kernels: a store past the output, elements never written,
and a result that is wrong only in partial (edge) tiles. None of them reads out of
bounds, so no bug can take the CUDA context down with it.
"""
from __future__ import annotations

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

TILE = 16


@cute.kernel
def oob_kernel(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor):
    tx, ty, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    m = by * TILE + ty
    n = bx * TILE + tx
    M, K = mA.shape
    N = mB.shape[0]
    acc = cutlass.Float32(0.0)
    if m < M and n < N:
        for k in range(K):
            acc += mA[m, k].to(cutlass.Float32) * mB[n, k].to(cutlass.Float32)
    # BUG: `n <= N` lets the thread just right of the last column store; on the last row
    # that is one element past the end of D.
    if m < M and n <= N:
        mD[m, n] = acc.to(mD.element_type)


@cute.jit
def gemm_oob(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor, stream: cuda.CUstream):
    M, N = mD.shape
    oob_kernel(mA, mB, mD).launch(
        grid=[cute.ceil_div(N, TILE), cute.ceil_div(M, TILE), 1], block=[TILE, TILE, 1], stream=stream
    )


@cute.kernel
def unwritten_kernel(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor):
    tx, ty, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    m = by * TILE + ty
    n = bx * TILE + tx
    M, K = mA.shape
    N = mB.shape[0]
    # BUG: off by one: the last column of D is never written.
    if m < M and n < N - 1:
        acc = cutlass.Float32(0.0)
        for k in range(K):
            acc += mA[m, k].to(cutlass.Float32) * mB[n, k].to(cutlass.Float32)
        mD[m, n] = acc.to(mD.element_type)


@cute.jit
def gemm_unwritten(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor, stream: cuda.CUstream):
    M, N = mD.shape
    unwritten_kernel(mA, mB, mD).launch(
        grid=[cute.ceil_div(N, TILE), cute.ceil_div(M, TILE), 1], block=[TILE, TILE, 1], stream=stream
    )


@cute.kernel
def edge_kernel(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor):
    tx, ty, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    gx, gy, _ = cute.arch.grid_dim()
    m = by * TILE + ty
    n = bx * TILE + tx
    M, K = mA.shape
    N = mB.shape[0]
    # BUG: CTAs in the last row or column of tiles drop the K remainder (K mod 8), as a
    # vectorised main loop without its scalar tail would; interior tiles are right.
    k_end = K
    if bx == gx - 1 or by == gy - 1:
        k_end = K - K % 8
    if m < M and n < N:
        acc = cutlass.Float32(0.0)
        for k in range(k_end):
            acc += mA[m, k].to(cutlass.Float32) * mB[n, k].to(cutlass.Float32)
        mD[m, n] = acc.to(mD.element_type)


@cute.jit
def gemm_edge(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor, stream: cuda.CUstream):
    M, N = mD.shape
    edge_kernel(mA, mB, mD).launch(
        grid=[cute.ceil_div(N, TILE), cute.ceil_div(M, TILE), 1], block=[TILE, TILE, 1], stream=stream
    )
