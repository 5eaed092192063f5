"""Notebook 07: technique checks on the SASS of the solution kernels (sm_90a and sm_100a, compiled here without a
GPU) and of the wrong answers the issue lists, as text edits of the solution cells: Exercise 4 releasing a slot from
every thread; Exercise 6 releasing a slot without waiting for the wgmmas that read it; Exercise 7 without the
accumulate flag, with every MMA on k-block 0, with the commit from every lane or on the TMA's barrier, accumulating
from the first MMA; Exercises 8 and 9 with the wrong answers of tests/course/test_wrong_answers_07.py (waiting on the
wrong barrier or parity, committing per MMA, from every thread or to the accumulator's barrier every k-tile, reading
one TMEM chunk four times, freeing the wrong number of columns...). Where ptxas repairs a mistake itself (Exercise 2
without wgmma.fence or wait_group, Exercise 9 converting before tcgen05.wait::ld) the machine code is the solution's,
byte for byte: no check of it can fail, and the notebook says so."""
from __future__ import annotations

import re
from functools import cache

import pytest

from gemmlab import techniques as T
from tests.course.test_wrong_answers_07 import KLOOP_WRONG, TMEM_WRONG, answer
from tests.support import hopper07
from tests.support import techniques as S

pytestmark = pytest.mark.slow

# ------------------------------------------------------------------ Exercise 6: the warp-specialised kernel (sm_90a)

WAIT1 = "                warpgroup.wait_group(1)                   # the previous k-tile's wgmmas are done\n"


@cache
def ws(variant: str):
    import gemmlab

    src = S.source("07_hopper", "kernel:hopper_ws")
    src = {"solution": src, "no wait_group(1)": S.edit(src, WAIT1, ""),
           "wait_group(0)": S.edit(src, WAIT1, WAIT1.replace("(1)", "(0)"))}[variant]
    ns = S.namespace("07_hopper", ["kernel:hopper_common", "kernel:hopper_ws"], {"kernel:hopper_ws": src})
    return gemmlab.dsl.compile(ns["ws_jit"], *S.dsl_examples((1024, 512), (1024, 512), (1024, 1024)), arch="sm_90a")


def test_exercise_6_releases_a_slot_only_after_its_wgmmas() -> None:
    report = T.check(ws("solution"), S.WS07)
    assert report.passed, str(report)
    failed = S.failures(T.check(ws("no wait_group(1)"), S.WS07))
    assert set(failed) == {"releases_after_wgmma_wait"}, failed
    assert "releases a slot while up to" in failed["releases_after_wgmma_wait"]
    slow = S.failures(T.check(ws("wait_group(0)"), S.WS07))
    assert "only after every wgmma has finished" in slow["releases_after_wgmma_wait"], slow


# ------------------------------------------------------------------ Exercises 2 and 4: one tile, the ring (sm_90a)

ONE_TILE_WAITS = "    warpgroup.commit_group()\n    warpgroup.wait_group(0)\n"


@cache
def one_tile(variant: str):
    import gemmlab

    src = S.source("07_hopper", "kernel:hopper_one_tile")
    src = {"solution": src, "no wgmma.fence": S.edit(src, "    warpgroup.fence()\n", ""),
           "no commit_group, no wait_group": S.edit(src, ONE_TILE_WAITS, "")}[variant]
    ns = S.namespace("07_hopper", ["kernel:hopper_common", "kernel:hopper_one_tile"], {"kernel:hopper_one_tile": src})
    return gemmlab.dsl.compile(ns["one_tile_jit"], *S.dsl_examples((64, 64), (128, 64), (64, 128)), arch="sm_90a")


@pytest.mark.parametrize("variant", ["no wgmma.fence", "no commit_group, no wait_group"])
def test_exercise_2_ptxas_adds_a_missing_fence_or_wait_itself(variant: str) -> None:
    """What the notebook says the test cannot see: ptxas adds WARPGROUP.ARRIVE and WARPGROUP.DEPBAR where the
    accumulators need them, so these kernels' machine code is the solution's."""
    assert one_tile(variant).cubin == one_tile("solution").cubin


ELECTED = "        with cute.arch.elect_one():\n            cute.arch.mbarrier_arrive(empty + s)\n"


@cache
def pipelined(variant: str):
    import gemmlab

    src = S.source("07_hopper", "kernel:hopper_pipelined")
    arrive = "            cute.arch.mbarrier_arrive(empty + s)\n"
    src = {"solution": src, "every thread arrives": S.edit(src, ELECTED, arrive[4:]),
           "lane 0 arrives": S.edit(src, ELECTED, "        if cute.arch.lane_idx() == 0:\n" + arrive),
           "lane 3 arrives": S.edit(src, ELECTED, "        if tidx % 32 == 3:\n" + arrive),
           "lanes 0 and 1 arrive": S.edit(src, ELECTED, "        if tidx % 32 < 2:\n" + arrive)}[variant]
    ns = S.namespace("07_hopper", ["kernel:hopper_common", "kernel:hopper_pipelined"], {"kernel:hopper_pipelined": src})
    return gemmlab.dsl.compile(ns["pipelined_jit"], *S.dsl_examples((512, 256), (512, 256), (512, 512)), arch="sm_90a")


@pytest.mark.parametrize("variant, passes", [("solution", True), ("lane 0 arrives", True), ("lane 3 arrives", True),
                                             ("every thread arrives", False), ("lanes 0 and 1 arrive", False)])
def test_exercise_4_releases_a_slot_once_per_warp(variant: str, passes: bool) -> None:
    failed = S.failures(T.check(pipelined(variant), S.PIPE07))
    assert failed == {} if passes else set(failed) == {"arrives_once_per_warp"}, failed


# ------------------------------------------------------------------ Exercise 7: one Blackwell tile (sm_100a)

TILE_MMA = """        mma.set(tcgen05.Field.ACCUMULATE, False)
        for kb in cutlass.range_constexpr(cute.size(tCrA, mode=[2])):
            cute.gemm(mma, tAcc, tCrA[None, None, kb, 0], tCrB[None, None, kb, 0], tAcc)
            mma.set(tcgen05.Field.ACCUMULATE, True)
        with cute.arch.elect_one():
            tcgen05.commit(bars + 1)"""
TILE_WRONG = {
    "no accumulate flag": (TILE_MMA.replace("        mma.set(tcgen05.Field.ACCUMULATE, False)\n", "")
                           .replace("            mma.set(tcgen05.Field.ACCUMULATE, True)\n", ""),
                           "accumulates_after_first", "not set to a known value"),
    "every MMA on k-block 0": (TILE_MMA.replace("tCrA[None, None, kb, 0], tCrB[None, None, kb, 0]",
                                                "tCrA[None, None, 0, 0], tCrB[None, None, 0, 0]"),
                               "mma_per_k_block", "read the same A descriptor"),
    "commit from every lane": (TILE_MMA.replace("        with cute.arch.elect_one():\n            tcgen05.commit(bars + 1)",
                                                "        tcgen05.commit(bars + 1)"),
                               "commits_once_per_warp", "issued by every thread of the warp"),
    "accumulate from the first MMA": (TILE_MMA.replace("ACCUMULATE, False", "ACCUMULATE, True"),
                                      "accumulates_after_first", "your first tcgen05.mma accumulates"),
    "commit on the TMA's barrier": (TILE_MMA.replace("tcgen05.commit(bars + 1)", "tcgen05.commit(bars)"),
                                    "ring_waits", "no tcgen05.commit arrives on a barrier the epilogue waits on"),
}


@cache
def bw_tile(variant: str):
    import gemmlab

    src = S.source("07_hopper", "kernel:hopper_bw_tile")
    if variant != "solution":
        src = S.edit(src, TILE_MMA, TILE_WRONG[variant][0])
    ns = S.namespace("07_hopper", ["kernel:hopper_common", "kernel:hopper_bw_tile"], {"kernel:hopper_bw_tile": src})
    return gemmlab.dsl.compile(ns["bw_tile_jit"], *S.dsl_examples((128, 64), (128, 64), (128, 128)), arch="sm_100a")


def test_exercise_7_solution_passes() -> None:
    report = T.check(bw_tile("solution"), S.BW_TILE07)
    assert report.passed, str(report)


@pytest.mark.parametrize("variant", TILE_WRONG)
def test_exercise_7_wrong_answers_fail(variant: str) -> None:
    _, check, phrase = TILE_WRONG[variant]
    failed = S.failures(T.check(bw_tile(variant), S.BW_TILE07))
    assert check in failed and phrase in failed[check], failed


# ------------------------------------------------------------------ Exercises 8 and 9: the Blackwell GEMM (sm_100a)

@cache
def bw_gemm(replace: tuple[tuple[str, str], ...] = ()):
    ns = hopper07.blackwell_namespace(dict(replace))
    return ns["bw_gemm_built"], ns["BW_STAGES"], ns["BW_TEST_K_TILES"]


def _checked(replace: tuple[tuple[str, str], ...] = ()) -> dict[str, str]:
    kernel, stages, k_tiles = bw_gemm(replace)
    return S.failures(T.check(kernel, S.bw_gemm07(stages, k_tiles)))


def test_exercises_8_and_9_solution_passes() -> None:
    assert _checked() == {}


#: The check (and a phrase of its message) each wrong K loop fails. "two slots hard-coded" is right for the
#: notebook's two stages: the hidden test varies the stage count (below).
KLOOP_CHECKS = {
    "no commit releases the slot": ("ring_waits", "the commit goes to a barrier the producer does not wait on"),
    "parity never changes": ("ring_waits", "k-tile 2 waits on its slot's barrier with parity 0"),
    "parity of t, not of the round": ("ring_waits", "k-tile 1 waits on its slot's barrier with parity 1"),
    "producer's parity": ("ring_waits", "k-tile 0 waits on its slot's barrier with parity 1"),
    "a commit per MMA": ("mma_per_k_block", "issues 1 tcgen05.mma"),
    "commit by all 32 threads": ("commits_once_per_warp", "issued by every thread of the warp"),
    "acc_full never committed": ("ring_waits", "no tcgen05.commit arrives on a barrier the epilogue waits on"),
    "acc_full committed every k-tile": ("ring_waits", "already commits to the barrier the epilogue waits on"),
}


@pytest.mark.parametrize("why", KLOOP_CHECKS)
def test_exercise_8_wrong_k_loops_fail(why: str) -> None:
    check, phrase = KLOOP_CHECKS[why]
    failed = _checked((("hopper_bw_kloop", answer("hopper_bw_kloop", KLOOP_WRONG[why])),))
    assert check in failed and phrase in failed[check], failed


def test_exercise_8_waiting_on_empty_or_always_on_full_0_fails() -> None:
    """The cases the PTX event list could not tell apart: which barrier is waited on."""
    from tests.course.test_wrong_answers_07 import kloop_answer

    on_empty = _checked((("hopper_bw_kloop", answer("hopper_bw_kloop", kloop_answer().replace(
        "cute.arch.mbarrier_wait(full + s,", "cute.arch.mbarrier_wait(empty + s,"))),))
    assert "the barrier that frees a slot for the producer" in on_empty["ring_waits"], on_empty
    on_full0 = _checked((("hopper_bw_kloop", answer("hopper_bw_kloop", kloop_answer().replace(
        "cute.arch.mbarrier_wait(full + s,", "cute.arch.mbarrier_wait(full,"))),))
    assert "the barrier of another slot" in on_full0["ring_waits"], on_full0


def test_exercise_8_two_slots_hard_coded_fails_with_three_stages() -> None:
    from tests.course.test_wrong_answers_07 import kloop_answer

    src = S.source("07_hopper", "kernel:hopper_bw_gemm")   # only to be sure the cell is there
    assert "BW_STAGES" in src
    three = answer("hopper_bw_kloop", kloop_answer(slot="t % 2", parity="(t // 2) % 2")).replace("BW_STAGES = 2", "BW_STAGES = 3")
    right = answer("hopper_bw_kloop", kloop_answer()).replace("BW_STAGES = 2", "BW_STAGES = 3")
    assert _checked((("hopper_bw_kloop", right),)) == {}
    failed = _checked((("hopper_bw_kloop", three),))
    assert "ring_waits" in failed, failed


TMEM_CHECKS = {
    "too few columns": ("tmem_allocated", "tcgen05.alloc of 64 columns"),
    "no dealloc": ("tmem_allocated", "never freed"),
    "dealloc of a different count": ("tmem_allocated", "frees 256 columns where tcgen05.alloc took 128"),
    "no relinquish": ("tmem_allocated", "relinquish_alloc_permit must come before"),
    "relinquish after the dealloc": ("tmem_allocated", "relinquish_alloc_permit must come before"),
    "no wait::ld": ("tmem_read_out", "no tcgen05.wait::ld after it"),
    "only the first chunk": ("tmem_read_out", "1 tcgen05.ld where the accumulator row has 4 chunks"),
    "loaded, never stored": ("tmem_read_out", "never read out of tensor memory"),
}


@pytest.mark.parametrize("why", TMEM_CHECKS)
def test_exercise_9_wrong_read_outs_fail(why: str) -> None:
    check, phrase = TMEM_CHECKS[why]
    failed = _checked((("hopper_bw_tmem", answer("hopper_bw_tmem", *TMEM_WRONG[why])),))
    assert check in failed and phrase in failed[check], failed


TMEM_LOOP = """        cute.copy(t2r, tTt[None, None, i], r32)
        cute.arch.fence_view_async_tmem_load()
        r16.store(r32.load().to(tCgD.element_type))"""


def test_exercise_9_one_chunk_read_four_times_fails() -> None:
    src = hopper07.solution_part("hopper_bw_tmem")
    failed = _checked((("hopper_bw_tmem", S.edit(src, TMEM_LOOP, TMEM_LOOP.replace("tTt[None, None, i]",
                                                                                     "tTt[None, None, 0]"))),))
    assert "two tcgen05.ld read the same tensor-memory columns" in failed["tmem_read_out"], failed


def test_exercise_9_converting_before_the_wait_compiles_to_the_solutions_machine_code() -> None:
    """What SASS cannot see, and need not: ptxas makes the conversion wait for the load's registers, so the image is
    byte for byte the solution's (measured with ptxas 13.0 for sm_100a), and no check of it can fail."""
    src = hopper07.solution_part("hopper_bw_tmem")
    swapped = S.edit(src, TMEM_LOOP, re.sub(r"(\s+cute\.arch\.fence_view_async_tmem_load\(\))(\n\s+r16\.store\(.*\))",
                                            r"\2\1", TMEM_LOOP))
    assert swapped != src
    converted_first = bw_gemm((("hopper_bw_tmem", swapped),))[0]
    assert converted_first.cubin == bw_gemm()[0].cubin
