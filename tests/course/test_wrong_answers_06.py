"""Notebook 06's graded CPU tests reject plausible wrong answers (and accept right ones).

Exercise 2 (the performance equation and the choice of tile and stages) runs its own cells with a wrong
answer in place of the solution; the graded test cell (visible and hidden tests) must fail, and the visible
part alone where marked. The pipelined kernel's tests read the kernel's machine code before their GPU parts
(gemmlab.techniques): a main loop that is no pipeline (a wait for everything, an extra empty commit, a dummy
wait beside a wait 0, no wait, a commit only when a tile is loaded, the next tiles' copies issued after the
MMAs, fragments through local memory) fails them on the CPU, in option B and, for one of them, option A. The
kernel's results are checked on a GPU (tests/course/test_gpu_pipelining.py).
"""
from __future__ import annotations

import re

import matplotlib
import pytest

from tests.support.graded_cells import cells_by_grade_id, python, run_cells, visible_part
from autograder.cell_metadata import grade_id, is_answer
from solution_cells import cell_folder

matplotlib.use("Agg")
NB = "06_pipelining"
PLAN_CELLS = ["setup", "register_budget", "tile_budget", "plan", "plan_checker", "test_plan"]
CHOOSE_CELLS = ["setup", "register_budget", "tile_budget", "plan", "plan_checker", "choose_config", "test_choose_config"]


def _solution(gid: str) -> str:
    return cells_by_grade_id(NB)[gid]


def _swap(gid: str, old: str, new: str) -> str:
    source = _solution(gid)
    assert source.count(old) == 1, (gid, old)
    return source.replace(old, new)


# (answer cell, name) -> (the wrong source, must the visible tests already fail it?)
WRONG = {
    ("plan", "ring alone, no room for the epilogue's tile"): (
        _swap("plan", "smem = max(STAGES * (BM + BN) * BK * 2, BM * BN * 2)", "smem = STAGES * (BM + BN) * BK * 2"), False),
    ("plan", "registers without addresses and loop state"): (
        _swap("plan", "registers_per_thread(BM, BN, WARPS_M, WARPS_N).values()) + 40",
              "registers_per_thread(BM, BN, WARPS_M, WARPS_N).values())"), True),
    ("plan", "CTAs per SM from the per-block limit"): (
        _swap("plan", 'per_sm = min(hw["smem_per_sm"] // smem,', 'per_sm = min(hw["smem_per_block"] // smem,'), False),
    ("plan", "stages from the MMA time alone"): (
        _swap("plan", '/ max(t_mma, t_load))\n', '/ t_mma)\n'), True),
    ("plan", "the ring never limits"): (
        _swap("plan", 't_tile = max(t_mma, t_load, (hw["latency_us"] + t_load) / (STAGES - 1))',
              "t_tile = max(t_mma, t_load)"), True),
    ("plan", "a wave takes one CTA's time"): (
        _swap("plan", "time_us=math.ceil(ctas / wave) * c * math.ceil(K / BK) * t_tile",
              "time_us=math.ceil(ctas / wave) * math.ceil(K / BK) * t_tile"), True),
    ("plan", "a full last wave counted as empty"): (
        _swap("plan", "last_wave_full=(ctas % wave or wave) / wave", "last_wave_full=(ctas % wave) / wave"), False),
    ("plan", "more than 255 registers still fit"): (
        _swap("plan", 'fits=smem <= hw["smem_per_block"] and regs <= 255 and per_sm >= 1',
              'fits=smem <= hw["smem_per_block"] and per_sm >= 1'), False),
    ("plan", "the H100's rates whatever the machine"): (
        _swap("plan", "def plan(BM, BN, BK, STAGES, WARPS_M, WARPS_N, M=4096, N=4096, K=4096, hw=H100):",
              "def plan(BM, BN, BK, STAGES, WARPS_M, WARPS_N, M=4096, N=4096, K=4096, hw=H100):\n    hw = H100"), False),
    ("plan", "shared memory in KB"): (
        _swap("plan", "return dict(smem_bytes=smem,", "return dict(smem_kb=smem / 1024,"), True),
    ("plan", "K ignored (4096 always)"): (
        _swap("plan", "math.ceil(K / BK)", "math.ceil(4096 / BK)"), True),

    ("choose_config", "the smaller BK among equals"): (
        _swap("choose_config", "options.append((p[\"time_us\"], -BK,", "options.append((p[\"time_us\"], BK,"), True),
    ("choose_config", "no tolerance: the smallest time wins"): (
        _swap("choose_config", "o[0] <= 1.01 * fastest", "o[0] <= fastest"), False),
    ("choose_config", "more stages among equals"): (
        _swap("choose_config", "-BK, stages, index,", "-BK, -stages, index,"), True),
    ("choose_config", "what does not fit counts too"): (
        _swap("choose_config", '            if p["fits"]:\n                options.append(',
              '            if True:\n                options.append('), True),
    ("choose_config", "least shared memory first"): (
        _swap("choose_config", "key=lambda o: o[1:4])[4]",
              "key=lambda o: (plan(*o[4][:3], o[4][3], *o[4][4:], M, N, K, hw)[\"smem_bytes\"], o[1:4]))[4]"), True),
    ("choose_config", "the tile with the fewest stages it needs"): (
        _swap("choose_config", 'if p["fits"]:', 'if p["fits"] and stages == max(2, min(8, p["stages_needed"])):'), False),
}


# ------------------------------------------------------------------ Exercise 1: the ring's schedule

SCHEDULE_CELLS = ["setup", "schedule_checker", "pipeline_schedule", "try_schedule", "test_pipeline_schedule"]
_NO_EMPTY_COMMITS = _swap("pipeline_schedule", """        if nxt < k_tiles:
            ops.append(("load", nxt, nxt % stages))
        ops.append(("commit",))""", """        if nxt < k_tiles:
            ops.append(("load", nxt, nxt % stages))
            ops.append(("commit",))""").replace("""        if s < k_tiles:
            ops.append(("load", s, s))
        ops.append(("commit",))""", """        if s < k_tiles:
            ops.append(("load", s, s))
            ops.append(("commit",))""")

#: name -> (the wrong schedule, what the visible test's message must say, what it must not say)
WRONG_SCHEDULES = {
    "no empty commits (the last tiles' groups stay pending)": (
        _NO_EMPTY_COMMITS, ["tile 7 is not known complete", "committed and waited on",
                            "wait_group n leaves the newest n groups pending",
                            "commit a (possibly empty) group in every iteration (section 2, step 2)"], "it needs a commit"),
    "a wait one too loose (empty commits kept)": (
        _swap("pipeline_schedule", 'ops.append(("wait", stages - 2))', 'ops.append(("wait", stages - 1))'),
        ["tile 0 is not known complete", "it needs a commit, then a wait_group that covers its group"],
        "possibly empty"),
}


def test_the_schedule_solution_passes() -> None:
    run_cells(NB, SCHEDULE_CELLS)


@pytest.mark.parametrize("visible", [True, False])
@pytest.mark.parametrize("name", sorted(WRONG_SCHEDULES))
def test_a_wrong_schedule_fails_with_its_cause(name: str, visible: bool) -> None:
    source, says, not_said = WRONG_SCHEDULES[name]
    replace = {"pipeline_schedule": source}
    if visible:
        replace["test_pipeline_schedule"] = visible_part(_solution("test_pipeline_schedule"))
    with pytest.raises(AssertionError) as failure:
        run_cells(NB, SCHEDULE_CELLS, replace=replace)
    message = str(failure.value)
    for words in says:
        assert words in message, message
    assert not_said not in message, message


@pytest.mark.parametrize("exercise", ["plan", "choose_config"])
def test_solution_passes_its_tests(exercise: str) -> None:
    run_cells(NB, PLAN_CELLS if exercise == "plan" else CHOOSE_CELLS)


@pytest.mark.parametrize("exercise, name", sorted(WRONG))
def test_wrong_answer_fails(exercise: str, name: str) -> None:
    source, visible_too = WRONG[exercise, name]
    cells = PLAN_CELLS if exercise == "plan" else CHOOSE_CELLS
    test = cells[-1]
    with pytest.raises(AssertionError):
        run_cells(NB, cells, replace={exercise: source})
    if visible_too:
        with pytest.raises(AssertionError):
            run_cells(NB, cells, replace={exercise: source, test: visible_part(_solution(test))})


#: a wrong plan with the right choose_config -> what Exercise 2 (b)'s visible test must say (it names plan, not the rule).
WRONG_PLAN_UNDER_CHOICE = {
    "waves rounded down": (
        _swap("plan", "time_us=math.ceil(ctas / wave) * c", "time_us=(ctas // wave) * c"),
        ["plan is wrong", "Fix plan (Exercise 2 (a)) first", "time_us"]),
    "the H100's rates whatever the machine (plan's visible cases pass)": (
        WRONG["plan", "the H100's rates whatever the machine"][0],
        ["on another machine", "Your plan says (plan(", "if plan is right on this problem and machine"]),
}


@pytest.mark.parametrize("name", sorted(WRONG_PLAN_UNDER_CHOICE))
def test_a_wrong_plan_is_blamed_in_the_choice_test(name: str) -> None:
    source, says = WRONG_PLAN_UNDER_CHOICE[name]
    test = "test_choose_config"
    with pytest.raises(AssertionError) as failure:
        run_cells(NB, CHOOSE_CELLS, replace={"plan": source, test: visible_part(_solution(test))})
    for words in says:
        assert words in str(failure.value), str(failure.value)


def test_the_reference_is_not_in_the_students_notebook() -> None:
    """The tests' own equation and choice live in their hidden parts: the student's notebook cannot call them."""
    import nbformat

    from tests.support import ROOT

    release = nbformat.read(ROOT / "course" / NB / f"{NB}.ipynb", as_version=4)
    text = "\n".join(c.source for c in release.cells)
    assert "_ref_plan" not in text and "_ref_choice" not in text
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells
               if is_answer(c)}
    for gid in ("plan", "choose_config"):
        assert "raise NotImplementedError()" in answers[gid] and "math.ceil" not in answers[gid]
    for gid in ("tile_budget", "plan_checker", "plan_table"):          # no given cell computes the equation
        given = next(c.source for c in release.cells if grade_id(c) == gid)
        assert "t_mma" not in given and "latency_us\"] +" not in given


@pytest.mark.parametrize("test", ["test_plan", "test_choose_config"])
def test_the_release_scores_nothing(test: str) -> None:
    import nbformat

    from tests.support import ROOT

    release = nbformat.read(ROOT / "course" / NB / f"{NB}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in release.cells
               if is_answer(c)}
    cells = PLAN_CELLS if test == "test_plan" else CHOOSE_CELLS
    with pytest.raises(Exception, match="not written yet"):
        run_cells(NB, cells, replace={g: answers[g] for g in ("plan", "choose_config") if g in cells})


# ------------------------------------------------------------------ the kernel's machine code, read before the GPU part

KERNEL_CELLS = ["setup", "gemm06_dsl_copies", "gemm06_dsl", "gemm06_dsl_launch", "build_dsl", "gemm_helpers"]
KERNEL_TESTS = ["test_pipeline_kernel_slow", "test_performance_bar_slow"]


def _run_kernel_test(replace: dict[str, str] | None = None, tests: list[str] = KERNEL_TESTS,
                     cells: list[str] = KERNEL_CELLS, start: dict | None = None) -> dict:
    """Exercise 3's tests with option B only (option A left alone), each cell run from a file."""
    source = cells_by_grade_id(NB)
    folder = cell_folder("06-kernel")
    ns: dict = {"__name__": "notebook_06", "cpp_gemm": None, **(start or {})}
    for gid in cells + tests:
        text = python((replace or {}).get(gid, source[gid]))
        path = folder / f"{gid}.py"
        path.write_text(text)
        exec(compile(text, str(path), "exec"), ns)
    return ns


@pytest.mark.slow
def test_the_dsl_solution_passes_the_machine_code_checks(no_gpu, capsys) -> None:
    ns = _run_kernel_test()
    assert ns["dsl_gemm"] is not None
    assert "keeps STAGES - 1 k-tiles of 16-byte cp.async copies in flight" in capsys.readouterr().out


LOOP_WAIT = ("                cute.arch.cp_async_wait_group(STAGES - 2)\n"
             "                cute.arch.sync_threads()")
ISSUE = """            if kb == 0:
                nxt = t + STAGES - 1
                if nxt < k_tiles:
                    if fast_rows & (nxt < full_k):
                        cute.copy(copy_A, tAgA[None, None, None, nxt], tAsA[None, None, None, nxt % STAGES])
                        cute.copy(copy_B, tBgB[None, None, None, nxt], tBsB[None, None, None, nxt % STAGES])
                    else:
                        load_tile(copy_A, tAgA, tAsA, tAcA, mA.shape, nxt, nxt % STAGES)
                        load_tile(copy_B, tBgB, tBsB, tBcB, mB.shape, nxt, nxt % STAGES)
                cute.arch.cp_async_commit_group()
"""
GEMM = "            cute.gemm(tiled_mma, acc, tCrA[None, None, kb % 2], tCrB[None, None, kb % 2], acc)\n"


def _dsl(old: str, new: str) -> dict[str, str]:
    source = cells_by_grade_id(NB)["gemm06_dsl"]
    assert source.count(old) == 1, f"gemm06_dsl no longer holds {old!r}: update the wrong answer"
    return {"gemm06_dsl": source.replace(old, new)}


#: Wrong main loops of option B, each an edit of the solution, and what the tests say.
WRONG_LOOPS = {
    "a wait for everything before every tile's MMAs": (
        _dsl(LOOP_WAIT, LOOP_WAIT.replace("STAGES - 2", "0")), "waits for every copy issued so far"),
    "an extra empty commit before the wait": (
        _dsl(LOOP_WAIT, "                cute.arch.cp_async_commit_group()\n" + LOOP_WAIT),
        "An extra commit with no copy makes an empty group"),
    "a dummy wait beside a wait 0": (
        _dsl(LOOP_WAIT, "                cute.arch.cp_async_wait_group(7)\n" + LOOP_WAIT.replace("STAGES - 2", "0")),
        "cp.async.wait_group 0"),
    "copies issued, never waited for": (_dsl(LOOP_WAIT, "                cute.arch.sync_threads()"),
                                        "never waits for its copies"),
    "a commit only when a tile is loaded": (
        _dsl("                cute.arch.cp_async_commit_group()\n            cute.gemm(",
             "                    cute.arch.cp_async_commit_group()\n            cute.gemm("), "commit no group of copies"),
    "the next tiles' copies issued after the tile's MMAs (the wait one tighter, as that order needs)": (
        {"gemm06_dsl": _dsl(ISSUE + GEMM, GEMM + ISSUE.replace("if kb == 0:", "if kb == KB - 1:"))["gemm06_dsl"]
         .replace("cute.arch.cp_async_wait_group(STAGES - 2)\n                cute.arch.sync_threads()",
                  "cute.arch.cp_async_wait_group(STAGES - 3)\n                cute.arch.sync_threads()")},
        "at most 1 k-tile(s) of copies are in flight, where the ring keeps 2"),
    "k-blocks in a run-time loop (fragments through local memory)": (
        _dsl("for kb in cutlass.range_constexpr(KB):", "for kb in cutlass.range(KB):"), "come from local memory"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(WRONG_LOOPS))
def test_a_main_loop_that_is_no_pipeline_fails_both_kernel_tests(no_gpu, name: str) -> None:
    replace, phrase = WRONG_LOOPS[name]
    ns = _run_kernel_test(replace, tests=[])
    assert ns["dsl_gemm"] is not None, f"{name}: the wrong answer did not build"
    for test in KERNEL_TESTS:              # the visible part already fails: the student sees the sentence
        with pytest.raises(AssertionError, match=re.escape(phrase)):
            _run_kernel_test(tests=[test], cells=[], replace={test: visible_part(_solution(test))}, start=ns)


@pytest.mark.parametrize("test", KERNEL_TESTS)
def test_the_release_scores_nothing_on_the_kernel(no_gpu, test: str) -> None:
    release = cells_by_grade_id(NB)
    import nbformat

    from tests.support import ROOT

    nb = nbformat.read(ROOT / "course" / NB / f"{NB}.ipynb", as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
               if is_answer(c)}
    assert release
    with pytest.raises(Exception, match="Neither option built"):
        _run_kernel_test({g: answers[g] for g in KERNEL_CELLS if g in answers}, tests=[test])


CPP_CELLS = ["setup", "gemm06_cpp_copies", "gemm06_cpp_setup", "gemm06_cpp", "gemm06_cpp_epilogue", "gemm06_cpp_launch",
             "build_cpp", "gemm_helpers"]


@pytest.mark.slow
@pytest.mark.parametrize("wait_0", [False, True])
def test_option_a_through_the_test_cell(no_gpu, monkeypatch, wait_0: bool) -> None:
    """Option A's fast path (one NVRTC compile, a minute or two on two cores; the same build as
    tests/course/test_techniques_06.py): the solution passes the test's machine-code checks, its wait 0 twin fails."""
    monkeypatch.setenv("GEMMLAB_COMPILE_TIMEOUT", "900")
    source = _solution("gemm06_cpp")
    if wait_0:
        source = _swap("gemm06_cpp", "        cp_async_wait<STAGES - 2>();", "        cp_async_wait<0>();")
    run = lambda: _run_kernel_test({"gemm06_cpp": source}, tests=["test_pipeline_kernel_slow"], cells=CPP_CELLS,
                                   start={"dsl_gemm": None})
    if wait_0:
        with pytest.raises(AssertionError, match="at most 1 k-tile"):
            run()
    else:
        run()
