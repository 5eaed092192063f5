"""The data-path checks a copy kernel is held to (notebooks 01 and 02), on small CUDA kernels compiled here by
NVRTC (no GPU): a copy through shared memory judged on its copies alone when bookkeeping stores beside it are
uncoalesced (``coalesced(copies_only=True)``); a global → global copy, beside the shared path or instead of it,
named by ``no_global_loads_outside_copies``; and ``loads``/``stores`` counted (``count=``), with a loop the
compiler kept said so."""
from __future__ import annotations

from functools import cache

import pytest

import gemmlab
from gemmlab import techniques as T

#: One 16-byte vector per thread: cp.async into shared memory, commit, wait, barrier, then a 16-byte store of the
#: shared copy. ``who`` gets bookkeeping stores 256 bytes apart from lane to lane (uncoalesced on purpose), as a
#: test's who map may be. ``through_shared_and_direct`` also copies global → global straight.
THROUGH_SHARED = r"""
__device__ void shared_path(const int4* src, int4* dst, int* who)
{
    __shared__ int4 tile[128];
    const int i = blockIdx.x * 128 + threadIdx.x;
    unsigned s = (unsigned)__cvta_generic_to_shared(&tile[threadIdx.x]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s), "l"(src + i) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    __syncthreads();
    dst[i] = tile[threadIdx.x];
    if (who != nullptr)
        for (int k = 0; k < 4; ++k) who[i * 64 + k] = threadIdx.x;
}

extern "C" __global__ void through_shared(const int4* src, int4* dst, int* who) { shared_path(src, dst, who); }

extern "C" __global__ void through_shared_and_direct(const int4* src, int4* dst, int4* dst2, int* who)
{
    shared_path(src, dst, who);
    const int i = blockIdx.x * 128 + threadIdx.x;
    dst2[i] = src[i];
}
"""

#: Each thread copies UNROLL... its 4 floats 32 apart: 4 loads and 4 stores when unrolled, 1 of each when not.
PARTITION = r"""
extern "C" __global__ void partition(const float* src, float* dst)
{
    const int base = blockIdx.x * 128 + threadIdx.x;
#pragma unroll UNROLL
    for (int k = 0; k < 4; ++k) dst[base + 32 * k] = src[base + 32 * k];
}
"""


@cache
def kernel(source: str, name: str, options: tuple[str, ...] = ()) -> gemmlab.Kernel:
    return gemmlab.compile(source, name, arch="sm_80", options=options)


def failures(target, checks) -> dict[str, str]:
    return {f.check.split("(")[0]: f.message for _, f in T.check(target, checks).findings if not f.passed}


def test_a_copy_through_shared_memory_is_judged_on_its_copies_not_its_bookkeeping_stores() -> None:
    from gemmlab.techniques.datapath import warp_sectors

    copy = kernel(THROUGH_SHARED, "through_shared")
    p = T.programs(copy)[0]
    assert any(s.ins.opcode == "HFMA2.MMA" for s in p.sites), "ptxas writes the vector size 16 as an fp16 pair"
    assert [warp_sectors(p, s) for s in p.where("cp.async")] == [(16, 16)], "followed through that constant"
    failed = failures(copy, [T.coalesced()])
    assert "touch" in failed["coalesced"] and "(STG.E)" in failed["coalesced"], failed
    assert not failures(copy, [T.coalesced(copies_only=True), T.no_global_loads_outside_copies(where="anywhere"),
                               T.copies("global", "shared", by="cp.async", bytes=16, only=True),
                               T.copies("shared", "global", by="registers", bytes=16, only=True),
                               T.copies_land_before_reads(pending=0)])


def test_a_copy_straight_from_global_to_global_memory_is_named() -> None:
    both = kernel(THROUGH_SHARED, "through_shared_and_direct")
    failed = failures(both, [T.no_global_loads_outside_copies(where="anywhere"),
                             T.copies("shared", "global", by="registers", bytes=16, only=True)])
    assert list(failed) == ["no_global_loads_outside_copies"], failed
    assert "1 global loads (LDG.E.128, 16 bytes) are stored straight back to global memory" in \
        failed["no_global_loads_outside_copies"], failed


def test_copies_only_with_nothing_copied_through_shared_memory_says_so() -> None:
    direct = kernel(PARTITION.replace("UNROLL", ""), "partition")
    failed = failures(direct, [T.coalesced(copies_only=True)])
    assert "nothing is copied between global and shared memory" in failed["coalesced"], failed
    assert not failures(direct, [T.coalesced()])


def test_loads_and_stores_are_counted_and_a_loop_the_compiler_kept_is_named() -> None:
    unrolled = kernel(PARTITION.replace("UNROLL", ""), "partition")
    assert not failures(unrolled, [T.loads("global", bytes=4, count=4), T.stores("global", count=4),
                                   T.loads("local", count=0)])
    failed = failures(unrolled, [T.loads("global", count=8), T.stores("global", bytes=16, count=4)])
    assert "found 4 loads from global memory in your kernel (LDG.E) where 8 are expected" in failed["loads"], failed
    assert "found 0 16-byte stores to global memory" in failed["stores"], failed
    rolled = kernel(PARTITION.replace("UNROLL", "1"), "partition")
    failed = failures(rolled, [T.loads("global", count=4)])
    assert "found 1 loads" in failed["loads"] and "1 of them sits in a loop the compiler kept" in failed["loads"], failed


@pytest.mark.parametrize("make", [lambda: T.loads(count=-1), lambda: T.stores(count=2.5)])
def test_a_count_that_is_no_number_of_instructions_is_refused(make) -> None:
    with pytest.raises(ValueError, match="count= is a number of instructions"):
        make()


def test_the_first_missing_technique_is_on_the_first_line_of_the_error() -> None:
    """A grade report shows the first line of a failed test's error: it names what is missing, not only whose."""
    both = kernel(THROUGH_SHARED, "through_shared_and_direct")
    with pytest.raises(T.TechniqueError) as err:
        T.require(both, [T.no_global_loads_outside_copies(where="anywhere"), T.loads("global", count=0)],
                  what="the copy kernel")
    first, *rest = str(err.value).splitlines()
    assert first.startswith("the copy kernel: in your kernel, 1 global loads") and rest[0].startswith("- found 1 loads")
