"""The student release is generated, not edited: it must match solutions/ exactly, and every
solutions notebook must run top to bottom on a machine without a GPU (GPU cells compile only).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import release  # noqa: E402

ASSIGNMENTS = release.assignments()
#: Seconds one cell may take on a slow 2-core CI machine (a CuTe C++ compile is ~20 s there).
CELL_TIMEOUT_S = 300


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_is_up_to_date(assignment: str, tmp_path: Path) -> None:
    fresh = release.generate(assignment, tmp_path)
    diffs = release.differences(fresh, release.COURSE / assignment)
    assert not diffs, (
        f"course/{assignment} does not match a fresh release of solutions/{assignment}: {diffs}. "
        "Run `python tools/release.py` and commit course/.")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_has_no_solutions_or_outputs(assignment: str) -> None:
    for path in (release.COURSE / assignment).glob("*.ipynb"):
        text = path.read_text()
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS"):
            assert marker not in text, f"{path} still contains {marker!r}"
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path}: outputs were not stripped"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_run_without_gpu(assignment: str, tmp_path: Path) -> None:
    from nbclient import NotebookClient

    notebooks = sorted((release.SOLUTIONS / assignment).glob("*.ipynb"))
    assert notebooks, f"solutions/{assignment} has no notebook"
    env_backup = dict(os.environ)
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    # The notebook kernels must import this checkout's gemmlab even where it is not installed.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    try:
        for path in notebooks:
            nb = nbformat.read(path, as_version=4)
            client = NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                                    resources={"metadata": {"path": str(path.parent)}})
            client.execute()  # raises CellExecutionError naming the failing cell
            for cell in nb.cells:
                meta = cell.metadata.get("nbgrader", {})
                if cell.cell_type == "code" and meta.get("grade"):
                    stderr = [o.get("text", "") for o in cell.outputs
                              if o.get("output_type") == "stream" and o.get("name") == "stderr"]
                    assert not stderr, (
                        f"{path.name}: graded cell {meta.get('grade_id')} wrote to stderr, which makes "
                        f"nbgrader score it 0: {stderr}")
    finally:
        os.environ.clear()
        os.environ.update(env_backup)
