"""Notebook 06, Exercise 2: the pipelined GEMM. The technique checks read the machine code of the kernel built
from the solution cells, and of the wrong answers a student writes (each a text edit of the solution): a wait
that leaves nothing in flight, an extra empty commit that makes a wait of 1 wait for everything, a dummy wait
with a large count before a wait 0, no wait at all, a commit only when a tile is loaded, k-blocks in a run-time
loop. The solution passes every check; each wrong answer fails the check that names its mistake."""
from __future__ import annotations

from functools import cache

import pytest

from gemmlab import techniques as T
from tests.support import techniques as S

pytestmark = pytest.mark.slow

ASSIGNMENT = "06_pipelining"
LOOP_WAIT = ("                cute.arch.cp_async_wait_group(STAGES - 2)\n"
             "                cute.arch.sync_threads()")
COMMIT = "                cute.arch.cp_async_commit_group()\n            cute.gemm("
STAGES = 3          # DSL_CONFIG's ring


def _dsl_variants() -> dict[str, str]:
    src = S.source(ASSIGNMENT, "kernel:gemm06_dsl")
    return {
        "solution": src,
        "wait 0 in the loop": S.edit(src, LOOP_WAIT, LOOP_WAIT.replace("STAGES - 2", "0")),
        "an extra empty commit before the wait": S.edit(src, LOOP_WAIT,
                                                       "                cute.arch.cp_async_commit_group()\n" + LOOP_WAIT),
        "a dummy wait 7 beside a wait 0": S.edit(src, LOOP_WAIT, "                cute.arch.cp_async_wait_group(7)\n"
                                                 + LOOP_WAIT.replace("STAGES - 2", "0")),
        "copies issued, never waited for": S.edit(src, LOOP_WAIT, "                cute.arch.sync_threads()"),
        "commit only when a tile is loaded": S.edit(src, COMMIT,
                                                    "                    cute.arch.cp_async_commit_group()\n"
                                                    "            cute.gemm("),
        "k-blocks in a run-time loop": S.edit(src, "for kb in cutlass.range_constexpr(KB):", "for kb in cutlass.range(KB):"),
    }


@cache
def dsl_report(variant: str) -> T.TechniqueReport:
    import gemmlab

    ns = S.namespace(ASSIGNMENT, ["kernel:gemm06_dsl"], {"kernel:gemm06_dsl": _dsl_variants()[variant]})
    kernel = gemmlab.dsl.compile(ns["gemm06_dsl_jit"], *S.dsl_examples((512, 256), (512, 256), (512, 512)),
                                 arch="sm_90a")
    return T.check(kernel, S.pipeline_checks(STAGES) + S.GEMM06, what="gemm06 (option B)")


def test_the_dsl_solution_has_every_technique() -> None:
    report = dsl_report("solution")
    assert report.passed, str(report)
    messages = {f.check.split("(")[0]: f.message for _, f in report.findings}
    assert "2 k-tiles of copies are in flight" in messages["pipelined"]


WRONG = {
    "wait 0 in the loop": {"waits_in_main_loop": "waits for every copy issued so far (cp.async.wait_group 0",
                           "pipelined": "at most 1 k-tile(s) of copies are in flight, where the ring keeps 2"},
    "an extra empty commit before the wait": {"waits_in_main_loop": "An extra commit with no copy makes an empty group",
                                             "commits_per_stage": "commits 2 groups of copies but waits 1 time"},
    "a dummy wait 7 beside a wait 0": {"waits_in_main_loop": "cp.async.wait_group 0",
                                       "pipelined": "at most 1 k-tile(s)"},
    "copies issued, never waited for": {"waits_in_main_loop": "never waits for its copies"},
    "commit only when a tile is loaded": {"commits_per_stage": "commit no group of copies"},
    "k-blocks in a run-time loop": {"fragments_by": "come from local memory (LDL"},
}


@pytest.mark.parametrize("variant", WRONG)
def test_each_wrong_dsl_answer_fails_the_check_that_names_its_mistake(variant: str) -> None:
    failed = S.failures(dsl_report(variant))
    for check, phrase in WRONG[variant].items():
        assert check in failed, f"{variant}: {check} passed; failures: {failed}"
        assert phrase in failed[check], f"{variant}: {check} said {failed[check]!r}"
    with pytest.raises(T.TechniqueError, match="gemm06 \\(option B\\)"):
        dsl_report(variant).raise_if_failed()


@cache
def cpp_kernel(source: str):
    import torch

    ns = S.namespace(ASSIGNMENT, ["kernel:gemm06_cpp"], {"kernel:gemm06_cpp": source})
    return ns["cpp_kernel"](torch.float16, 8, arch="sm_90a")[0]


def test_the_cpp_solution_and_its_wait_0_twin(monkeypatch) -> None:
    """One C++ wrong answer (a CuTe C++ compile takes a minute on two cores): the same checks, the same verdicts."""
    monkeypatch.setenv("GEMMLAB_COMPILE_TIMEOUT", "900")       # a busy machine must not fail the test
    src = S.source(ASSIGNMENT, "kernel:gemm06_cpp")
    checks = S.pipeline_checks(4) + S.GEMM06
    good = T.check(cpp_kernel(src), checks)
    assert good.passed, str(good)
    wrong = T.check(cpp_kernel(S.edit(src, "        cp_async_wait<STAGES - 2>();", "        cp_async_wait<0>();")), checks)
    failed = S.failures(wrong)
    assert set(failed) == {"waits_in_main_loop", "pipelined"}, failed
    assert "at most 1 k-tile(s) of copies are in flight, where the ring keeps 3" in failed["pipelined"]
