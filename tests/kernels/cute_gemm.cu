// A compact CuTe GEMM used by gemmlab's tests and benchmarks.
//
//   D = A * B^T      A: M x K, B: N x K, D: M x N, all row-major (K contiguous for A and B)
//   fp16 in, fp32 accumulate, fp16 out. Correct for any M, N, K >= 1.
//
// Launch: grid = (ceil(M / 128), ceil(N / 128)), block = 128 threads, no dynamic smem.
//         (32 KiB of static shared memory.)
//
// Structure: each CTA owns a 128x128 tile of D and walks K in steps of 64.
//   gmem -> smem: cp.async 16-byte copies with zero-fill for chunks outside the matrix, when
//                 K is a multiple of 8 and A, B are 16-byte aligned; otherwise a scalar,
//                 bounds-checked copy (row pitches of odd K are not 16-byte aligned).
//   smem layout : Swizzle<3,3,3> over 8x64 half atoms (rows of 128 bytes) so ldmatrix
//                 reads are free of bank conflicts.
//   smem -> reg : ldmatrix (SM75_U32x4_LDSM_N) retiled to the MMA fragments.
//   math        : SM80 16x8x16 mma.sync atoms, 2x2 warps, tile 32x32x16 per MMA step.
//   epilogue    : fp32 accumulators converted to fp16 and stored only where (m, n) is in D.
#include <cuda_fp16.h>
#include <cute/tensor.hpp>

using namespace cute;

__global__ void __launch_bounds__(128)
gemm(const half* A, const half* B, half* D, int M, int N, int K)
{
  using T = cute::half_t;
  constexpr int BM = 128, BN = 128, BK = 64;
  auto bM = Int<BM>{};
  auto bN = Int<BN>{};
  auto bK = Int<BK>{};

  // Whole matrices as CuTe tensors (row-major: K is the stride-1 mode of A and B).
  Tensor mA = make_tensor(make_gmem_ptr(reinterpret_cast<T const*>(A)), make_shape(M, K), make_stride(K, Int<1>{}));
  Tensor mB = make_tensor(make_gmem_ptr(reinterpret_cast<T const*>(B)), make_shape(N, K), make_stride(K, Int<1>{}));
  Tensor mD = make_tensor(make_gmem_ptr(reinterpret_cast<T*>(D)), make_shape(M, N), make_stride(N, Int<1>{}));

  // This CTA's tiles: (BM, BK, k_tiles), (BN, BK, k_tiles), (BM, BN).
  Tensor gA = local_tile(mA, make_shape(bM, bK), make_coord(blockIdx.x, _));
  Tensor gB = local_tile(mB, make_shape(bN, bK), make_coord(blockIdx.y, _));
  Tensor gD = local_tile(mD, make_shape(bM, bN), make_coord(blockIdx.x, blockIdx.y));
  // The same tiles of (m, k) coordinates, for predicates.
  Tensor cA = local_tile(make_identity_tensor(shape(mA)), make_shape(bM, bK), make_coord(blockIdx.x, _));
  Tensor cB = local_tile(make_identity_tensor(shape(mB)), make_shape(bN, bK), make_coord(blockIdx.y, _));
  Tensor cD = local_tile(make_identity_tensor(shape(mD)), make_shape(bM, bN), make_coord(blockIdx.x, blockIdx.y));

  // Shared memory: swizzled K-major tiles.
  auto smem_atom = composition(Swizzle<3, 3, 3>{}, Layout<Shape<_8, _64>, Stride<_64, _1>>{});
  auto sA_layout = tile_to_shape(smem_atom, make_shape(bM, bK));
  auto sB_layout = tile_to_shape(smem_atom, make_shape(bN, bK));
  __shared__ __align__(128) T smem_a[BM * BK];
  __shared__ __align__(128) T smem_b[BN * BK];
  Tensor sA = make_tensor(make_smem_ptr(smem_a), sA_layout);
  Tensor sB = make_tensor(make_smem_ptr(smem_b), sB_layout);

  // gmem -> smem: 16 x 8 threads, 8 halves (16 bytes) each per step.
  using G2S = Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, T>;
  auto g2s = make_tiled_copy(G2S{}, Layout<Shape<_16, _8>, Stride<_8, _1>>{}, Layout<Shape<_1, _8>>{});
  auto thr_g2s = g2s.get_slice(threadIdx.x);
  Tensor tAgA = thr_g2s.partition_S(gA);  // (CPY, CPY_M, CPY_K, k_tiles)
  Tensor tAcA = thr_g2s.partition_S(cA);
  Tensor tAsA = thr_g2s.partition_D(sA);  // (CPY, CPY_M, CPY_K)
  Tensor tBgB = thr_g2s.partition_S(gB);
  Tensor tBcB = thr_g2s.partition_S(cB);
  Tensor tBsB = thr_g2s.partition_D(sB);

  // MMA: 2x2 warps of 16x8x16 atoms, permuted to 32x32x16 per step.
  auto mma = make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{}, Layout<Shape<_2, _2, _1>>{}, Tile<_32, _32, _16>{});
  auto thr_mma = mma.get_slice(threadIdx.x);
  Tensor tCrA = thr_mma.partition_fragment_A(sA);  // (MMA, MMA_M, MMA_K)
  Tensor tCrB = thr_mma.partition_fragment_B(sB);  // (MMA, MMA_N, MMA_K)
  Tensor tCgD = thr_mma.partition_C(gD);           // (MMA, MMA_M, MMA_N)
  Tensor tCcD = thr_mma.partition_C(cD);
  Tensor tCrC = thr_mma.partition_fragment_C(gD);
  clear(tCrC);

  // smem -> registers with ldmatrix, laid out as the MMA wants its fragments.
  auto s2r_a = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, T>{}, mma);
  auto s2r_b = make_tiled_copy_B(Copy_Atom<SM75_U32x4_LDSM_N, T>{}, mma);
  auto thr_s2r_a = s2r_a.get_slice(threadIdx.x);
  auto thr_s2r_b = s2r_b.get_slice(threadIdx.x);
  Tensor tXsA = thr_s2r_a.partition_S(sA);
  Tensor tXrA = thr_s2r_a.retile_D(tCrA);
  Tensor tXsB = thr_s2r_b.partition_S(sB);
  Tensor tXrB = thr_s2r_b.retile_D(tCrB);

  // 16-byte copies need every row start 16-byte aligned: K % 8 == 0 and aligned bases.
  bool vectorized = (K % 8 == 0) &&
                    ((reinterpret_cast<uintptr_t>(A) | reinterpret_cast<uintptr_t>(B)) % 16 == 0);
  int k_tiles = (K + BK - 1) / BK;

  for (int kt = 0; kt < k_tiles; ++kt) {
    if (vectorized) {
      // Each 8-element chunk is entirely inside or outside K (K % 8 == 0): one predicate per chunk,
      // and zero-fill (src size 0) for chunks outside the matrix.
      CUTE_UNROLL
      for (int i = 0; i < size<1>(tAsA); ++i) {
        CUTE_UNROLL
        for (int j = 0; j < size<2>(tAsA); ++j) {
          bool in = elem_less(tAcA(0, i, j, kt), shape(mA));
          auto src = tAgA(_, i, j, kt);  // zero-filled chunks still get a valid address
          copy(g2s.with(in), in ? src : make_tensor(mA.data(), src.layout()), tAsA(_, i, j));
        }
      }
      CUTE_UNROLL
      for (int i = 0; i < size<1>(tBsB); ++i) {
        CUTE_UNROLL
        for (int j = 0; j < size<2>(tBsB); ++j) {
          bool in = elem_less(tBcB(0, i, j, kt), shape(mB));
          auto src = tBgB(_, i, j, kt);
          copy(g2s.with(in), in ? src : make_tensor(mB.data(), src.layout()), tBsB(_, i, j));
        }
      }
      cp_async_fence();
      cp_async_wait<0>();
    } else {
      // Scalar path for odd K or unaligned pointers: consecutive threads read consecutive k.
      for (int idx = threadIdx.x; idx < BM * BK; idx += 128) {
        int m = idx / BK, k = idx % BK;
        int gm = blockIdx.x * BM + m, gn = blockIdx.y * BN + m, gk = kt * BK + k;
        sA(m, k) = (gm < M && gk < K) ? T(A[size_t(gm) * K + gk]) : T(0.0f);
        sB(m, k) = (gn < N && gk < K) ? T(B[size_t(gn) * K + gk]) : T(0.0f);
      }
    }
    __syncthreads();

    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tCrA); ++kb) {
      copy(s2r_a, tXsA(_, _, kb), tXrA(_, _, kb));
      copy(s2r_b, tXsB(_, _, kb), tXrB(_, _, kb));
      gemm(mma, tCrA(_, _, kb), tCrB(_, _, kb), tCrC);
    }
    __syncthreads();  // everyone is done reading smem before the next tile overwrites it
  }

  // Epilogue: convert and store only the elements inside D (edge tiles are partial).
  CUTE_UNROLL
  for (int i = 0; i < size(tCrC); ++i) {
    if (elem_less(tCcD(i), shape(mD))) {
      tCgD(i) = T(tCrC(i));
    }
  }
}
