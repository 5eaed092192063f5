"""gemmlab.seeing.checklist: the design steps in their order, looked up by any of their names, and drawn
and written with the current step marked."""
from __future__ import annotations

import re

import pytest

from gemmlab.seeing import checklist
from gemmlab.errors import GemmlabError
from tests.support import ROOT

ORDER = ["problem", "mma atom", "tiled mma", "smem layout", "copy atoms", "pipeline", "epilogue"]


def test_steps_follow_the_design_order() -> None:
    got = checklist.steps()
    assert [s.key for s in got] == ORDER
    assert [s.number for s in got] == list(range(1, 8))
    for s in got:
        assert s.question.endswith("?") and s.decided_by and len(s.choices) >= 2, s.key


def test_every_step_names_notebooks_that_exist() -> None:
    present = {p.name.split("_")[0] for p in (ROOT / "solutions").iterdir() if p.is_dir() and p.name[:2].isdigit()}
    for s in checklist.steps():
        assert s.notebooks and set(s.notebooks) <= present, (s.key, s.notebooks)


def test_the_mma_atom_step_picks_by_arch_and_type() -> None:
    atom = checklist.step("mma atom")
    names = " ".join(c.name for c in atom.choices)
    for instruction in ("UniversalFMA", "mma.sync 16x8x16", "wgmma", "tcgen05"):
        assert instruction in names
    assert "04" in atom.notebooks and "04" in checklist.step("tiled mma").notebooks


def test_wgmma_may_take_a_from_registers_and_the_warp_layout_choice_is_explained() -> None:
    wgmma = next(c for c in checklist.step("mma atom").choices if c.name.startswith("wgmma"))
    assert "A from shared memory or registers" in wgmma.when and "operands from shared memory" not in wgmma.when
    atoms = checklist.step("tiled mma").choices[0]
    assert "(2,2,1)" in atoms.when and "(4,1,1)" in atoms.when and "per MMA" in atoms.when   # what each gives, and why


@pytest.mark.parametrize("name", ["copy atoms", "Copy atoms", " COPY ATOMS ", 5])
def test_step_lookup_by_key_title_or_number(name) -> None:
    assert checklist.step(name).key == "copy atoms"


@pytest.mark.parametrize("bad", ["swizzle", 0, 8, True, 2.0, None])
def test_unknown_steps_are_refused_with_the_list(bad) -> None:
    with pytest.raises(checklist.ChecklistError, match="Steps: 1 'problem'") as info:
        checklist.step(bad) if bad is not None else checklist.where_you_stand(bad)
    assert isinstance(info.value, GemmlabError)


def test_where_you_stand_ticks_earlier_steps_only() -> None:
    line = checklist.where_you_stand("smem layout")
    assert line.count("✓") == 3 and "**4 SMEM layout and swizzle (you are here)**" in line
    assert line.index("3 TiledMMA ✓") < line.index("**4") < line.index("5 Copy atoms") < line.index("7 Epilogue")
    assert "✓" not in line.split("**4")[1]


def test_text_marks_only_the_current_steps() -> None:
    plain = checklist.text()
    assert "you are here" not in plain and plain.count("*Decided by:*") == 7
    marked = checklist.text(["mma atom", 3])
    here = [line for line in marked.splitlines() if "you are here" in line]
    assert [re.match(r"(\d)\.", line).group(1) for line in here] == ["2", "3"]


def test_show_highlights_the_current_step() -> None:
    from matplotlib.figure import Figure

    def faces(fig):
        ax = fig.axes[0]
        return [p.get_facecolor() for p in ax.patches if type(p).__name__ == "FancyBboxPatch"]

    none = checklist.show()
    assert isinstance(none, Figure) and len(faces(none)) == 7
    assert len(set(faces(none))) == 1                          # nothing highlighted
    fig = checklist.show(current="pipeline")
    f = faces(fig)
    assert len(set(f[:5])) == 1 and f[5] != f[0] and f[6] != f[5] and f[6] != f[0]
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert sum("you are" in t for t in texts) == 1


def test_a_notebook_ticks_what_earlier_notebooks_teach() -> None:
    line = checklist.where_you_stand("pipeline", notebook="06")
    ticked = [s.title for s in checklist.steps() if f"{s.number} {s.title} ✓" in line]
    assert ticked == ["Problem shape and dtype", "MMA atom", "TiledMMA", "SMEM layout and swizzle", "Copy atoms",
                      "Epilogue"]
    assert "**6 Pipeline (you are here)**" in line
    early = checklist.where_you_stand("smem layout", notebook="03")
    assert "✓" in early.split("**4")[1] and "1 Problem shape and dtype ✓" in early   # copy atoms: notebook 02
    assert "2 MMA atom ✓" not in early
    with pytest.raises(checklist.ChecklistError, match="as its name starts"):
        checklist.where_you_stand("pipeline", notebook="6")
    second = checklist.where_you_stand(("tiled mma", "copy atoms"), notebook="04b")    # 04's second part
    assert "2 MMA atom ✓" in second and "**3 TiledMMA (you are here)**" in second


def test_show_greys_the_steps_earlier_notebooks_teach() -> None:
    fig = checklist.show(current="epilogue", notebook="05")
    f = [p.get_facecolor() for p in fig.axes[0].patches if type(p).__name__ == "FancyBboxPatch"]
    assert len({f[i] for i in (0, 1, 2, 3, 4)}) == 1 and f[5] not in (f[0], f[6]) and f[6] != f[0]
