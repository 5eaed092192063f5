// Planted bug: the store has no row predicate. Threads of the last row of blocks whose
// m >= M compute nothing (acc = 0) but still store, one row-block past the end of D.
// Launch like planted_naive.cu: block = (16, 16), grid = (ceil(N / 16), ceil(M / 16)).
#include <cuda_fp16.h>

extern "C" __global__ void gemm_oob(const half* A, const half* B, half* D, int M, int N, int K)
{
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  int m = blockIdx.y * blockDim.y + threadIdx.y;
  float acc = 0.0f;
  if (m < M && n < N)
    for (int k = 0; k < K; ++k)
      acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)n * K + k]);
  if (n < N)  // BUG: should be (m < M && n < N)
    D[(size_t)m * N + n] = __float2half(acc);
}
