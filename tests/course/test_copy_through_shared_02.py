"""Notebook 02's kernel tests read the copy's data path from its PTX: a kernel that copies global ->
global directly (correct, and fast enough for the bandwidth bar) or skips the wait or the barrier
fails both graded kernel tests, with or without a GPU; the solution passes.

The cells run in a child process from a file, as a notebook would on a machine without a GPU: the
CuTe DSL reads its functions' source, and option A stays the release's placeholder (no C++ compile)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT
from tests.support.graded_cells import cells_by_grade_id, python

NB = "02_tiled_copy"
BEGIN, END = "    ### BEGIN SOLUTION\n", "    ### END SOLUTION\n"
SOLUTION = cells_by_grade_id(NB)["copy_dsl"]
KERNEL_BODY = SOLUTION[SOLUTION.index(BEGIN) + len(BEGIN):SOLUTION.index(END)]


def _release_cell(grade_id: str) -> str:
    nb = json.loads((ROOT / "course" / NB / f"{NB}.ipynb").read_text())
    return next("".join(c["source"]) for c in nb["cells"]
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id)


WRONG = {
    "global to global, no shared memory": (
        "    thr = s2g.get_slice(tidx)\n"
        "    cute.copy(s2g, thr.partition_S(gS), thr.partition_D(gD))\n"),
    "no barrier between the copies": KERNEL_BODY.replace("    cute.arch.sync_threads()\n", ""),
    "no wait for the cp.async group": KERNEL_BODY.replace("    cute.arch.cp_async_wait_group(0)\n", ""),
}
#: What each wrong kernel's failure must say.
SAYS = {"global to global, no shared memory": "no 16-byte cp.async from global to shared memory",
        "no barrier between the copies": "no barrier",
        "no wait for the cp.async group": "no cp.async wait"}

RUNNER = """
import json, sys, traceback
cells = json.load(open(sys.argv[1]))
outcome = {}
for variant, files in cells["variants"].items():
    ns = {"__name__": "notebook_02"}
    try:
        for path in cells["before"] + files + cells["after"]:
            exec(compile(open(path).read(), path, "exec"), ns)
        for test in cells["tests"]:
            exec(compile(open(test).read(), test, "exec"), ns)
        outcome[variant] = "passed"
    except AssertionError as exc:
        outcome[variant] = "failed: " + str(exc)
    except Exception:
        outcome[variant] = "error: " + traceback.format_exc()[-1500:]
print("OUTCOME " + json.dumps(outcome))
"""


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("nb02")
    solution = cells_by_grade_id(NB)

    def file(name: str, source: str) -> str:
        path = folder / f"{name}.py"
        path.write_text(python(source))
        return str(path)

    variants = {"solution": [file("copy_dsl_solution", SOLUTION)]}
    for i, (why, body) in enumerate(WRONG.items()):
        variants[why] = [file(f"copy_dsl_wrong{i}", SOLUTION.replace(KERNEL_BODY, body))]
    plan = {
        "before": [file("setup", solution["setup"]), file("copy_cpp", _release_cell("copy_cpp")),
                   file("build_cpp", solution["build_cpp"])],
        "variants": variants,
        "after": [file("build_dsl", solution["build_dsl"]), file("copy_check_helpers", solution["copy_check_helpers"])],
        "tests": [file("test_copy_kernel", solution["test_copy_kernel"])],
    }
    (folder / "plan.json").write_text(json.dumps(plan))
    (folder / "runner.py").write_text(RUNNER)
    proc = subprocess.run([sys.executable, str(folder / "runner.py"), str(folder / "plan.json")], capture_output=True,
                          text=True, timeout=900, cwd=folder, env={**os.environ, "GEMMLAB_HIDE_GPU": "1"})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("OUTCOME ")), None)
    assert line is not None, (proc.stdout + proc.stderr)[-4000:]
    return json.loads(line[len("OUTCOME "):])


def test_the_solution_passes_the_data_path_check(outcomes: dict[str, str]) -> None:
    assert outcomes["solution"] == "passed", outcomes["solution"]


@pytest.mark.parametrize("why", WRONG)
def test_a_copy_that_skips_a_step_fails(outcomes: dict[str, str], why: str) -> None:
    assert outcomes[why].startswith("failed: "), f"{why}: {outcomes[why]}"
    assert SAYS[why] in outcomes[why], outcomes[why]


def test_the_bandwidth_test_reads_the_same_data_path() -> None:
    # the 1-point bandwidth bar is a global -> global copy's to earn too, unless it checks the path first
    test = cells_by_grade_id(NB)["test_bandwidth"]
    assert test.lstrip().startswith("require_through_shared(nbh.built_options("), test[:200]
