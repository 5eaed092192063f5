// A correct, deliberately simple GEMM used as the base of gemmlab's planted-bug tests.
//   D = A * B^T, A: M x K, B: N x K, D: M x N, row-major; fp16 in, fp32 accumulate, fp16 out.
// One thread per element of D. Launch: block = (16, 16), grid = (ceil(N / 16), ceil(M / 16)).
// (The "unwritten" test launches it with grid = (N / 16, ...) rounded down: the launcher's bug.)
#include <cuda_fp16.h>

extern "C" __global__ void gemm_naive(const half* A, const half* B, half* D, int M, int N, int K)
{
  int n = blockIdx.x * blockDim.x + threadIdx.x;
  int m = blockIdx.y * blockDim.y + threadIdx.y;
  if (m >= M || n >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k)
    acc += __half2float(A[(size_t)m * K + k]) * __half2float(B[(size_t)n * K + k]);
  D[(size_t)m * N + n] = __float2half(acc);
}
