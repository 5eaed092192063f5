"""Course notebooks graded once a run by the sandboxed grader, for every test that asks how it went.

Why: one grading of notebook 00 costs two sandboxed kernels and every cell, tens of seconds of CPU; tests
that ask different questions of the same hand-in share one grading here (made once per run for all test
processes, ``run_once.once``) instead of grading again. A new test that needs a graded course notebook
takes one of these fixtures (imported by tests/conftest.py) or adds a variant here.

``graded_00_on_hopper``: notebook 00, the solutions' answers filled into the release, graded on a worker
the grader takes for a Hopper GPU (``sm_90``), from an instructor source with three marks:
``HOPPER_TEST`` needs an sm_90 GPU (graded there), ``OTHER_FAMILY_TEST`` needs an sm_80 GPU (not graded
there), and ``DISPLAY_ONLY_CELL``, an instructor cell that would end its kernel, is display-only (not run).
"""
from __future__ import annotations

import copy

import pytest

from tests.support.run_once import once

NOTEBOOK = "00_gpu_and_roofline"
#: Marked as needing an sm_90 GPU: graded on the Hopper worker.
HOPPER_TEST = "test_naive"
#: Marked as needing an sm_80 GPU: not graded on the Hopper worker.
OTHER_FAMILY_TEST = "test_tiled"
#: An instructor cell, after the first code cell, that ends the kernel it runs in; marked display-only.
DISPLAY_ONLY_CELL = "shows_only"
ENDS_ITS_KERNEL = "import os as _os\n_os._exit(3)\n"


def with_exiting_cell(nb: dict) -> dict:
    """``nb`` with the instructor cell ``DISPLAY_ONLY_CELL`` (it ends its kernel) after its first code cell."""
    nb = copy.deepcopy(nb)
    first = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    nb["cells"].insert(first + 1, {
        "cell_type": "code", "execution_count": None, "id": "shows-only", "outputs": [], "source": ENDS_ITS_KERNEL,
        "metadata": {"nbgrader": {"grade": False, "grade_id": DISPLAY_ONLY_CELL, "locked": True, "schema_version": 3,
                                  "solution": False, "task": False}}})
    return nb


def hopper_parts() -> tuple[str, dict, dict, dict]:
    """``(file name, instructor source, release, hand-in)`` of the Hopper-worker grading."""
    import mark_gpu_cells

    from tests.support import grading_fixtures as gf

    name, source, release = gf.course_parts(NOTEBOOK)
    source, release = with_exiting_cell(source), with_exiting_cell(release)
    source = mark_gpu_cells.marked(source, (HOPPER_TEST, OTHER_FAMILY_TEST), NOTEBOOK,
                                   {HOPPER_TEST: "sm_90", OTHER_FAMILY_TEST: "sm_80"},
                                   display_only=(DISPLAY_ONLY_CELL,))
    return name, source, release, gf.solved(source, release)


def _grade_on_hopper() -> dict:
    from autograder.harness import runner
    from autograder.records import GradeJob, NotebookParts

    name, source, release, hand_in = hopper_parts()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runner, "missing_gpu", lambda gpu: "")          # the worker has a GPU (the code needs none)
        patch.setattr(runner, "gpu_arch", lambda gpu: "sm_90")
        job = GradeJob("ann", NOTEBOOK, "t", {name: NotebookParts(source, release, hand_in)})
        return runner.grade_submission(job).to_dict()


#: The C++ kernels of 04 and 04b by notebook: (cell tag, variable, kernel name).
CPP_KERNELS_04 = {"04_mma": (("kernel:mma04_simt_cpp", "SIMT_CPP", "simt_tile"),
                             ("kernel:mma04_tile_cpp", "MMA_TILE_CPP", "mma_tile")),
                  "04b_tiled_mma": (("kernel:mma04_cta_cpp", "CTA_CPP", "cta_gemm"),)}


def compile_for_the_grader(assignment: str, kernels: tuple[tuple[str, str, str], ...]) -> None:
    """Compile a notebook's C++ ``kernels`` (as its cells do without a GPU: for ``nbhelpers.FALLBACK_ARCH``) into the
    run's cache, which seeds the grader's sandboxes (tests/conftest.py): a grading then reads each one instead of
    compiling it cold, and the course tests that compile the same kernels read them too."""
    from solution_cells import load_namespace

    from gemmlab.compiling.compiler import compile_to
    from gemmlab.notebook.nbhelpers import FALLBACK_ARCH

    for tag, variable, name in kernels:
        compile_to(load_namespace(assignment, [tag])[variable], name, arch=FALLBACK_ARCH)


@pytest.fixture(scope="session")
def graded_00_on_hopper():
    """The SubmissionResult of notebook 00 solved and graded on a Hopper worker (module docstring)."""
    from autograder.records import SubmissionResult

    return SubmissionResult.from_dict(once("graded-00-on-hopper", _grade_on_hopper))
