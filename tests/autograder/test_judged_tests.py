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
    "forged description": "import gemmlab.judge.answers as _a\n"
                          "_a.describe = lambda ns, names: __import__('json').dumps("
                          "{n: {'kind': 'value', 'data': '63.0'} for n in names})\n"
                          "def {fn}(*a, **k): return 1.0\n",
    "dsl disguise": "import gemmlab.judge.answers as _a\n"
                    "_a.describe = lambda ns, names: __import__('json').dumps("
                    "{n: {'kind': 'dsl', 'done': True} for n in names})\n"
                    "def {fn}(*a, **k): return 1.0\n",
}


def _notebooks() -> tuple[dict, dict, dict[str, str]]:
    source = json.loads((ROOT / "solutions" / NOTEBOOK / FILE).read_text())
    release = json.loads((ROOT / "course" / NOTEBOOK / FILE).read_text())
    answers = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"]) for c in source["cells"]
               if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
    return source, release, answers


def _hand_in(release: dict, answers: dict[str, str], cheats: list[str]) -> dict:
    """The solutions' answers, each answer cell followed by one of ``cheats`` (in turn) that redefines it wrongly."""
    nb = json.loads(json.dumps(release))
    k = 0
    for cell in nb["cells"]:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
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
    from tests.support.grading_fixtures import _cell
    from nbformat.v4 import new_notebook

    answer = ("import cutlass.cute as cute\n@cute.jit\ndef dsl_part(x: int):\n    pass\n"
              "def launcher():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n")
    where = ("import gemmlab.judge.answers as _a\nassert launcher() == 1\n"
             "print('WHERE', _a.in_judge(), _a.recording_launches())\n")
    cells = [_cell("code", "import torch\nimport gemmlab", "setup", locked=True),
             _cell("code", answer, "dsl", solution=True),
             _cell("code", where + "assert not _a.in_judge()", "test_in_student", grade=True, locked=True, points=1),
             _cell("code", where + "assert _a.in_judge() and _a.recording_launches()", "test_judged", grade=True,
                   locked=True, points=1),
             _cell("code", where + "assert _a.in_judge() and not _a.recording_launches()", "test_plain", grade=True,
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


@needs_bwrap
def test_a_dsl_kernels_ptx_is_checked_in_the_judge_where_a_redefined_helper_changes_nothing(monkeypatch) -> None:
    """04's one-tile MMA test, graded: the DSL option built with the m16n8k8 atom (two mma.sync where the exercise
    asks for one m16n8k16) fails in the judge, although a later answer cell redefines the helper that counts the
    instructions. The kernel was compiled in the student's kernel; the judge holds a handle and reads its PTX.
    The GPU parts of the test are left out (the worker is told it has a GPU; without one they are skipped)."""
    from autograder.harness import runner
    from tests.support import grading_fixtures as gf
    from tests.support.course_gradings import CPP_KERNELS_04, compile_for_the_grader

    compile_for_the_grader("04_mma", CPP_KERNELS_04)      # the judge's C++ builds then read them (the run's cache)
    monkeypatch.setattr(runner, "missing_gpu", lambda gpu: "")
    monkeypatch.setattr(runner, "gpu_arch", lambda gpu: "sm_90")
    name, source, release = gf.course_parts("04_mma")
    nb = gf.solved(source, release)
    by_id = {c["metadata"].get("nbgrader", {}).get("grade_id"): c for c in nb["cells"]}
    tile = "".join(by_id["mma_tile_dsl"]["source"])
    assert tile.count("(16, 8, 16)") == 1
    by_id["mma_tile_dsl"]["source"] = tile.replace("(16, 8, 16)", "(16, 8, 8)")
    by_id["cta_dsl"]["source"] = "".join(by_id["cta_dsl"]["source"]) + (
        "\nmma_instructions = lambda ptx: {'mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32': 1,"
        " 'ldmatrix.sync.aligned.m8n8.x4.shared.b16': 1}\nptx_of = lambda kernel: ''\n")
    result = grade_submission(GradeJob("cheat", "04_mma", "t", {name: NotebookParts(source, release, nb)}))
    cells = {c.grade_id: c for c in result.cells}
    assert all(c.judged for c in result.cells), [(c.grade_id, c.judged) for c in result.cells]
    assert cells["test_mma_tile"].status == "failed" and "m16n8k8" in cells["test_mma_tile"].message, cells["test_mma_tile"]
    assert all(c.status == "passed" for g, c in cells.items() if g != "test_mma_tile"), [
        (c.grade_id, c.status, c.message[:200]) for c in result.cells]
