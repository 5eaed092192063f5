"""Small CUDA kernels whose machine code the technique tests read: each compiles with NVRTC in about a second,
for any architecture, without a GPU."""
from __future__ import annotations

#: A copy loop through a two-slot ring: cp.async, commit, a wait (``WAIT``) and a barrier per trip; a store
#: after the loop (its epilogue). ``-DINNER`` adds a loop inside it the compiler keeps; ``-DCALL`` moves the
#: wait into a device function that is not inlined; ``-DNO_REFILL_BARRIER`` drops the barrier after the reads.
RING = r"""
#include <cuda_pipeline_primitives.h>
#ifndef WAIT
#define WAIT 0
#endif
__device__ __noinline__ void wait_for_copies() { __pipeline_wait_prior(WAIT); }

extern "C" __global__ void ring(const float4* src, float* dst, int n, int m)
{
    __shared__ float4 s[2][128];
    float total = 0.0f;
    for (int i = 0; i < n; ++i) {
        __pipeline_memcpy_async(&s[i & 1][threadIdx.x], src + i * 128 + threadIdx.x, 16);
        __pipeline_commit();
#ifdef CALL
        wait_for_copies();
#else
        __pipeline_wait_prior(WAIT);
#endif
        __syncthreads();
        float v = s[i & 1][(threadIdx.x + 1) % 128].x;
#ifdef INNER
#pragma unroll 1
        for (int j = 0; j < m; ++j) v = v * 0.5f + s[i & 1][j % 128].y;
#endif
        total += v;
#ifndef NO_REFILL_BARRIER
        __syncthreads();
#endif
    }
    if (threadIdx.x < 128) dst[blockIdx.x * 128 + threadIdx.x] = total;
}
"""

#: Waits on three mbarriers with parities written in inline PTX (sm_90a): bar[0] parity 1, bar[2] parity 0.
BARRIERS = r"""
extern "C" __global__ void bars(int* out)
{
    __shared__ __align__(8) unsigned long long bar[3];
    unsigned a0 = (unsigned)__cvta_generic_to_shared(&bar[0]);
    unsigned a2 = (unsigned)__cvta_generic_to_shared(&bar[2]);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(a0));
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(a2));
    }
    __syncthreads();
    asm volatile("{\n .reg .pred p;\n W0: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 1;\n @!p bra W0;\n}"
                 :: "r"(a0) : "memory");
    asm volatile("{\n .reg .pred p;\n W2: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n @!p bra W2;\n}"
                 :: "r"(a2) : "memory");
    out[threadIdx.x] = 1;
}
"""

#: One warp, one WMMA 16x16x16 tile loaded straight from global memory (two mma.sync m16n8k16 in SASS).
WMMA_TILE = r"""
#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void tile(const half* A, const half* B, float* D)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(a, A, 16);
    wmma::load_matrix_sync(b, B, 16);
    wmma::mma_sync(acc, a, b, acc);
    wmma::store_matrix_sync(D, acc, 16, wmma::mem_row_major);
}
"""

#: One mma.sync m16n8k16 in inline PTX on registers loaded from global memory: fp16 inputs, or bf16 with ``-DBF16``.
MMA_INPUTS = r"""
#ifdef BF16
#define INPUTS "bf16"
#else
#define INPUTS "f16"
#endif
extern "C" __global__ void one_mma(const unsigned* a, const unsigned* b, float* d)
{
    const unsigned t = threadIdx.x;
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." INPUTS "." INPUTS ".f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                 : "r"(a[t]), "r"(a[t + 32]), "r"(a[t + 64]), "r"(a[t + 96]), "r"(b[t]), "r"(b[t + 32]));
    d[4 * t] = c0; d[4 * t + 1] = c1; d[4 * t + 2] = c2; d[4 * t + 3] = c3;
}
"""
