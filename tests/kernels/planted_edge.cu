// Planted bug: blocks whose 16 x 16 tile sticks out of D (the partial edge tiles) stop the
// K loop halfway, so exactly the edge tiles are wrong while every full tile is right.
// Launch like planted_naive.cu: block = (16, 16), grid = (ceil(N / 16), ceil(M / 16)).
#include <cuda_fp16.h>

extern "C" __global__ void gemm_edge(const half* A, const half* B, half* D, int M, int N, int K)
{
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  int m = blockIdx.y * blockDim.y + threadIdx.y;
  bool full_tile = (blockIdx.x + 1) * blockDim.x <= N && (blockIdx.y + 1) * blockDim.y <= M;
  int k_end = full_tile ? K : K / 2;  // BUG: the residue tiles skip half of K
  if (m >= M || n >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < k_end; ++k)
    acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)n * K + k]);
  D[(size_t)m * N + n] = __float2half(acc);
}
