"""Solution kernels straight from the solutions notebooks, found by cell tag.

The solutions notebook is the one source of truth for a course kernel: tests and
benchmarks must not keep a second copy that could drift. A code cell that defines a
kernel carries a tag such as ``kernel:gemm05_cpp`` in its metadata; this module finds
that cell and returns its source, or runs the tagged cells and returns what they defined.

A long kernel may be cut into steps, one cell each (its copies, its main loop, its launcher):
the other cells of kernel ``NAME`` carry the tag ``kernel-part:NAME``, and the source of
``kernel:NAME`` is then all of its cells joined in notebook order, as if they were one.

    from solution_cells import load_namespace          # with tools/ on sys.path
    ns = load_namespace("05_global_gemm", ["kernel:gemm05_cpp"])
    gemm = ns["gemm05_cpp"]

Tags in use: ``kernel:gemm05_cpp``, ``kernel:gemm05_dsl`` (notebook 05),
``kernel:gemm06_cpp``, ``kernel:gemm06_dsl`` (notebook 06), ...
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:   # imported with tools/ on the path, the repository not
    sys.path.append(str(ROOT))

from autograder.cell_metadata import KERNEL_PART_TAG, KERNEL_TAG, tags  # noqa: E402
from gemmlab.running.isolate import folder_until_exit  # noqa: E402

SOLUTIONS = ROOT / "solutions"


def cell_folder(label: str) -> Path:
    """A new temporary folder for cells run from files, removed when this process exits.

    Why not at once: the CuTe DSL reads a function's source from its file each time it compiles it, so the
    files must live as long as the functions they define."""
    return folder_until_exit(f"gemmlab-{label}-")


class SolutionCellError(LookupError):
    """The notebook or the tagged cell is missing, or the tag is not unique."""


def notebook_path(assignment: str) -> Path:
    """``solutions/<assignment>/<assignment>.ipynb``; raise if it does not exist."""
    path = SOLUTIONS / assignment / f"{assignment}.ipynb"
    if not path.is_file():
        raise SolutionCellError(f"no solutions notebook {path.relative_to(ROOT)}")
    return path


def _tags(cell) -> list[str]:
    return tags(cell) if cell.cell_type == "code" else []


def cell_indices(assignment: str, tag: str) -> list[int]:
    """Indices of the code cells that make up ``tag``: the one cell tagged ``tag``, and for a
    ``kernel:NAME`` tag also the cells tagged ``kernel-part:NAME``, in notebook order.

    Raises ``SolutionCellError`` unless exactly one code cell carries ``tag`` itself.
    """
    path = notebook_path(assignment)
    nb = nbformat.read(path, as_version=4)
    hits = [i for i, c in enumerate(nb.cells) if tag in _tags(c)]
    if len(hits) != 1:
        where = f"cells {hits}" if hits else "no cell"
        raise SolutionCellError(
            f"{path.relative_to(ROOT)}: expected exactly one code cell tagged {tag!r}, found {where}")
    if not tag.startswith(KERNEL_TAG):
        return hits
    part = KERNEL_PART_TAG + tag[len(KERNEL_TAG):]
    return sorted(hits + [i for i, c in enumerate(nb.cells) if part in _tags(c)])


def cell_source(assignment: str, tag: str) -> str:
    """The source of the code cell of ``assignment``'s solutions notebook tagged ``tag`` (a kernel
    cut into steps: its cells joined by blank lines, see ``cell_indices``)."""
    nb = nbformat.read(notebook_path(assignment), as_version=4)
    return "\n\n".join(nb.cells[i].source for i in cell_indices(assignment, tag))


def load_namespace(assignment: str, tags: list[str], sources: dict[str, str] | None = None) -> dict:
    """Run the cells tagged ``tags`` (in the order given) in a fresh namespace and return it.

    ``sources`` maps a tag to code to run in that cell's place (an edited copy of the cell, as
    benchmarks/ablation.py makes); the cell must still exist.

    The namespace starts with ``import gemmlab, torch`` done, as in the notebooks. Each cell
    runs from a file of its own under a temporary folder, so ``inspect.getsource`` (which the
    CuTe DSL needs) works on the functions it defines. IPython syntax (``%magic``,
    ``!shell``) is not supported: kernel cells must be plain Python.
    """
    if isinstance(tags, str):
        tags = [tags]
    ns: dict = {"__name__": f"solution_{assignment}"}
    exec("import gemmlab, torch", ns)
    # The CuTe DSL reads its functions' source with inspect: each cell is run from a real file.
    folder = cell_folder(f"{assignment}-cells")
    for index, tag in enumerate(tags):
        src = cell_source(assignment, tag)
        if sources and tag in sources:
            src = sources[tag]
        path = folder / f"cell{index}_{tag.replace(':', '_')}.py"
        path.write_text(src)
        exec(compile(src, str(path), "exec"), ns)
    return ns


if __name__ == "__main__":  # python tools/solution_cells.py 05_global_gemm kernel:gemm05_cpp
    print(cell_source(sys.argv[1], sys.argv[2]))
