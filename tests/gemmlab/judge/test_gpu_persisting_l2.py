"""Persisting L2 through the judge, on a GPU: a judged timing leaves persisting L2 off (whatever the judge's
process had set before), a kernel that marks every load ``evict_last`` (the persisting hint device code can
give without the host) is timed no faster than its speed of light, and the judge's result says how it timed.
The CPU side (the reset, the refusal, a recorded launch with an access-policy window) is
tests/gemmlab/test_timings_cannot_be_bought.py."""
from __future__ import annotations

import pytest

from gemmlab.results import BenchResult
from gemmlab.judge import JudgeRequest, KernelSpec
from gemmlab.judge.client import judge

from .cases import BLOCK, GRID

pytestmark = [pytest.mark.gpu, pytest.mark.timing]

#: The naive product with every load of A and B marked evict_last through an L2 cache policy.
EVICT_LAST = r"""#include <cuda_fp16.h>
extern "C" __global__ void gemm_evict_last(const half* A, const half* B, half* D, int M, int N, int K)
{
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  unsigned long long policy;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  float acc = 0.f;
  for (int k = 0; k < K; ++k) {
    unsigned short a, b;
    asm volatile("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(a) : "l"(A + (size_t)row * K + k), "l"(policy));
    asm volatile("ld.global.L2::cache_hint.u16 %0, [%1], %2;" : "=h"(b) : "l"(B + (size_t)col * K + k), "l"(policy));
    acc += __half2float(__ushort_as_half(a)) * __half2float(__ushort_as_half(b));
  }
  D[(size_t)row * N + col] = __float2half(acc);
}
"""


def test_a_kernel_with_persisting_hints_is_timed_within_the_light_and_says_how() -> None:
    spec = KernelSpec(EVICT_LAST, "gemm_evict_last", "tn", GRID, BLOCK, constants={"T": 16})
    report = judge(JudgeRequest(spec, "bench", shape=(512, 512, 4096)), timeout_s=300)
    assert report.verdict == "passed", report.error
    timed = BenchResult.from_dict(report.bench)
    assert timed.method == "flushed" and timed.fill == "normal"
    assert timed.light_ms and timed.ms >= timed.light_ms, "floored at, and not refused below, the speed of light"
    assert timed.peak_tflops and timed.tflops < timed.peak_tflops


def test_a_judged_timing_leaves_persisting_l2_off(gpu) -> None:
    """In this process (as the judge's own): a persisting set-aside and a stream window set beforehand are gone
    after a timing, and the timing stands (the reset came before its rounds)."""
    import torch
    from cuda.bindings import driver as d

    import gemmlab
    from gemmlab.running import persisting_l2

    d.cuCtxSetLimit(d.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 16 << 20)
    stream = torch.cuda.Stream()
    value = d.CUstreamAttrValue()
    value.accessPolicyWindow.num_bytes = 1 << 20
    value.accessPolicyWindow.hitRatio = 1.0
    value.accessPolicyWindow.hitProp = d.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING
    value.accessPolicyWindow.missProp = d.CUaccessProperty.CU_ACCESS_PROPERTY_STREAMING
    with torch.cuda.stream(stream):
        scratch = torch.empty(1 << 20, dtype=torch.uint8, device="cuda")
        value.accessPolicyWindow.base_ptr = scratch.data_ptr()
        d.cuStreamSetAttribute(d.CUstream(stream.cuda_stream), d.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                               value)
        assert persisting_l2.tampering(stream.cuda_stream)
        r = gemmlab.bench_gemm(lambda A, B, D: torch.matmul(A, B.T, out=D), shape=(1024, 1024, 1024), rounds=4)
        assert r.ratio > 0 and persisting_l2.tampering(stream.cuda_stream) == ""
