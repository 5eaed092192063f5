"""Two checks on small CUDA kernels (NVRTC, about a second each, no GPU): where a thread's stores fall within the rows
it writes (``stores_per_row``: notebook 04's permutations, seen from the column offsets of each store from the
thread's row base), and how many instructions of a kind a main loop issues per MMA (``instructions(per_mma=)``:
04b's ldmatrix loads, a ratio that unrolling does not change)."""
from __future__ import annotations

from functools import cache
from fractions import Fraction

import pytest

import gemmlab
from gemmlab import techniques as T
from gemmlab.techniques.rows import row_stores

#: Thread t of 256 writes rows t % 16 + 16·r (r < 4) of a row-major fp32 D, columns COL(t, j) (j < 4): with
#: ``-DSTRIDE=1`` four neighbouring columns 4·(t / 16) + j (04's permutation), with ``-DSTRIDE=16`` columns
#: t / 16 + 16·j (its integer tile). ``-DPITCH=64`` makes the row pitch a constant; otherwise it is a parameter.
ROWS = r"""
#ifndef STRIDE
#define STRIDE 1
#endif
extern "C" __global__ void rows(const float* src, float* D, int pitch)
{
#ifdef PITCH
    const int p = PITCH;
#else
    const int p = pitch;
#endif
    const int t = threadIdx.x;
    const float v = src[t];
    const int first = (STRIDE == 1) ? 4 * (t / 16) : t / 16;
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            D[(t % 16 + 16 * r) * p + first + STRIDE * j] = v * (r + 1) + j;
}
"""

#: A loop over k-tiles: a 16-byte copy per thread into shared memory, then ldmatrix.x4 for A and for B and two
#: mma.sync m16n8k16 (one ldmatrix per MMA); ``-DTWICE`` loads B with two x4 where one holds both fragments.
LDSM = r"""
#include <cuda_fp16.h>
extern "C" __global__ void ldsm(const float4* src, float* D, int n)
{
    __shared__ __align__(16) half s[2 * 256];
    float c[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const unsigned lane = threadIdx.x;
    for (int i = 0; i < n; ++i) {
        reinterpret_cast<float4*>(s)[lane] = src[2 * 32 * i + lane];
        reinterpret_cast<float4*>(s)[32 + lane] = src[2 * 32 * i + 32 + lane];
        __syncthreads();
        unsigned a[4], b[4], b2[4];
        unsigned pa = (unsigned)__cvta_generic_to_shared(s + (lane % 16) * 16 + (lane / 16) * 8);
        unsigned pb = (unsigned)__cvta_generic_to_shared(s + 256 + (lane % 16) * 16 + (lane / 16) * 8);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(pa));
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(b[0]), "=r"(b[1]), "=r"(b[2]), "=r"(b[3]) : "r"(pb));
#ifdef TWICE
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(b2[0]), "=r"(b2[1]), "=r"(b2[2]), "=r"(b2[3]) : "r"(pb + 16));
#else
        b2[2] = b[2]; b2[3] = b[3];
#endif
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};" : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};" : "+f"(c[4]), "+f"(c[5]), "+f"(c[6]), "+f"(c[7])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b2[2]), "r"(b2[3]));
        __syncthreads();
    }
    for (int k = 0; k < 8; ++k) D[8 * lane + k] = c[k];
}
"""


@cache
def kernel(source: str, name: str, options: tuple[str, ...] = ()):
    return gemmlab.compile(source, name, arch="sm_80", options=options)


def finding(target, check: T.Check) -> T.Finding:
    (_, found), = T.check(target, [check]).findings
    return found


# ------------------------------------------------------------------ stores_per_row

@pytest.mark.parametrize("pitch", [(), ("-DPITCH=64",)], ids=["run-time pitch", "constant pitch"])
def test_neighbouring_columns_are_one_run_per_row_and_columns_16_apart_are_not(pitch: tuple[str, ...]) -> None:
    runs = kernel(ROWS, "rows", ("-DSTRIDE=1", *pitch))
    apart = kernel(ROWS, "rows", ("-DSTRIDE=16", *pitch))
    row_bytes = 256 if pitch else None
    assert finding(runs, T.stores_per_row(run=16, row_bytes=row_bytes)).passed
    assert finding(runs, T.stores_per_row(within=16, row_bytes=row_bytes)).passed
    wrong = finding(apart, T.stores_per_row(run=16, row_bytes=row_bytes))
    assert not wrong.passed and "byte offsets 0, 64, 128, 192 from the first" in wrong.message
    assert "not one run of 16 contiguous bytes" in wrong.message and wrong.evidence
    spread = finding(apart, T.stores_per_row(within=128, row_bytes=row_bytes))
    assert not spread.passed and "spread over 196 bytes of one row" in spread.message


def test_each_row_of_a_thread_is_found_once_with_its_column_offsets() -> None:
    for options, rows_expected in (((), 4), (("-DPITCH=64",), 4)):
        p = T.programs(kernel(ROWS, "rows", ("-DSTRIDE=16", *options)))[0]
        rows, unread = row_stores(p, row_bytes=256 if options else None)
        assert not unread and len(rows) == rows_expected
        assert {r.offsets for r in rows} == {(0, 64, 128, 192)} and {r.span for r in rows} == {196}
        assert not any(r.contiguous for r in rows)


def test_a_constant_pitch_without_row_bytes_reads_the_rows_as_one() -> None:
    """Rows 16 apart at a pitch of 256 bytes share one base: told apart only by row_bytes."""
    runs = kernel(ROWS, "rows", ("-DSTRIDE=1", "-DPITCH=64"))
    merged = finding(runs, T.stores_per_row(run=16))
    assert not merged.passed and "4096" in merged.message


def test_stores_per_row_refuses_what_it_cannot_check() -> None:
    with pytest.raises(ValueError, match="run= .* or within="):
        T.stores_per_row()
    with pytest.raises(ValueError, match="positive numbers of bytes"):
        T.stores_per_row(run=0)
    no_stores = finding(kernel(ROWS, "rows"), T.stores_per_row(run=16, space="shared"))
    assert not no_stores.passed and "found no stores to shared memory" in no_stores.message


# ------------------------------------------------------------------ instructions(per_mma=)

def test_ldmatrix_per_mma_holds_in_every_main_loop_and_a_redundant_load_is_counted() -> None:
    one_each = kernel(LDSM, "ldsm")
    assert len(T.programs(one_each)[0].main_loops) >= 1
    ok = finding(one_each, T.instructions("ldmatrix", per_mma=1, where="main_loop"))
    assert ok.passed, ok.message
    twice = finding(kernel(LDSM, "ldsm", ("-DTWICE",)), T.instructions("ldmatrix", per_mma=1, where="main_loop"))
    assert not twice.passed and "3 for every 2 MMAs, where 1 per MMA is expected" in twice.message
    half = finding(one_each, T.instructions("ldmatrix", per_mma=Fraction(1, 2), where="main_loop"))
    assert not half.passed and "1 for every 2 MMAs is expected" in half.message


def test_per_mma_needs_a_number_and_an_mma_to_count_against() -> None:
    with pytest.raises(ValueError, match="per_mma="):
        T.instructions("ldmatrix", per_mma="half")
    none = finding(kernel(ROWS, "rows"), T.instructions("store", per_mma=1))
    assert not none.passed and "no tensor-core instruction" in none.message
