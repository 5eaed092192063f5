"""Factual slips in the course prose that a reviewer once found, kept from coming back.

Checked in the markdown cells of every solutions and course notebook, and in the comments and
string literals of their code cells (what a student reads), never in code itself:

- no "seed" as a name for a kernel or tutorial: students have no seeds ("seed 003's bug");
  the Python word (``seed=``, ``random.seed``, ``manual_seed``) is code, not prose, and is allowed;
- a wgmma core matrix is 8 rows × 16 bytes, not "8 rows × 128 bytes";
- a 128×256 tile has 1.33× the arithmetic intensity of a 128×128 tile, not twice;
- ``mma.sync`` exists since sm_70, not "from sm_80" / "from 8.0";
- the 128-byte swizzle is ``Swizzle<3,4,3>`` on *byte* addresses, not on fp16 element offsets.
"""
from __future__ import annotations

import io
import json
import re
import tokenize
from pathlib import Path

import pytest

from tests.support import ROOT

NOTEBOOKS = sorted([*(ROOT / "solutions").glob("*/*.ipynb"), *(ROOT / "course").glob("*/*.ipynb")])

SEED = re.compile(r"(?<![.\w])seeds?\b(?!\s*[=(\[])", re.IGNORECASE)
WRONG = [
    (re.compile(r"8[- ]rows? [×x] 128[- ]bytes?", re.IGNORECASE),
     "a core matrix is 8 rows × 16 bytes (the 128-byte swizzle atom is 8 rows of 128 bytes)"),
    (re.compile(r"twice the (arithmetic )?intensity", re.IGNORECASE),
     "128×256 has 1.33× the intensity of 128×128: 128·256/384 = 85.3 vs 128·128/256 = 64"),
    (re.compile(r"mma\.sync[^.\n]{0,80}\b(from|since) (sm_?80|8\.0)\b", re.IGNORECASE),
     "mma.sync exists since sm_70 (m8n8k4) and sm_75 (m16n8k8); sm_80 added m16n8k16 and bf16"),
    (re.compile(r"Swizzle<3, ?4, ?3>`? on (fp16 )?element", re.IGNORECASE),
     "Swizzle<3,4,3> acts on byte addresses; on fp16 element offsets the 128-byte swizzle is Swizzle<3,3,3>"),
]


def _code_prose(source: str) -> list[str]:
    """The comments and string literals of a code cell; the whole cell where it is not Python."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("\n".join(lines) + "\n").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return [source]
    return [tok.string for tok in tokens if tok.type in (tokenize.COMMENT, tokenize.STRING)]


def prose(path: Path) -> list[tuple[str, str]]:
    """(where, text) for everything a student reads as text in the notebook."""
    out = []
    for i, cell in enumerate(json.loads(path.read_text())["cells"]):
        source = "".join(cell["source"])
        where = f"{path.relative_to(ROOT)} cell {i}"
        if cell["cell_type"] == "markdown":
            out.append((where, source))
        elif cell["cell_type"] == "code":
            out.extend((where, text) for text in _code_prose(source))
    return out


def test_notebooks_found():
    assert len(NOTEBOOKS) >= 2


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_seed_in_prose(path):
    hits = [f"{where}: {m.group(0)!r} in ...{text[max(0, m.start() - 40):m.end() + 40]!r}..."
            for where, text in prose(path) for m in SEED.finditer(text)]
    assert not hits, "students have no seeds; name the technique or the public tutorial:\n" + "\n".join(hits)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_known_factual_slips_absent(path):
    hits = [f"{where}: {m.group(0)!r}: {why}"
            for where, text in prose(path) for pattern, why in WRONG for m in pattern.finditer(text)]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("text", ["torch.manual_seed(0)", "random.seed(1)", "check_gemm(f, seed=3)",
                                  "np.random.seed (0)", "default_rng_seed"])
def test_seed_rule_spares_code(text):
    assert not SEED.search(text)


@pytest.mark.parametrize("text", ["seed 003's bug", "Seed kernels that work", "the seeds in a run"])
def test_seed_rule_flags_prose(text):
    assert SEED.search(text)


#: Notebooks whose graded cells all open with their heading (the others' cells predate the rule).
TEST_HEADINGS = ["04b_tiled_mma", "05_global_gemm", "06_pipelining", "07_hopper"]


@pytest.mark.parametrize("assignment", TEST_HEADINGS)
def test_graded_cells_open_with_a_test_heading_and_their_points(assignment):
    # solutions/README.md: graded cells start with `# Test`; the heading's points are the cell's points.
    import nbformat

    for folder in ("solutions", "course"):
        nb = nbformat.read(ROOT / folder / assignment / f"{assignment}.ipynb", as_version=4)
        graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert graded
        for cell in graded:
            first, points = cell.source.splitlines()[0], cell.metadata["nbgrader"]["points"]
            where = f"{folder}/{assignment}: {cell.metadata['nbgrader']['grade_id']}"
            assert first.startswith("# Test"), f"{where} opens with {first!r}, not '# Test: ...'"
            assert f"({points} point" in first, f"{where}: {first!r} lacks ({points} points)"
