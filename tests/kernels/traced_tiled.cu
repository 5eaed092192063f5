// A shared-memory tiled GEMM, D = A·Bᵀ ("tn", fp16 in, fp32 accumulate, fp16 out), with the timeline's marks:
// each k-tile's loads, the barriers around them and the multiply-adds are states of their own. Used by the
// timeline's tests and its overhead benchmark (benchmarks/timeline_overhead.py). One 16×16 tile per CTA of 256
// threads (8 warps); the marks sit where every thread of the CTA runs them.
#include <cuda_fp16.h>
#include <gemmlab_trace.h>

#define T 16

extern "C" __global__ void traced_tiled(const half* A, const half* B, half* D, int M, int N, int K)
{
  GEMMLAB_TRACE_BEGIN();
  __shared__ float sA[T][T + 1], sB[T][T + 1];
  int tx = threadIdx.x, ty = threadIdx.y;
  int m = blockIdx.y * T + ty, n = blockIdx.x * T + tx;
  float acc = 0.0f;
#pragma unroll 1
  for (int k0 = 0; k0 < K; k0 += T) {
    GEMMLAB_TRACE(LOAD);
    int ka = k0 + tx, kb = k0 + ty;
    sA[ty][tx] = (m < M && ka < K) ? __half2float(A[(size_t)m * K + ka]) : 0.0f;
    sB[ty][tx] = (blockIdx.x * T + ty < N && k0 + tx < K) ? __half2float(B[(size_t)(blockIdx.x * T + ty) * K + k0 + tx]) : 0.0f;
    GEMMLAB_TRACE(SYNC);
    __syncthreads();
    GEMMLAB_TRACE(MMA);
#pragma unroll
    for (int k = 0; k < T; ++k) acc += sA[ty][k] * sB[tx][k];
    GEMMLAB_TRACE(SYNC);
    __syncthreads();
    (void)kb;
  }
  GEMMLAB_TRACE(EPILOGUE);
  if (m < M && n < N) D[(size_t)m * N + n] = __float2half(acc);
  GEMMLAB_TRACE(DONE);
}
