"""Notebook 02's Exercise 2 tests, with and without a GPU.

Without a GPU the graded kernel tests read each built kernel's data path from its PTX (a kernel that copies
global -> global directly, or skips the wait or the barrier, fails both) and check that the layouts g2s and
s2g are built from, the student's Exercise 1 answer for the 64x64 tile, are coalesced (the uncoalesced
``(64,2):(1,64)`` the notebook warns about fails). On a GPU the who map the kernel writes must equal what
those layouts assign to s2g's threads: a kernel whose own thread layout differs fails even though it copies
correctly. The who check's logic is tested here on maps made from layouts; the GPU run is marked. The
untouched release scores 0.

The cells run in a child process from files, as a notebook would (the CuTe DSL reads its functions'
source); option A stays the release's placeholder (no C++ compile).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.support import ROOT
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

#: variant -> (grade_id -> source in place of the solution's), run before the graded test.
VARIANTS = {
    "solution": {},
    "global to global, no shared memory": {"copy_dsl": SOLUTION.replace(KERNEL_BODY, (
        "    thr = s2g.get_slice(tidx)\n"
        "    cute.copy(s2g, thr.partition_S(gS), thr.partition_D(gD))\n"))},
    "no barrier between the copies": {"copy_dsl": SOLUTION.replace("    cute.arch.sync_threads()\n    thr_s2g", "    thr_s2g")},
    "no wait for the cp.async group": {"copy_dsl": SOLUTION.replace("    cute.arch.cp_async_wait_group(0)\n", "")},
    "Exercise 1's layouts uncoalesced": {"copy_layouts": UNCOALESCED_LAYOUTS},
    "the release": {g: release_cells(NB)[g] for g in ("copy_layouts", "copy_dsl")},
}
#: What each wrong kernel's failure must say.
SAYS = {"global to global, no shared memory": "no 16-byte cp.async from global to shared memory",
        "no barrier between the copies": "no barrier",
        "no wait for the cp.async group": "no cp.async wait",
        "Exercise 1's layouts uncoalesced": "Exercise 2 builds g2s and s2g from your Exercise 1 layouts",
        "the release": "Neither option built a copy kernel"}
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


def _outcomes(folder, test: str, hide_gpu: bool) -> dict[str, str]:
    solution = cells_by_grade_id(NB)
    release = release_cells(NB)

    def file(name: str, source: str) -> str:
        path = folder / f"{name}.py"
        path.write_text(python(source))
        return str(path)

    plan = {"variants": {}}
    for i, (variant, replaced) in enumerate(VARIANTS.items()):
        sources = {**solution, "copy_cpp": release["copy_cpp"], **replaced}
        plan["variants"][variant] = [file(f"v{i}_{gid}", sources[gid]) for gid in [*CELLS, test]]
    (folder / "plan.json").write_text(json.dumps(plan))
    (folder / "runner.py").write_text(RUNNER)
    env = {**os.environ, **({"GEMMLAB_HIDE_GPU": "1"} if hide_gpu else {})}
    proc = subprocess.run([sys.executable, str(folder / "runner.py"), str(folder / "plan.json")], capture_output=True,
                          text=True, timeout=900, cwd=folder, env=env)
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


# ---------------------------------------------------------------- on a GPU: the who map the kernel really writes

@pytest.mark.gpu
def test_on_a_gpu_the_uncoalesced_dsl_kernel_fails_and_the_solution_passes(tmp_path) -> None:
    global VARIANTS
    saved = VARIANTS
    VARIANTS = {"solution": {}, "uncoalesced kernel": {"copy_dsl": SOLUTION.replace(THR_GOOD, THR_UNCOALESCED)}}
    try:
        found = _outcomes(tmp_path, "test_copy_kernel", hide_gpu=False)
    finally:
        VARIANTS = saved
    assert found["solution"] == "passed", found["solution"]
    assert found["uncoalesced kernel"].startswith("failed: ") and "your s2g copy gives" in found["uncoalesced kernel"], \
        found["uncoalesced kernel"]
