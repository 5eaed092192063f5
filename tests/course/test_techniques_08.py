"""Notebook 08, the raw-CUDA ladder: technique checks on the machine code of rungs 2, 3 and 4 built from the
solution cells, and of wrong answers written as text edits of them: rung 2 computing straight from global memory
(no shared memory), rung 3 loading WMMA fragments from global memory, rung 4 with ``__pipeline_wait_prior(0)``
(a pipeline only with two stages, which the hidden test goes beyond), a commit only when a tile is loaded, and
hostile variants: the wait hidden in inline PTX, a pipelined loop that never runs beside the loop that works,
and a cp.async that never runs beside plain loads that do the copying."""
from __future__ import annotations

from functools import cache

import pytest

from gemmlab import techniques as T
from tests.support import techniques as S
from tests.support.notebook08 import ONE_SLOT_LOOP

pytestmark = pytest.mark.slow

ASSIGNMENT = "08_cuda_ladder"
COMMON = ["kernel:ladder_launch", "kernel:ladder_wmma_common"]


@cache
def built(tag: str, source: str | None = None, stages: int | None = None):
    ns = S.namespace(ASSIGNMENT, COMMON + [tag], {tag: source} if source else None)
    gemm = ns[tag.split(":", 1)[1]]
    if stages:
        gemm.configure(STAGES=stages)
    return gemm                      # a launcher with build(): the checks compile it (for sm_90a without a GPU)


def report(tag: str, checks: list[T.Check], source: str | None = None, stages: int | None = None) -> T.TechniqueReport:
    return T.check(built(tag, source, stages), checks, what=tag)


# ------------------------------------------------------------------ rung 2: shared-memory tiles

def test_rung_2_stages_through_shared_memory_and_its_twin_without_shared_memory_fails() -> None:
    assert report("kernel:ladder_smem", S.SMEM08).passed
    src = S.source(ASSIGNMENT, "kernel:ladder_smem")
    body = src[src.index("    // ### BEGIN SOLUTION"):src.index("    // ### END SOLUTION")]
    direct = S.edit(src, body, """    // ### BEGIN SOLUTION
    for (int k = 0; k < K; ++k)
        for (int i = 0; i < PER_THREAD; ++i) {
            int r = m0 + ty + i * ROWS, c = n0 + tx;
            if (r < M && c < N) acc[i] += __half2float(A[(size_t)r * lda + k]) * __half2float(B[(size_t)k * ldb + c]);
        }
""")
    failed = S.failures(report("kernel:ladder_smem", S.SMEM08, direct))
    assert "reads global memory straight into the computation" in failed["no_global_loads_outside_copies"]
    assert "no loads and stores through the registers from global to shared memory" in failed["copies"]


# ------------------------------------------------------------------ rung 3: WMMA

def test_rung_3_reads_its_fragments_from_shared_memory_and_its_twin_from_global_fails() -> None:
    assert report("kernel:ladder_wmma", S.WMMA08).passed
    src = S.source(ASSIGNMENT, "kernel:ladder_wmma")
    wrong = S.edit(src, "wmma::load_matrix_sync(a[i], &sA[(warp_m() * WM + 16 * i) * BK + kk], BK);",
                   "wmma::load_matrix_sync(a[i], &A[(size_t)(m0 + warp_m() * WM + 16 * i) * lda + k0 + kk], lda);")
    failed = S.failures(report("kernel:ladder_wmma", S.WMMA08, wrong))
    assert set(failed) == {"fragments_by", "no_global_loads_outside_copies"}, failed
    assert "the A fragments of your MMAs in your main loop come from global memory" in failed["fragments_by"]


# ------------------------------------------------------------------ rung 4: the cp.async ring

PIPE = "kernel:ladder_dbuf"
WAIT = "        __pipeline_wait_prior(STAGES - 2);               // my copies of tile kt have landed"


def pipe_checks(stages: int) -> list[T.Check]:
    return S.pipeline_checks(stages) + [T.fragments_by("ldmatrix", operands="AB", x=4)]


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_rung_4_is_a_pipeline_for_every_stage_count(stages: int) -> None:
    r = report(PIPE, pipe_checks(stages), stages=stages)
    assert r.passed, str(r)


def test_wait_prior_0_is_a_pipeline_with_two_stages_only() -> None:
    src = S.source(ASSIGNMENT, PIPE)
    wrong = S.edit(src, WAIT, "        __pipeline_wait_prior(0);")
    assert report(PIPE, pipe_checks(2), wrong, stages=2).passed        # 2 stages: wait_prior(STAGES - 2) is 0
    for stages in (3, 4):
        failed = S.failures(report(PIPE, pipe_checks(stages), wrong, stages=stages))
        assert set(failed) == {"waits_in_main_loop", "pipelined"}, failed
        assert f"where the ring keeps {stages - 1}" in failed["pipelined"]


def test_a_wait_written_in_inline_ptx_is_read_like_any_other() -> None:
    src = S.source(ASSIGNMENT, PIPE)
    hidden = S.edit(src, WAIT, '        asm volatile("cp.async.wait_group 0;\\n" ::: "memory");')
    failed = S.failures(report(PIPE, pipe_checks(3), hidden, stages=3))
    assert "cp.async.wait_group 0" in failed["waits_in_main_loop"]
    honest = S.edit(src, "                __pipeline_commit();\n", '                asm volatile("cp.async.commit_group;\\n" ::: "memory");\n')
    assert report(PIPE, pipe_checks(3), honest, stages=3).passed


def test_a_commit_only_when_a_tile_is_loaded_fails() -> None:
    src = S.source(ASSIGNMENT, PIPE)
    wrong = S.edit(src, """                if (next < k_tiles) load(sA + next % STAGES * A_SLOT, sB + next % STAGES * B_SLOT, next);
                __pipeline_commit();""", """                if (next < k_tiles) {
                    load(sA + next % STAGES * A_SLOT, sB + next % STAGES * B_SLOT, next);
                    __pipeline_commit();
                }""")
    failed = S.failures(report(PIPE, pipe_checks(3), wrong, stages=3))
    assert "commit no group of copies" in failed["commits_per_stage"]


def test_a_pipelined_loop_that_never_runs_beside_one_that_works_fails() -> None:
    """Every loop that holds MMAs must show the technique: a second loop cannot stand in for the one that works."""
    src = S.source(ASSIGNMENT, PIPE)
    start = src.index("    // ### BEGIN SOLUTION\n    for (int s = 0; s < STAGES - 1; ++s)")
    end = src.index("    // ### END SOLUTION", start)
    solution = src[start + len("    // ### BEGIN SOLUTION\n"):end]
    wrong = src[:start] + "    // ### BEGIN SOLUTION\n    if (k_tiles == 987654) {\n" + solution + "    } else {\n" + ONE_SLOT_LOOP + \
        "    }\n" + src[end:]
    program = T.programs(built(PIPE, wrong, 3))[0]
    assert len(program.main_loops) == 2
    failed = S.failures(report(PIPE, pipe_checks(3), wrong, stages=3))
    assert "pipelined" in failed and "waits_in_main_loop" in failed, failed


def test_a_cp_async_that_never_runs_beside_plain_loads_that_copy_fails() -> None:
    src = S.source(ASSIGNMENT, PIPE)
    copy = "        __pipeline_memcpy_async(sA + r * LDA_S + c, A + (size_t)(m0 + r) * lda + k0 + c, 16);"
    wrong = S.edit(src, copy, """        if (threadIdx.x > 100000) __pipeline_memcpy_async(sA + r * LDA_S + c, A + (size_t)(m0 + r) * lda + k0 + c, 16);
        else *reinterpret_cast<uint4*>(sA + r * LDA_S + c) = *reinterpret_cast<const uint4*>(A + (size_t)(m0 + r) * lda + k0 + c);""")
    failed = S.failures(report(PIPE, pipe_checks(3), wrong, stages=3))
    assert "not every copy from global to shared memory in your main loop is a 16-byte cp.async" in failed["copies"]
