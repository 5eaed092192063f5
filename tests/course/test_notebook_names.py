"""Every name a solutions notebook uses is defined in it, imported, or a builtin.

Why: some cells run only on a GPU (``if GPU:``), so a name that an edit left undefined there
passes every CPU run of the notebook and fails only on a GPU (it happened: 06's timing cell kept
calling a helper that had moved into gemmlab.notebook.nbhelpers). pyflakes reads the notebook's code cells
in order, as one module, and finds such names without running anything.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support import ROOT

pyflakes_api = pytest.importorskip("pyflakes.api")
pyflakes_reporter = pytest.importorskip("pyflakes.reporter")

NOTEBOOKS = sorted((ROOT / "solutions").glob("*/*.ipynb"))


def notebook_code(path: Path) -> str:
    """The notebook's code cells in order, IPython magics and shell lines made inert."""
    cells = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        if source.lstrip().startswith("%%"):
            continue                      # a cell magic's body is not Python (e.g. %%kernel's C++)
        cells.append("\n".join(f"pass  # {line}" if line.lstrip().startswith(("%", "!")) else line
                               for line in source.split("\n")))
    return "\n\n".join(cells)


class _Collect:
    def __init__(self) -> None:
        self.messages: list[str] = []

    def flake(self, message) -> None:
        self.messages.append(str(message))

    def syntaxError(self, filename, msg, lineno, offset, text) -> None:  # noqa: N802 (pyflakes' names)
        self.messages.append(f"{filename}:{lineno}: syntax error: {msg}")

    def unexpectedError(self, filename, msg) -> None:  # noqa: N802
        self.messages.append(f"{filename}: {msg}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_no_undefined_names(path: Path) -> None:
    found = _Collect()
    pyflakes_api.check(notebook_code(path), path.name, found)
    bad = [m for m in found.messages if "undefined name" in m or "syntax error" in m]
    assert not bad, "\n".join(bad)


def test_the_check_finds_an_undefined_name() -> None:
    found = _Collect()
    pyflakes_api.check("if GPU:\n    available_gemms()\n", "planted.ipynb", found)
    assert any("undefined name 'GPU'" in m for m in found.messages)
