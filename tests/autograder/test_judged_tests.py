"""Answers out, verdicts in, through the real grader: test cells run in the judge, not in the hand-in's kernel.

Hand-ins are built from the course's own notebook 00 (its solutions' answers, then a cheat appended to
an answer cell), so they follow the course as it changes. Each cheat used to earn points when the
tests ran in the student's kernel (docs/THREAT_MODEL.md); now each answer reaches the tests as plain
data, so a cheat changes nothing and a wrong answer scores 0. Needs bubblewrap, like test_grading.py.
"""
from __future__ import annotations

import json

import pytest

from tests.support import ROOT

pytest.importorskip("nbgrader", reason="the grader needs nbgrader (tools/wheelhouse.py --profile gpu-grade)")
from autograder.harness.runner import grade_submission  # noqa: E402
from autograder.records import GradeJob, NotebookParts  # noqa: E402
from tests.autograder.test_grading import needs_bwrap  # noqa: E402
from autograder.cell_metadata import grade_id, is_answer  # noqa: E402

NOTEBOOK = "00_gpu_and_roofline"
FILE = f"{NOTEBOOK}.ipynb"

#: Appended to every answer cell: each redefines the answer wrongly and cheats one way.
CHEATS = {
    "always-equal": "class _Eq(float):\n    def __eq__(self, other): return True\n    __hash__ = float.__hash__\n"
                    "def {fn}(*a, **k): return _Eq(1.0)\n",
    "patched comparison": "import math\nmath.isclose = lambda *a, **k: True\ndef {fn}(*a, **k): return 1.0\n",
    "patched builtin": "import builtins\nbuiltins.round = lambda *a, **k: 0\n"
                       "_real_len = len\ndef {fn}(*a, **k): return 1.0\n",
    "trace hook": "import sys\ndef _tracer(frame, event, arg):\n    frame.f_locals.get('got')\n    return _tracer\n"
                  "sys.settrace(_tracer)\ndef {fn}(*a, **k): return 1.0\n",
    "startup file": "import os, pathlib\n_d = pathlib.Path(os.environ.get('IPYTHONDIR', pathlib.Path.home() / '.ipython'))"
                    " / 'profile_default' / 'startup'\n_d.mkdir(parents=True, exist_ok=True)\n"
                    "(_d / '00.py').write_text('import math\\nmath.isclose = lambda *a, **k: True\\n')\n"
                    "def {fn}(*a, **k): return 1.0\n",
    "dropped error replies": "_ip = get_ipython()\n_send = _ip.kernel.session.send\n"
                             "def _quiet(stream, msg, *a, **k):\n"
                             "    if isinstance(msg, dict) and msg.get('content', {}).get('status') == 'error': return None\n"
                             "    return _send(stream, msg, *a, **k)\n"
                             "_ip.kernel.session.send = _quiet\ndef {fn}(*a, **k): return 1.0\n",
    "forged description": "import gemmlab.answers.serving as _a\n"
                          "_a.describe = lambda ns, names: __import__('json').dumps("
                          "{n: {'kind': 'value', 'data': '63.0'} for n in names})\n"
                          "def {fn}(*a, **k): return 1.0\n",
    "dsl disguise": "import gemmlab.answers.serving as _a\n"
                    "_a.describe = lambda ns, names: __import__('json').dumps("
                    "{n: {'kind': 'dsl', 'done': True} for n in names})\n"
                    "def {fn}(*a, **k): return 1.0\n",
}


def _notebooks() -> tuple[dict, dict, dict[str, str]]:
    source = json.loads((ROOT / "solutions" / NOTEBOOK / FILE).read_text())
    release = json.loads((ROOT / "course" / NOTEBOOK / FILE).read_text())
    answers = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in source["cells"]
               if is_answer(c)}
    return source, release, answers


def _hand_in(release: dict, answers: dict[str, str], cheats: list[str]) -> dict:
    """The solutions' answers, each answer cell followed by one of ``cheats`` (in turn) that redefines it wrongly."""
    nb = json.loads(json.dumps(release))
    k = 0
    for cell in nb["cells"]:
        gid = grade_id(cell)
        if gid in answers:
            first = answers[gid].split("def ", 1)[1].split("(", 1)[0]
            cell["source"] = answers[gid] + "\n" + CHEATS[cheats[k % len(cheats)]].replace("{fn}", first)
            k += 1
    return nb


#: The cheats in groups of three, one per answer cell of notebook 00 (three hand-ins instead of eight).
GROUPS = [sorted(CHEATS)[i:i + 3] for i in range(0, len(CHEATS), 3)]


@needs_bwrap
@pytest.mark.parametrize("cheats", GROUPS, ids=["+".join(g).replace(" ", "_") for g in GROUPS])
def test_a_cheat_in_an_answer_cell_changes_no_verdict(cheats: list[str]) -> None:
    source, release, answers = _notebooks()
    job = GradeJob("cheat", NOTEBOOK, "t", {FILE: NotebookParts(source, release, _hand_in(release, answers, cheats))})
    result = grade_submission(job)
    assert result.max_score > 0 and result.score == 0, [(c.grade_id, c.status, c.message) for c in result.cells]
    assert all(c.judged for c in result.cells), "every test of notebook 00 runs in the judge"


@needs_bwrap
def test_a_judged_test_of_a_dsl_answer_runs_in_the_judge_with_launches_recorded() -> None:
    """Routing: a test that uses a CuTe DSL answer runs in the student's kernel, unless the instructor marked it
    ``judged``; then it runs in the judge, which records and replays the launches it makes (GPU tests of this:
    tests/gemmlab/judge/test_gpu_dsl_replay.py and benchmarks/grading.py --only one)."""
    from tests.support.grading_fixtures import nbgrader_cell
    from nbformat.v4 import new_notebook

    answer = ("import cutlass.cute as cute\n@cute.jit\ndef dsl_part(x: int):\n    pass\n"
              "def launcher():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n")
    where = ("import gemmlab.answers.wire as _w, gemmlab.answers.stand_ins as _s\nassert launcher() == 1\n"
             "print('WHERE', _w.in_judge(), _s.recording_launches())\n")
    cells = [nbgrader_cell("code", "import torch\nimport gemmlab", "setup", locked=True),
             nbgrader_cell("code", answer, "dsl", solution=True),
             nbgrader_cell("code", where + "assert not _w.in_judge()", "test_in_student", grade=True, locked=True, points=1),
             nbgrader_cell("code", where + "assert _w.in_judge() and _s.recording_launches()", "test_judged", grade=True,
                   locked=True, points=1),
             nbgrader_cell("code", where + "assert _w.in_judge() and not _s.recording_launches()", "test_plain", grade=True,
                   locked=True, points=1)]
    cells[3].metadata["gemmlab"] = {"judged": True}
    cells[4].source = "assert True\n" + cells[4].source.replace("launcher() == 1", "True")  # uses no DSL answer
    source = new_notebook(cells=cells)
    source.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    source = json.loads(json.dumps(source))
    release = json.loads(json.dumps(source))
    release["cells"][1]["source"] = "import cutlass.cute as cute\n@cute.jit\ndef dsl_part(x: int):\n    pass\n" \
                                    "def launcher():\n    raise NotImplementedError()\n"
    job = GradeJob("ann", "dsl", "t", {"dsl.ipynb": NotebookParts(source, release, source)})
    by_id = {c.grade_id: c for c in grade_submission(job).cells}
    assert [(g, by_id[g].status, by_id[g].judged) for g in ("test_in_student", "test_judged", "test_plain")] == [
        ("test_in_student", "passed", False), ("test_judged", "passed", True), ("test_plain", "passed", True)], by_id


#: Appended to a later answer cell of 04 or 04b: it redefines every helper and check list the kernel tests use, fakes
#: the technique checks in the student's process, and makes every compiled DSL kernel there report forged PTX (the
#: attack that earned 8/28 on 07 when the judge read PTX text).
CHEATS_04 = (
    "\nmma_instructions = lambda kernel: {'mma.sync.aligned.m16n8k16': 1, 'ldmatrix.sync.aligned.m8n8.x4': 1}\n"
    "ptx_of = lambda kernel: ''\n"
    "TILE_CHECKS = SIMT_CHECKS = CTA_CHECKS = []\n"
    "import gemmlab.techniques as _T\n"
    "_T.require = lambda *a, **k: None\n"
    "_T.check = lambda *a, **k: None\n"
    "import gemmlab.dsl.core as _core\n"
    "_core.DslKernel.ptx = property(lambda self: '.entry k() { '\n"
    "    'ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1}, [%r2]; '\n"
    "    'mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 }')\n")


def _graded_with_cheats(monkeypatch, assignment: str, wrong: tuple[str, str, str], cheat_cell: str) -> dict:
    """``assignment`` as it is, solved, with ``wrong`` = (answer cell, old, new) edited and :data:`CHEATS_04` appended
    to ``cheat_cell``, graded by the real grader; the GPU parts of the tests are left out (the worker is told it has
    a GPU; without one they are skipped). Returns the verdicts by grade_id."""
    from autograder.harness import runner
    from tests.support import grading_fixtures as gf
    from tests.support.course_gradings import CPP_KERNELS_04, compile_for_the_grader

    compile_for_the_grader(assignment, CPP_KERNELS_04[assignment])   # the judge's C++ builds read them (run's cache)
    monkeypatch.setattr(runner, "missing_gpu", lambda gpu: "")
    monkeypatch.setattr(runner, "gpu_arch", lambda gpu: "sm_90")
    name, source, release = gf.course_parts(assignment)
    nb = gf.solved(source, release)
    by_id = {grade_id(c): c for c in nb["cells"]}
    cell, old, new = wrong
    text = "".join(by_id[cell]["source"])
    assert text.count(old) == 1, f"{assignment}'s {cell} no longer holds {old!r} once: update the test"
    by_id[cell]["source"] = text.replace(old, new)
    by_id[cheat_cell]["source"] = "".join(by_id[cheat_cell]["source"]) + CHEATS_04
    result = grade_submission(GradeJob("cheat", assignment, "t", {name: NotebookParts(source, release, nb)}))
    assert all(c.judged for c in result.cells), [(c.grade_id, c.judged) for c in result.cells]
    return {c.grade_id: c for c in result.cells}


@needs_bwrap
def test_a_dsl_kernels_machine_code_is_read_in_the_judge_where_forged_ptx_and_a_redefined_helper_change_nothing(
        monkeypatch) -> None:
    """Notebook 04 as it is, graded: its kernel tests read the machine code (gemmlab.techniques). The DSL option of the
    one-tile MMA built with the m16n8k8 atom (two mma.sync where the exercise asks for one m16n8k16) fails in the
    judge, although a later answer cell redefines the helpers and check lists the tests use, fakes the technique
    checks and makes every compiled DSL kernel report forged PTX: the kernel was compiled in the student's kernel, and
    the judge holds a handle and disassembles its image itself. Every other test passes (the C++ options are the
    judge's own compiles)."""
    cells = _graded_with_cheats(monkeypatch, "04_mma", ("mma_tile_dsl", "(16, 8, 16)", "(16, 8, 8)"), "spot_answer")
    tile = cells["test_mma_tile"]     # a technique error's first line names the kernel, the next ones what is amiss
    assert tile.status == "failed" and tile.ename == "TechniqueError" and "m16n8k8" in tile.evalue, tile
    assert all(c.status == "passed" for g, c in cells.items() if g != "test_mma_tile"), [
        (c.grade_id, c.status, c.message[:200]) for c in cells.values()]


@needs_bwrap
def test_04b_cta_kernel_loading_b_without_ldmatrix_fails_in_the_judge_whatever_its_ptx_says(monkeypatch) -> None:
    """Notebook 04b as it is, graded: the DSL option of the CTA kernel loading B with a plain copy (where its PTX is
    forged to show ldmatrix.x4 and the helpers are redefined) fails on its machine code; every other test passes."""
    b_copy = ("s2r_B = cute.make_tiled_copy_B(ldsm, tiled_mma)",
              "s2r_B = cute.make_tiled_copy_B(cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mA.element_type), "
              "tiled_mma)")
    cells = _graded_with_cheats(monkeypatch, "04b_tiled_mma", ("cta_dsl", *b_copy), "cta_dsl")
    cta = cells["test_cta_kernel_slow"]
    assert cta.status == "failed" and cta.ename == "TechniqueError" and "not from ldmatrix.x4" in cta.evalue, cta
    assert all(c.status == "passed" for g, c in cells.items() if g != "test_cta_kernel_slow"), [
        (c.grade_id, c.status, c.message[:200]) for c in cells.values()]


#: 04b's CTA kernel with the warps' blocks along N only (the integer tile along M): its machine code passes (rows apart
#: by a run-time pitch are not compared), so only the GPU's check of which warp writes what can fail it.
M_INTERLEAVED = ("cta_dsl", "perm = (cute.make_layout((16, 2, 2), stride=(1, 32, 16)), "
                 "cute.make_layout((8, 2, 4), stride=(1, 32, 8)), 16)",
                 "perm = (64, cute.make_layout((8, 2, 4), stride=(1, 32, 8)), 16)")


@needs_bwrap
@pytest.mark.gpu
@pytest.mark.parametrize("assignment, wrong, failing, phrase", [
    ("04_mma", None, None, ""),
    ("04b_tiled_mma", None, None, ""),
    ("04b_tiled_mma", M_INTERLEAVED, "test_cta_kernel_slow", "not one 32x32 block"),
], ids=["04-solved", "04b-solved", "04b-warps-interleaved-along-M"])
def test_04_and_04b_graded_on_a_gpu(assignment: str, wrong: tuple[str, str, str] | None, failing: str | None,
                                    phrase: str) -> None:
    """On a GPU the kernel tests run whole in the judge: machine code, check_gemm on replayed launches (each held to
    the checks its kernel passed) and which thread or warp writes what. The solutions earn full marks; a CTA kernel
    whose machine code passes but whose warps interleave along M loses its test there."""
    from tests.support import grading_fixtures as gf

    name, source, release = gf.course_parts(assignment)
    nb = gf.solved(source, release)
    if wrong is not None:
        by_id = {grade_id(c): c for c in nb["cells"]}
        cell, old, new = wrong
        text = "".join(by_id[cell]["source"])
        assert text.count(old) == 1, f"{assignment}'s {cell} no longer holds {old!r} once: update the test"
        by_id[cell]["source"] = text.replace(old, new)
    job = GradeJob("gpu", assignment, "t", {name: NotebookParts(source, release, nb)}).on("0", "test")
    result = grade_submission(job)
    report = [(c.grade_id, c.status, c.evalue[:300]) for c in result.cells]
    for cell in result.cells:
        if cell.grade_id == failing:
            assert cell.status == "failed" and phrase in cell.evalue, report
        else:
            assert cell.status == "passed", report
