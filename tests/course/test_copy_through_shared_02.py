"""Notebook 02's Exercise 2 tests, with and without a GPU.

With or without a GPU the graded kernel tests read each built kernel's data path from its machine code
(gemmlab.techniques, the notebook's THROUGH_SHARED): every copy global -> shared a 16-byte cp.async, committed,
waited for and a barrier passed before shared memory is read, every store of the tile 16 bytes read from shared
memory, no global -> global copy, and each warp's copies coalesced. Each wrong kernel below, the races the issue
names (no commit, wait_group(1) on the only group, no wait, no barrier), 16-bit stores, copies through the
registers, threads numbered down the columns, a global -> global copy beside or instead of the shared path, fails
with its mistake named; C++'s ``cp_async_wait<0>()`` without a fence is ``cp.async.wait_all``, which commits, and
passes. Exercise 1's layouts must be coalesced too (the uncoalesced ``(64,2):(1,64)`` the notebook warns about
fails). On a GPU the who map the kernel writes must equal what those layouts assign to s2g's threads: a kernel
whose own (coalesced) thread layout differs fails even though it copies correctly. The who check's logic is
tested here on maps made from layouts; the GPU runs are marked. The untouched release scores 0, and a grading of
the DSL solution through the real grader without a GPU passes the data-path checks in the judge (which reads the
kernel's image, never PTX text from the student's process).

The cells run in a child process from files, as a notebook would (the CuTe DSL reads its functions' source); DSL
variants keep option A the release's placeholder (no C++ compile), the C++ variants (marked slow, about 10 s of
compile each) option B's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.support.graded_cells import cells_by_grade_id, python, release_cells, run_cells

NB = "02_tiled_copy"
BEGIN, END = "    ### BEGIN SOLUTION\n", "    ### END SOLUTION\n"
SOLUTION = cells_by_grade_id(NB)["copy_dsl"]
KERNEL_BODY = SOLUTION[SOLUTION.index(BEGIN) + len(BEGIN):SOLUTION.index(END)]
#: The jit function's solution region: the TiledCopies' layouts.
THR_GOOD = "thr_layout = cute.make_layout((16, 8), stride=(8, 1))"
THR_UNCOALESCED = "thr_layout = cute.make_layout((64, 2), stride=(1, 64))"
assert SOLUTION.count(THR_GOOD) == 1
#: Exercise 1 answered with the thread numbering the Explore warns about.
UNCOALESCED_LAYOUTS = '''def copy_layouts(tile_m, tile_n, elem_bytes, num_threads=128):
    vec = 16 // elem_bytes
    thr_n = min(tile_n // vec, num_threads) // 4 or 1
    thr_m = num_threads // thr_n
    return L.Layout((thr_m, thr_n), (1, thr_m)), L.Layout((1, vec), (1, 1))
'''

WAIT = "    cute.arch.cp_async_wait_group(0)\n"
S2G_128 = "s2g_atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), src.element_type, num_bits_per_copy=128)"
G2S_ASYNC = "g2s_atom = cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(), src.element_type, num_bits_per_copy=128)"
S2G_COPY = "    cute.copy(s2g, thr_s2g.partition_S(sT), thr_s2g.partition_D(gD))\n"
DIRECT = ("    thr = s2g.get_slice(tidx)\n"
          "    cute.copy(s2g, thr.partition_S(gS), thr.partition_D(gD))\n")


def _dsl(old: str, new: str) -> dict[str, str]:
    assert SOLUTION.count(old) == 1, f"the solution no longer holds {old!r} once: update the variant"
    return {"copy_dsl": SOLUTION.replace(old, new)}


#: variant -> (grade_id -> source in place of the solution's), run before the graded test; option A the placeholder.
VARIANTS = {
    "solution": {},
    "global to global, no shared memory": {"copy_dsl": SOLUTION.replace(KERNEL_BODY, DIRECT)},
    "no barrier between the copies": _dsl("    cute.arch.sync_threads()\n    thr_s2g", "    thr_s2g"),
    "no wait for the cp.async group": _dsl(WAIT, ""),
    "no commit (wait_group counts committed groups only)": _dsl("    cute.arch.cp_async_commit_group()\n", ""),
    "wait_group(1) on the only group": _dsl(WAIT, WAIT.replace("(0)", "(1)")),
    "16-bit stores": _dsl(S2G_128, S2G_128.replace("128", "16")),
    "g2s through the registers (UniversalCopy)": _dsl(G2S_ASYNC, G2S_ASYNC.replace("cpasync.CopyG2SOp", "CopyUniversalOp")),
    "the kernel's threads numbered down the columns": _dsl(THR_GOOD, THR_UNCOALESCED),
    # hostile: the exercise's path is there, and a global -> global copy does the work beside it or instead of it
    "a global -> global copy after the shared path": _dsl(S2G_COPY, S2G_COPY + DIRECT),
    "the shared path behind a branch that never runs": {"copy_dsl": SOLUTION.replace(KERNEL_BODY, (
        "    if tidx < 1024:\n" + DIRECT.replace("    ", "        ") + "    else:\n"
        + "".join("    " + line for line in KERNEL_BODY.splitlines(keepends=True))))},
    "Exercise 1's layouts uncoalesced": {"copy_layouts": UNCOALESCED_LAYOUTS},
    "the release": {g: release_cells(NB)[g] for g in ("copy_layouts", "copy_dsl")},
}
#: What each wrong kernel's failure must say.
SAYS = {"global to global, no shared memory": "no 16-byte cp.async from global to shared memory",
        "no barrier between the copies": "with no barrier (__syncthreads) between them",
        "no wait for the cp.async group": "never waits for its copies (no cp.async.wait_group)",
        "no commit (wait_group counts committed groups only)": "your copies are not closed into a group before the wait",
        "wait_group(1) on the only group": "up to 1 group(s) of copies may still be in flight",
        "16-bit stores": "its stores of data read from shared memory to global memory move 2-byte pieces",
        "g2s through the registers (UniversalCopy)": "it has loads into registers then stores to shared memory",
        "the kernel's threads numbered down the columns": "touch 32 32-byte sectors where 16 would hold their bytes",
        "a global -> global copy after the shared path": "are stored straight back to global memory",
        "the shared path behind a branch that never runs": "are stored straight back to global memory",
        "Exercise 1's layouts uncoalesced": "Exercise 2 builds g2s and s2g from your Exercise 1 layouts",
        "the release": "Neither option built a copy kernel"}

CPP = cells_by_grade_id(NB)["copy_cpp"]


def _cpp(old: str, new: str) -> dict[str, str]:
    assert CPP.count(old) == 1, f"the C++ solution no longer holds {old!r} once: update the variant"
    return {"copy_cpp": CPP.replace(old, new)}


#: Option A's variants (option B the placeholder): the given who branch's scalar stores are not the tile's.
CPP_VARIANTS = {
    "solution": {"copy_cpp": CPP},
    "no fence: cp_async_wait<0>() is cp.async.wait_all, which commits": _cpp("    cp_async_fence();\n", ""),
    "cp_async_wait<1>() on the only group": _cpp("cp_async_wait<0>();", "cp_async_wait<1>();"),
    "16-bit stores": _cpp("Copy_Atom<UniversalCopy<uint128_t>, half_t>", "Copy_Atom<UniversalCopy<uint16_t>, half_t>"),
    "threads numbered down the columns": _cpp(
        "auto thr_layout = make_layout(make_shape(Int<16>{}, Int<8>{}), LayoutRight{});",
        "auto thr_layout = make_layout(make_shape(Int<64>{}, Int<2>{}));"),
}
CPP_SAYS = {"cp_async_wait<1>() on the only group": "up to 1 group(s) of copies may still be in flight",
            "16-bit stores": "move 2-byte pieces (STG.E.U16)",
            "threads numbered down the columns": "touch 32 32-byte sectors where 16 would hold their bytes"}
CPP_PASS = ("solution", "no fence: cp_async_wait<0>() is cp.async.wait_all, which commits")
CELLS = ["setup", "build_good_copy", "draw_bad_copy", "warp_sectors", "copy_layouts", "try_copy_layouts", "copy_cpp", "build_cpp",
         "copy_dsl", "build_dsl", "copy_check_helpers"]

RUNNER = """
import json, sys, traceback
plan = json.load(open(sys.argv[1]))
outcome = {}
for variant, files in plan["variants"].items():
    ns = {"__name__": "notebook_02"}
    for path in files[:-1]:              # as the grader runs a notebook: a cell's error does not stop the next
        try:
            exec(compile(open(path).read(), path, "exec"), ns)
        except Exception:
            pass
    try:
        exec(compile(open(files[-1]).read(), files[-1], "exec"), ns)
        outcome[variant] = "passed"
    except AssertionError as exc:
        outcome[variant] = "failed: " + str(exc)
    except Exception:
        outcome[variant] = "error: " + traceback.format_exc()[-1500:]
print("OUTCOME " + json.dumps(outcome))
"""


def _outcomes(folder, test: str, hide_gpu: bool, variants: dict[str, dict[str, str]] | None = None,
              option_a: str = "placeholder") -> dict[str, str]:
    """Each variant's verdict of the graded cell ``test`` ("passed", "failed: message", "error: traceback")."""
    solution = cells_by_grade_id(NB)
    release = release_cells(NB)
    base = {**solution, "copy_cpp": release["copy_cpp"]} if option_a == "placeholder" else \
        {**solution, "copy_dsl": release["copy_dsl"]}

    def file(name: str, source: str) -> str:
        path = folder / f"{name}.py"
        path.write_text(python(source))
        return str(path)

    plan = {"variants": {}}
    for i, (variant, replaced) in enumerate((VARIANTS if variants is None else variants).items()):
        sources = {**base, **replaced}
        plan["variants"][variant] = [file(f"v{i}_{gid}", sources[gid]) for gid in [*CELLS, test]]
    (folder / "plan.json").write_text(json.dumps(plan))
    (folder / "runner.py").write_text(RUNNER)
    env = {**os.environ, **({"GEMMLAB_HIDE_GPU": "1"} if hide_gpu else {})}
    proc = subprocess.run([sys.executable, str(folder / "runner.py"), str(folder / "plan.json")], capture_output=True,
                          text=True, timeout=1800, cwd=folder, env=env)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("OUTCOME ")), None)
    assert line is not None, (proc.stdout + proc.stderr)[-4000:]
    return json.loads(line[len("OUTCOME "):])


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _outcomes(tmp_path_factory.mktemp("nb02"), "test_copy_kernel", hide_gpu=True)


def test_the_solution_passes_what_a_cpu_checks(outcomes: dict[str, str]) -> None:
    assert outcomes["solution"] == "passed", outcomes["solution"]


@pytest.mark.parametrize("why", [v for v in VARIANTS if v != "solution"])
def test_a_copy_that_skips_a_step_fails(outcomes: dict[str, str], why: str) -> None:
    assert outcomes[why].startswith("failed: "), f"{why}: {outcomes[why]}"
    assert SAYS[why] in outcomes[why], outcomes[why]


@pytest.fixture(scope="module")
def cpp_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _outcomes(tmp_path_factory.mktemp("nb02cpp"), "test_copy_kernel", hide_gpu=True, variants=CPP_VARIANTS,
                     option_a="built")


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(CPP_VARIANTS))
def test_option_a_is_held_to_the_same_data_path(cpp_outcomes: dict[str, str], variant: str) -> None:
    """The C++ kernel's who branch (eight scalar 4-byte stores under ``if (who)``) is not the tile's data path."""
    if variant in CPP_PASS:
        assert cpp_outcomes[variant] == "passed", f"{variant}: {cpp_outcomes[variant]}"
    else:
        assert cpp_outcomes[variant].startswith("failed: ") and CPP_SAYS[variant] in cpp_outcomes[variant], \
            f"{variant}: {cpp_outcomes[variant]}"


def test_the_bandwidth_test_reads_the_same_data_path() -> None:
    # the 1-point bandwidth bar is a global -> global copy's to earn too, unless it checks the path first
    test = cells_by_grade_id(NB)["test_bandwidth"]
    assert test.lstrip().startswith("require_through_shared(nbh.built_options("), test[:200]


# ---------------------------------------------------------------- the who map, checked on maps made from layouts

@pytest.fixture(scope="module")
def helpers() -> dict:
    """Notebook 02's Exercise 1 and its checking helpers, with the solution's layouts (no kernel built)."""
    ns = run_cells(NB, ["setup", "build_good_copy", "draw_bad_copy", "warp_sectors", "copy_layouts", "try_copy_layouts"])
    ns.update(cpp_copy_kernel=None, dsl_copy_kernel=None, TILE=64)
    return run_cells(NB, ["copy_check_helpers"], namespace=ns)


def _who(ns: dict, thr, M: int = 128, N: int = 192) -> np.ndarray:
    """The who map a kernel writes whose s2g copy uses the thread layout ``thr`` (and 8-half vectors)."""
    L = ns["L"]
    tc = L.make_tiled_copy(L.copy_atom("UniversalCopy", bits=128, element_bits=16), thr, L.Layout((1, 8), (1, 1)))
    table, _ = L.tv_to_tile_table(tc.tv_layout, tc.tiler)
    return np.tile(table, (M // tc.tiler[0], N // tc.tiler[1])).astype(np.int32)


def test_the_who_check_accepts_the_layouts_of_exercise_1(helpers: dict) -> None:
    helpers["require_who"]("DSL (option B)", _who(helpers, helpers["L"].Layout((16, 8), (8, 1))), 128, 192)


@pytest.mark.parametrize("thr, says", [
    (((64, 2), (1, 64)), r"gives 24192 elements to another thread"),   # the uncoalesced numbering of section 2
    (((16, 8), (1, 16)), r"than your Exercise 1 layouts copy_layouts\(64, 64, 2, 128\)"),  # coalesced, not the student's
    (((32, 4), (4, 1)), r"Row 0, column 32: stored by thread 0, where those layouts give it to thread 4"),
])
def test_the_who_check_fails_a_kernel_with_other_layouts(helpers: dict, thr, says: str) -> None:
    got = _who(helpers, helpers["L"].Layout(*thr))
    with pytest.raises(AssertionError, match=says):
        helpers["require_who"]("C++ (option A)", got, 128, 192)


def test_the_who_check_names_an_unwritten_map(helpers: dict) -> None:
    got = _who(helpers, helpers["L"].Layout((16, 8), (8, 1)))
    got[64:, :] = -1
    with pytest.raises(AssertionError, match="not written at 12288 elements.*name your shared -> global TiledCopy s2g"):
        helpers["require_who"]("C++ (option A)", got, 128, 192)


def test_the_release_placeholder_fails_exercise_1() -> None:
    ns = run_cells(NB, ["setup", "build_good_copy", "draw_bad_copy", "warp_sectors", "copy_layouts"],
                   replace={"copy_layouts": release_cells(NB)["copy_layouts"]})
    with pytest.raises(NotImplementedError):        # the cell that tries the answer: its definitions stay, as in grading
        run_cells(NB, ["try_copy_layouts"], namespace=ns)
    with pytest.raises(NotImplementedError):
        run_cells(NB, ["test_copy_layouts"], namespace=ns)


# ---------------------------------------------------------------- graded through the real grader, without a GPU

#: A hand-in that copies global -> global and cheats the ways that fooled a judge that read PTX text from the
#: student's process: every compiled DSL kernel reports forged PTX, and the data-path helper is redefined.
FORGED = {"copy_dsl": SOLUTION.replace(KERNEL_BODY, DIRECT) + (
    "\nimport gemmlab.dsl.core as _core\n"
    "_core.DslKernel.ptx = property(lambda self: 'cp.async.cg.shared.global [%r1], [%rd1], 16; cp.async.wait_all; "
    "bar.sync 0;')\n"
    "require_through_shared = lambda built: None\n")}


def _graded_without_a_gpu(monkeypatch, replace: dict[str, str]) -> dict:
    """02 graded by the real grader on a worker told it has a GPU (so the GPU tests are graded, not set aside) where
    none is usable: the tests' GPU parts are skipped, their data-path checks run in the judge. Option A stays the
    release's placeholder (no C++ compile)."""
    pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
    from autograder.harness import runner
    from tests.support.course_grading import bwrap_missing, grade

    if why := bwrap_missing():
        pytest.skip(f"no usable bubblewrap: {why}")
    monkeypatch.setattr(runner, "missing_gpu", lambda gpu: "")
    monkeypatch.setattr(runner, "gpu_arch", lambda gpu: "sm_90")
    return grade(NB, replace=replace, placeholders=["copy_cpp"])


@pytest.mark.slow
def test_graded_the_dsl_solutions_data_path_passes_in_the_judge(monkeypatch) -> None:
    """The interim break closed: the judge holds a handle to the DSL kernel and reads its image, not its PTX."""
    cells = _graded_without_a_gpu(monkeypatch, {})
    report = [(g, c.status, c.judged, c.message[:300]) for g, c in cells.items()]
    for test in ("test_copy_kernel", "test_bandwidth"):
        assert cells[test].status == "passed" and cells[test].judged, report
    assert cells["test_copy_layouts"].status == "passed", report


@pytest.mark.slow
def test_graded_a_global_to_global_copy_with_forged_ptx_and_a_redefined_helper_fails_in_the_judge(monkeypatch) -> None:
    cells = _graded_without_a_gpu(monkeypatch, FORGED)
    for test in ("test_copy_kernel", "test_bandwidth"):
        assert cells[test].status == "failed" and cells[test].judged, (test, cells[test])
        assert "no 16-byte cp.async from global to shared memory" in cells[test].message, cells[test].message
        assert "stored straight back to global memory" in cells[test].evalue, cells[test].evalue


# ---------------------------------------------------------------- on a GPU: the who map the kernel really writes

#: Coalesced (lanes 0-15 down one column of vectors, 16-31 down the next) but not Exercise 1's numbering.
THR_OTHER = "thr_layout = cute.make_layout((16, 8), stride=(1, 16))"


@pytest.mark.gpu
def test_on_a_gpu_a_kernel_with_its_own_coalesced_layout_fails_the_who_map_and_the_solution_passes(tmp_path) -> None:
    found = _outcomes(tmp_path, "test_copy_kernel", hide_gpu=False,
                      variants={"solution": {}, "its own layout": _dsl(THR_GOOD, THR_OTHER)})
    assert found["solution"] == "passed", found["solution"]
    assert found["its own layout"].startswith("failed: ") and "your s2g copy gives" in found["its own layout"], \
        found["its own layout"]


@pytest.mark.gpu
def test_on_a_gpu_graded_both_options_pass_in_the_judge_with_every_launch_held_to_the_checks() -> None:
    """Through the real grader on a GPU: the judge checks each option's machine code, then replays the DSL kernel's
    launches (with the who map, and without it for the bandwidth) held to the same checks; full marks."""
    pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
    from tests.support.course_grading import bwrap_missing, grade

    if why := bwrap_missing():
        pytest.skip(f"no usable bubblewrap: {why}")
    cells = grade(NB, gpu="0")
    report = [(g, c.status, c.score, c.message[:300]) for g, c in cells.items()]
    assert all(c.status == "passed" and c.score == c.points for c in cells.values() if c.points), report
