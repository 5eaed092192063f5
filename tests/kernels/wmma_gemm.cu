// A plain CUDA C++ GEMM on tensor cores through WMMA (<mma.h>), used by gemmlab's tests.
//
//   D = A * B^T      A: M x K, B: N x K, D: M x N, all row-major; fp16 in, fp32 accumulate, fp16 out.
//   Correct for any M, N, K >= 1: tiles are staged through shared memory with bounds checks.
//
// Launch: grid = (ceil(M / 64), ceil(N / 64)), block = 128 threads (2 x 2 warps, 32 x 32 each).
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

constexpr int TM = 64, TN = 64, TK = 16;
constexpr int LDS = TK + 8;  // padded row of the staged tiles: a multiple of 8 halves, as WMMA requires
constexpr int LDC = TN + 4;  // padded row of the fp32 result tile: a multiple of 4 floats

__global__ void __launch_bounds__(128)
wmma_gemm(const half* A, const half* B, half* D, int M, int N, int K)
{
  __shared__ __align__(32) half sA[TM * LDS];
  __shared__ __align__(32) half sB[TN * LDS];
  __shared__ __align__(32) float sC[TM * LDC];

  const int warp = threadIdx.x / 32;
  const int wm = warp / 2, wn = warp % 2;
  const int m0 = blockIdx.x * TM, n0 = blockIdx.y * TN;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::fill_fragment(acc[i][j], 0.0f);

  for (int k0 = 0; k0 < K; k0 += TK) {
    for (int idx = threadIdx.x; idx < TM * TK; idx += blockDim.x) {
      int r = idx / TK, c = idx % TK, gk = k0 + c;
      sA[r * LDS + c] = (m0 + r < M && gk < K) ? A[size_t(m0 + r) * K + gk] : __float2half(0.0f);
      sB[r * LDS + c] = (n0 + r < N && gk < K) ? B[size_t(n0 + r) * K + gk] : __float2half(0.0f);
    }
    __syncthreads();

    // B^T (K x N) read column-major is exactly B (N x K) row-major: element (k, n) at n * LDS + k.
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a[2];
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b[2];
    for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(a[i], sA + (wm * 32 + i * 16) * LDS, LDS);
    for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], sB + (wn * 32 + j * 16) * LDS, LDS);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j)
        wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    __syncthreads();
  }

  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(sC + (wm * 32 + i * 16) * LDC + wn * 32 + j * 16, acc[i][j], LDC,
                              wmma::mem_row_major);
  __syncthreads();

  for (int idx = threadIdx.x; idx < TM * TN; idx += blockDim.x) {
    int r = idx / TN, c = idx % TN;
    if (m0 + r < M && n0 + c < N) D[size_t(m0 + r) * N + n0 + c] = __float2half(sC[r * LDC + c]);
  }
}
