"""A tensor-core CuTe DSL GEMM: 3-stage cp.async pipeline, swizzled smem, ldmatrix, mma.sync.

D = A·Bᵀ ("tn"): A M×K, B N×K (K contiguous), D M×N row-major; fp16 or bf16 in, fp32
accumulate, D in fp16/bf16/fp32. Any M, N, K: every global load is predicated on the
problem bounds (elements outside are written to smem as zeros, so a partial K tile adds
nothing), and every store is predicated. The width of the global->smem copies follows the
alignment gemmlab compiled for: 16-byte cp.async when rows are 16-byte aligned (K a
multiple of 8), narrower copies otherwise, so odd K is correct too (just slower).

CTA tile 128×128×32, 4 warps in a 2×2 grid of m16n8k16 MMAs, 3 shared-memory stages.
"""
from __future__ import annotations

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute

BM, BN, BK = 128, 128, 32
STAGES = 3
WARPS_M, WARPS_N = 2, 2
THREADS = 32 * WARPS_M * WARPS_N


def _smem_layout(dtype, rows: int):
    """(rows, BK, STAGES) K-major; 8×32 atoms swizzled so ldmatrix rows hit distinct banks."""
    atom = cute.make_composed_layout(
        cute.make_swizzle(2, 3, 3), 0, cute.make_layout((8, BK), stride=(BK, 1))
    )
    return cute.tile_to_shape(atom, (rows, BK, STAGES), (0, 1, 2))


def _g2s_copy(dtype, align_bytes: int):
    """Tiled copy for a K-major (rows×BK) tile, vector width = the data's alignment.

    cp.async moves 4, 8 or 16 bytes; rows only 2-byte aligned (odd K) fall back to plain
    loads and stores, which the barrier at the top of each k-iteration orders just as well.
    """
    bits = min(128, align_bytes * 8)
    per_vec = bits // dtype.width
    threads_k = BK // per_vec
    op = cute.nvgpu.cpasync.CopyG2SOp() if bits >= 32 else cute.nvgpu.CopyUniversalOp()
    atom = cute.make_copy_atom(op, dtype, num_bits_per_copy=bits)
    thread_layout = cute.make_layout((THREADS // threads_k, threads_k), stride=(threads_k, 1))
    return cute.make_tiled_copy_tv(atom, thread_layout, cute.make_layout((1, per_vec)))


@cute.jit
def _load_tile(tiled_copy: cute.TiledCopy, tXgX: cute.Tensor, tXsX: cute.Tensor, tXcX: cute.Tensor,
               extent: cute.Shape, tile: cutlass.Int32, stage: cutlass.Int32):
    """One k-tile of one operand, global -> shared: in-bounds vectors by cp.async, the rest
    as zeros (stale smem from an earlier tile would otherwise leak into a partial K tile).
    A vector never straddles the bound: its width divides the row pitch, hence K."""
    for i in cutlass.range(cute.size(tXsX, mode=[1]), unroll_full=True):
        for j in cutlass.range(cute.size(tXsX, mode=[2]), unroll_full=True):
            if cute.elem_less(tXcX[0, i, j, tile], extent):
                cute.copy(tiled_copy, tXgX[None, i, j, tile], tXsX[None, i, j, stage])
            else:
                tXsX[None, i, j, stage].fill(0)


@cute.kernel
def tensorop_kernel(
    mA: cute.Tensor,
    mB: cute.Tensor,
    mD: cute.Tensor,
    sA_layout: cute.ComposedLayout,
    sB_layout: cute.ComposedLayout,
    copy_A: cute.TiledCopy,
    copy_B: cute.TiledCopy,
    tiled_mma: cute.TiledMma,
):
    tidx, _, _ = cute.arch.thread_idx()
    bm, bn, _ = cute.arch.block_idx()
    tiler = (BM, BN, BK)
    coord = (bm, bn, None)

    # This CTA's tiles: gA (BM, BK, k_tiles), gB (BN, BK, k_tiles), gD (BM, BN), and the
    # matching coordinate tensors that say where each element sits in the full problem.
    gA = cute.local_tile(mA, tiler=tiler, coord=coord, proj=(1, None, 1))
    gB = cute.local_tile(mB, tiler=tiler, coord=coord, proj=(None, 1, 1))
    gD = cute.local_tile(mD, tiler=tiler, coord=coord, proj=(1, 1, None))
    cA = cute.local_tile(cute.make_identity_tensor(mA.shape), tiler=tiler, coord=coord, proj=(1, None, 1))
    cB = cute.local_tile(cute.make_identity_tensor(mB.shape), tiler=tiler, coord=coord, proj=(None, 1, 1))
    cD = cute.local_tile(cute.make_identity_tensor(mD.shape), tiler=tiler, coord=coord, proj=(1, 1, None))

    smem = cutlass.memory.SmemAllocator()
    sA = smem.allocate_tensor(mA.element_type, sA_layout, 16)
    sB = smem.allocate_tensor(mB.element_type, sB_layout, 16)

    thr_A = copy_A.get_slice(tidx)
    thr_B = copy_B.get_slice(tidx)
    tAgA, tAsA, tAcA = thr_A.partition_S(gA), thr_A.partition_D(sA), thr_A.partition_S(cA)
    tBgB, tBsB, tBcB = thr_B.partition_S(gB), thr_B.partition_D(sB), thr_B.partition_S(cB)
    k_tiles = cute.size(gA, mode=[2])

    # Prologue: STAGES-1 tiles in flight. One commit per step, even when there is no tile
    # left to load, keeps cp_async_wait_group's arithmetic the same in every iteration.
    for s in cutlass.range_constexpr(STAGES - 1):
        if s < k_tiles:
            _load_tile(copy_A, tAgA, tAsA, tAcA, mA.shape, s, s)
            _load_tile(copy_B, tBgB, tBsB, tBcB, mB.shape, s, s)
        cute.arch.cp_async_commit_group()

    # Register fragments and the ldmatrix copies that fill them from swizzled smem.
    thr_mma = tiled_mma.get_slice(tidx)
    tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sA)[None, None, None, 0])
    tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sB)[None, None, None, 0])
    tCgD = thr_mma.partition_C(gD)
    tCcD = thr_mma.partition_C(cD)
    acc = tiled_mma.make_fragment_C(tCgD)
    acc.fill(0.0)

    ldsm_A = cute.make_tiled_copy_A(
        cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4), mA.element_type), tiled_mma)
    ldsm_B = cute.make_tiled_copy_B(
        cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4), mB.element_type), tiled_mma)
    thr_ldsm_A = ldsm_A.get_slice(tidx)
    thr_ldsm_B = ldsm_B.get_slice(tidx)
    tXsA = thr_ldsm_A.partition_S(sA)
    tXrA = thr_ldsm_A.retile(tCrA)
    tXsB = thr_ldsm_B.partition_S(sB)
    tXrB = thr_ldsm_B.retile(tCrB)
    k_blocks = cute.size(tCrA, mode=[2])

    for t in range(k_tiles):
        # Tile t has landed (at most STAGES-2 younger groups still pending) and every
        # thread is done reading the stage the next load overwrites.
        cute.arch.cp_async_wait_group(STAGES - 2)
        cute.arch.sync_threads()
        nxt = t + STAGES - 1
        if nxt < k_tiles:
            _load_tile(copy_A, tAgA, tAsA, tAcA, mA.shape, nxt, nxt % STAGES)
            _load_tile(copy_B, tBgB, tBsB, tBcB, mB.shape, nxt, nxt % STAGES)
        cute.arch.cp_async_commit_group()

        stage = t % STAGES
        for kb in cutlass.range_constexpr(k_blocks):
            cute.copy(ldsm_A, tXsA[None, None, kb, stage], tXrA[None, None, kb])
            cute.copy(ldsm_B, tXsB[None, None, kb, stage], tXrB[None, None, kb])
            cute.gemm(tiled_mma, acc, tCrA[None, None, kb], tCrB[None, None, kb], acc)

    cute.arch.cp_async_wait_group(0)

    # Epilogue: convert and store each accumulator element that lies inside D.
    out = cute.make_fragment_like(acc, mD.element_type)
    out.store(acc.load().to(mD.element_type))
    for i in cutlass.range(cute.size(out), unroll_full=True):
        if cute.elem_less(tCcD[i], mD.shape):
            tCgD[i] = out[i]


@cute.jit
def gemm(mA: cute.Tensor, mB: cute.Tensor, mD: cute.Tensor, stream: cuda.CUstream):
    ab = mA.element_type
    sA_layout = _smem_layout(ab, BM)
    sB_layout = _smem_layout(ab, BN)
    copy_A = _g2s_copy(ab, min(mA.iterator.alignment, 16))
    copy_B = _g2s_copy(ab, min(mB.iterator.alignment, 16))
    mma = cute.make_tiled_mma(
        cute.nvgpu.warp.MmaF16BF16Op(ab, cutlass.Float32, (16, 8, 16)),
        cute.make_layout((WARPS_M, WARPS_N, 1)),
        permutation_mnk=(WARPS_M * 16, WARPS_N * 8 * 2, 16),
    )
    smem_bytes = cute.size_in_bytes(ab, sA_layout) + cute.size_in_bytes(ab, sB_layout)
    M, N = mD.shape
    tensorop_kernel(mA, mB, mD, sA_layout, sB_layout, copy_A, copy_B, mma).launch(
        grid=[cute.ceil_div(M, BM), cute.ceil_div(N, BN), 1],
        block=[THREADS, 1, 1],
        smem=smem_bytes,
        stream=stream,
    )
