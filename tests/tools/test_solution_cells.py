"""tools/solution_cells.py: tagged solution cells are found, must be unique, and run in a fresh namespace."""
from __future__ import annotations

import importlib.util
import os

import nbformat
import pytest

from tests.support import ROOT
spec = importlib.util.spec_from_file_location("solution_cells", ROOT / "tools" / "solution_cells.py")
solution_cells = importlib.util.module_from_spec(spec)
spec.loader.exec_module(solution_cells)


@pytest.fixture
def fake_solutions(tmp_path, monkeypatch):
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_markdown_cell("x = 'markdown is never run'", metadata={"tags": ["kernel:a"]}),
        nbformat.v4.new_code_cell("x = 2", metadata={"tags": ["kernel:a"]}),
        nbformat.v4.new_code_cell("y = x * 21\nhas_torch = 'torch' in globals()", metadata={"tags": ["kernel:b", "other"]}),
        nbformat.v4.new_code_cell("z = 1", metadata={"tags": ["dup"]}),
        nbformat.v4.new_code_cell("z = 2", metadata={"tags": ["dup"]}),
    ]
    (tmp_path / "99_fake").mkdir()
    nbformat.write(nb, tmp_path / "99_fake" / "99_fake.ipynb")
    monkeypatch.setattr(solution_cells, "SOLUTIONS", tmp_path)
    monkeypatch.setattr(solution_cells, "ROOT", tmp_path)
    return "99_fake"


def test_cell_source_finds_the_tagged_code_cell(fake_solutions):
    assert solution_cells.cell_source(fake_solutions, "kernel:a") == "x = 2"
    assert solution_cells.cell_source(fake_solutions, "other").startswith("y = x * 21")


@pytest.mark.parametrize("tag, words", [("missing", "found no cell"), ("dup", "found cells [3, 4]")])
def test_cell_source_demands_exactly_one(fake_solutions, tag, words):
    with pytest.raises(solution_cells.SolutionCellError, match=words.replace("[", r"\[").replace("]", r"\]")):
        solution_cells.cell_source(fake_solutions, tag)


def test_missing_notebook(fake_solutions):
    with pytest.raises(solution_cells.SolutionCellError, match="no solutions notebook"):
        solution_cells.cell_source("00_nope", "kernel:a")


def test_load_namespace_runs_cells_in_order(fake_solutions):
    ns = solution_cells.load_namespace(fake_solutions, ["kernel:a", "kernel:b"])
    assert ns["y"] == 42 and ns["has_torch"] and "gemmlab" in ns
    with pytest.raises(NameError):  # order matters: b needs a's x
        solution_cells.load_namespace(fake_solutions, ["kernel:b"])


def test_functions_from_cells_have_source(fake_solutions, tmp_path):
    import inspect

    nb_path = tmp_path / "99_fake" / "99_fake.ipynb"
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("def twice(v):\n    return 2 * v\n", metadata={"tags": ["kernel:f"]}))
    nbformat.write(nb, nb_path)
    ns = solution_cells.load_namespace(fake_solutions, ["kernel:f"])
    assert ns["twice"](21) == 42
    assert inspect.getsource(ns["twice"]).startswith("def twice(v):")


def test_a_kernel_cut_into_steps_is_its_cells_joined_in_notebook_order(fake_solutions, tmp_path):
    nb_path = tmp_path / "99_fake" / "99_fake.ipynb"
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells += [
        nbformat.v4.new_code_cell("SRC = 'head '", metadata={"tags": ["kernel-part:k"]}),
        nbformat.v4.new_code_cell("SRC += 'loop '", metadata={"tags": ["kernel:k"]}),
        nbformat.v4.new_code_cell("SRC += 'tail'", metadata={"tags": ["kernel-part:k"]}),
        nbformat.v4.new_code_cell("SRC = 'another kernel'", metadata={"tags": ["kernel-part:other"]}),
    ]
    nbformat.write(nb, nb_path)
    assert solution_cells.cell_source(fake_solutions, "kernel:k") == "SRC = 'head '\n\nSRC += 'loop '\n\nSRC += 'tail'"
    assert solution_cells.load_namespace(fake_solutions, ["kernel:k"])["SRC"] == "head loop tail"
    edited = solution_cells.load_namespace(fake_solutions, ["kernel:k"], {"kernel:k": "SRC = 'edited'"})
    assert edited["SRC"] == "edited"
    with pytest.raises(solution_cells.SolutionCellError, match="found no cell"):
        solution_cells.cell_source(fake_solutions, "kernel:other")   # parts alone are no kernel


def test_cell_folders_outlive_the_call_and_go_with_the_process() -> None:
    """The files stay while the functions they define may be compiled again, and go when the process exits."""
    import subprocess
    import sys

    child = ("import os, sys; sys.path.insert(0, sys.argv[1]); import solution_cells; "
             "f = solution_cells.cell_folder('exit-test'); (f / 'cell0.py').write_text('x = 1'); print(f)")
    done = subprocess.run([sys.executable, "-c", child, str(ROOT / "tools")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    folder = done.stdout.strip().splitlines()[-1]
    assert "gemmlab-exit-test-" in folder and not os.path.exists(folder), f"{folder} outlived its process"
    here = solution_cells.cell_folder("exit-test")
    assert here.is_dir()                      # this process still runs: the folder is still there
