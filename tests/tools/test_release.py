"""The student release is generated, not edited: it must match solutions/ exactly, and every
solutions notebook must run top to bottom on a machine without a GPU (GPU cells compile only).
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest

from tests.support import ROOT
import release  # noqa: E402
from autograder.cell_metadata import grade_id  # noqa: E402

ASSIGNMENTS = release.assignments()
#: Wall-clock seconds one cell may take: only a backstop against a hang. What a cell does is bounded by its own
#: limits (a compile by its compiler CPU seconds), and a 2-core CI machine with other work beside it stretches the
#: clock several times (a CuTe C++ compile is ~20 s of CPU there and took over 120 s at load 10).
CELL_TIMEOUT_S = 1500


@pytest.fixture(scope="module")
def fresh_releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every assignment released afresh, in one nbgrader run."""
    return release.generate_all(tmp_path_factory.mktemp("release"))


def test_one_assignment_is_released_on_its_own_too(fresh_releases: dict[str, Path], capsys) -> None:
    """``tools/release.py --check NAME`` releases one assignment (an nbgrader run of its own) as the run for all does."""
    assert set(fresh_releases) == set(ASSIGNMENTS)
    assert release.main(["--check", ASSIGNMENTS[0]]) == 0
    assert capsys.readouterr().out.strip() == f"{ASSIGNMENTS[0]}: up to date"


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_is_up_to_date(assignment: str, fresh_releases: dict[str, Path]) -> None:
    fresh = fresh_releases[assignment]
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


def _run_solutions(assignment: str) -> None:
    """Execute every solutions notebook of ``assignment`` top to bottom; fail on any error or
    on a graded cell that writes to stderr (nbgrader would score it 0)."""
    pytest.importorskip("nbclient", reason="nbclient is needed to run notebooks (pip install nbclient)")
    pytest.importorskip("ipykernel", reason="ipykernel is needed to run notebooks (pip install ipykernel)")
    from gemmlab.notebook.headless import notebook_client

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
            started: dict[int, float] = {}
            took: list[tuple[float, int]] = []
            client = notebook_client(
                nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                resources={"metadata": {"path": str(path.parent)}},
                on_cell_start=lambda cell, cell_index, **_: started.__setitem__(cell_index, time.perf_counter()),
                on_cell_executed=lambda cell, cell_index, **_: took.append(
                    (time.perf_counter() - started[cell_index], cell_index)))
            t0 = time.perf_counter()
            client.execute()  # raises CellExecutionError naming the failing cell
            slowest = ", ".join(f"cell {i}: {t:.1f} s" for t, i in sorted(took, reverse=True)[:4])
            print(f"{path.name}: {time.perf_counter() - t0:.1f} s in all; slowest {slowest}")
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


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_run_without_gpu(assignment: str, no_gpu: None) -> None:
    _run_solutions(assignment)


@pytest.mark.gpu
@pytest.mark.timing
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_run_on_gpu(assignment: str) -> None:
    """Same notebooks, GPU cells really running and their checks really checking."""
    _run_solutions(assignment)


def _cells_by_grade_id(path: Path) -> dict[str, str]:
    nb = nbformat.read(path, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c.source for c in nb.cells
            if grade_id(c)}


@pytest.mark.gpu
def test_notebook01_copy_kernels_on_gpu(tmp_path: Path) -> None:
    """Notebook 01's two copy kernels (C++ and DSL solutions) move every element and each
    element is copied by the thread local_partition assigns, on fresh shapes; no nbclient needed."""
    import importlib.util

    import numpy as np
    import torch

    import gemmlab
    import gemmlab.layout as gl

    cells = _cells_by_grade_id(release.SOLUTIONS / "01_layouts_and_partitioning" / "01_layouts_and_partitioning.ipynb")
    ns: dict = {}
    exec(cells["copy_cpp_solution"], ns)
    copy_cpp = gemmlab.compile(ns["COPY_SRC"], "copy_tiles")
    module_file = tmp_path / "nb01_dsl.py"  # the DSL reads its functions' source: give it a file
    module_file.write_text(cells["copy_dsl_solution"])
    spec = importlib.util.spec_from_file_location("nb01_dsl", module_file)
    dsl_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dsl_module)

    def example(M: int, N: int):
        return (torch.randn(M, N, device="cuda"), torch.full((M, N), float("nan"), device="cuda"),
                torch.full((M, N), -1, dtype=torch.int32, device="cuda"))

    copy_dsl = gemmlab.dsl.compile(dsl_module.copy_tiles_dsl, *example(32, 64))
    helpers = {"gl": gl, "np": np, "torch": torch, "copy_cpp": copy_cpp, "copy_dsl": copy_dsl}
    exec(cells["copy_helpers"], helpers)
    owner = helpers["predicted_owner"]()
    assert sorted(np.unique(owner)) == list(range(256)), "every thread must own part of the tile"
    for kind in ("C++", "DSL"):
        for M, N in [(32, 64), (128, 256), (96, 640), (32 * 37, 64 * 11)]:
            S, D, W = example(M, N)
            helpers["run_copy"](kind, S, D, W)
            assert torch.equal(D, S), f"{kind} copy wrong at {M}x{N}"
            assert np.array_equal(W.cpu().numpy(), np.tile(owner, (M // 32, N // 64))), \
                f"{kind}: elements copied by the wrong thread at {M}x{N}"
