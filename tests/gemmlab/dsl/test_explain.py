"""The common CuTe DSL and MLIR errors, each provoked by a real small wrong kernel compiled on the CPU:
the CompileError names the student's line (the line marked ``# <-`` below), shows it, and explains the
message (gemmlab.dsl.explain). In a notebook the line is named as "line L of cell [n]".
"""
from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import gemmlab.dsl as dsl
from gemmlab.dsl import explain as ex
from gemmlab.dsl.errors import parse
from gemmlab.errors import CompileError

HEAD = "import cutlass\nimport cutlass.cute as cute\n"
RUN = '''
@cute.jit
def run(mA: cute.Tensor, mD: cute.Tensor):
    k(mA, mD).launch(grid=[1, 1, 1], block=[32, 1, 1])
'''


def kernel(body: str, before: str = "", run: str = RUN) -> str:
    """A one-warp kernel k(mA, mD) with ``body``, helpers ``before`` it, and the jit function ``run``."""
    return (HEAD + textwrap.dedent(before) + "\n@cute.kernel\ndef k(mA: cute.Tensor, mD: cute.Tensor):\n"
            + textwrap.indent(textwrap.dedent(body), "    ") + run)


def topic(name: str) -> ex.Explanation:
    (found,) = [r.explanation for r in ex.RULES if r.explanation.topic == name]
    return found


#: (case, source, the explanation's topic). The line marked "# <-" is the line the message must name.
CASES = [
    ("variable set only in a branch", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        if tx < 16:
            v = mA[tx]
        mD[tx] = v  # <-
        '''), "a variable set only inside a run-time branch or loop"),
    ("a name defined nowhere", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        mD[tx] = mA[tx] * scale_factor  # <-
        '''), "a name that is not defined"),
    ("a name defined only in another function", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        mD[tx] = mA[tx] * scale  # <-
        ''', before='''
        def helper():
            scale = 2.0
            return scale
        '''), "a name that is not defined"),
    ("a value carried out of its branch in a dict", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        if tx < 16:
            SAVED["v"] = mA[tx]
        mD[tx] = SAVED["v"]  # <-
        ''', before="SAVED = {}\n"), "a run-time value carried out of its branch or loop"),
    ("Python if in a helper", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        mD[tx] = mA[smaller(tx, 5)]
        ''', before='''
        def smaller(a, b):
            if a < b:  # <-
                return a
            return b
        '''), "Python needed True or False from a run-time value"),
    ("Python min in a helper", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        mD[tx] = mA[smaller(tx, 5)]
        ''', before='''
        def smaller(a, b):
            return min(a, b)  # <-
        '''), "Python needed True or False from a run-time value"),
    ("assert on a run-time value", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        assert tx < 32  # <-
        mD[tx] = mA[tx]
        '''), "a compile-time constant was needed"),
    ("const_expr of a run-time value", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        if cutlass.const_expr(tx < 4):  # <-
            mD[tx] = mA[tx]
        '''), "a compile-time constant was needed"),
    ("range_constexpr of a run-time bound", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        for i in cutlass.range_constexpr(tx):  # <-
            mD[i] = mA[i]
        '''), "a compile-time constant was needed"),
    ("a Python list indexed at run time", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        offsets = [0, 1, 2, 3]
        mD[tx] = mA[offsets[tx % 4]]  # <-
        '''), "a run-time value used as a Python index or count"),
    ("an accumulator that changes type", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        acc = 0
        for i in range(tx):  # <-
            acc = acc + mA[i]
        mD[tx] = acc
        '''), "a variable changes type in a run-time branch or loop"),
    ("a dict that gains a key in a branch", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        box = {}
        if tx < 16:  # <-
            box["v"] = mA[tx] * 2.0
        else:
            box["v"] = mA[tx]
        mD[tx] = box["v"]
        '''), "a list, dict or tuple changes shape in a run-time branch or loop"),
    ("a kernel called without launch", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        mD[tx] = mA[tx]
        ''', run='''
@cute.jit
def run(mA: cute.Tensor, mD: cute.Tensor):
    k(mA, mD)  # <-
'''), "a kernel was called without .launch"),
    ("two coordinates for a 1-D tensor", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        mD[tx] = mA[tx, 0]  # <-
        '''), "coordinates or a tiler that do not match the tensor's modes"),
    ("an index from true division", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        mD[tx] = mA[tx / 2]  # <-
        '''), "a coordinate that is not an integer"),
    ("a register tensor of run-time size", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        r = cute.make_rmem_tensor(cute.make_layout(tx), cutlass.Float32)
        r.fill(0.0)  # <-
        mD[tx] = r[0]
        '''), "a register tensor whose size is known only at run time"),
    ("a copy between tensors of different sizes", kernel('''
        tx, _, _ = cute.arch.thread_idx()
        a = cute.make_rmem_tensor(cute.make_layout(4), cutlass.Float32)
        b = cute.make_rmem_tensor(cute.make_layout(8), cutlass.Float32)
        a.fill(1.0)
        cute.copy(cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.Float32), a, b)  # <-
        mD[tx] = b[0]
        '''), "a copy between tensors of different sizes"),
]


#: The kernel whose value escapes its branch through a dict (the "operand does not dominate" case).
ESCAPE = next(source for name, source, _ in CASES if name == "a value carried out of its branch in a dict")


def _load(path: Path, source: str):
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"gemmlab_test_explain_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _marked_line(source: str) -> tuple[int, str]:
    (number, text), = [(i, line) for i, line in enumerate(source.splitlines(), 1) if "# <-" in line]
    return number, text.strip()


@pytest.mark.parametrize("case, source, expected", CASES, ids=[c[0] for c in CASES])
def test_each_common_error_names_the_line_and_says_what_to_change(case: str, source: str, expected: str,
                                                                  tmp_path: Path) -> None:
    module = _load(tmp_path / "cell.py", source)
    with pytest.raises(CompileError) as info:
        dsl.compile(module.run, torch.empty(32), torch.empty(32), arch="sm_90a")
    message = str(info.value)
    line, text = _marked_line(source)
    assert f"failed at {tmp_path / 'cell.py'}:{line}:" in message, message
    assert text in message, message                         # the student's line itself
    assert str(topic(expected)) in message, message          # what it means, what to change
    for noise in ("Traceback", "loc(", "func.func", "\x1b[", "Staged value", "CUTE_DSL_"):
        assert noise not in message, message
    assert len(message.splitlines()) <= 9, message
    assert info.value.diagnostics == [(str(tmp_path / "cell.py"), line)]


def test_a_value_carried_out_of_a_branch_also_says_where_it_was_made(tmp_path: Path) -> None:
    source = ESCAPE
    module = _load(tmp_path / "escape.py", source)
    with pytest.raises(CompileError) as info:
        dsl.compile(module.run, torch.empty(32), torch.empty(32), arch="sm_90a")
    made = next(i for i, line in enumerate(source.splitlines(), 1) if 'SAVED["v"] = mA[tx]' in line)
    assert f'The value is made at {tmp_path / "escape.py"}:{made}: SAVED["v"] = mA[tx]' in str(info.value)


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


def test_in_a_notebook_the_line_is_named_by_its_cell(shell) -> None:
    """A kernel defined in a cell: the message says "line L of cell [n]", never IPython's file name for it."""
    shell.run_cell(HEAD + "import torch, gemmlab\n", store_history=True)
    defined = shell.execution_count                           # the number the next cell gets
    shell.run_cell(ESCAPE, store_history=True)          # the dict escape, defined in cell [defined]
    shell.run_cell(
        "try:\n    gemmlab.dsl.compile(run, torch.empty(32), torch.empty(32), arch='sm_90a')\n"
        "except gemmlab.CompileError as err:\n    MESSAGE = str(err)\n", store_history=True)
    message = shell.user_ns["MESSAGE"]
    use, _ = _marked_line(ESCAPE)
    assert f"failed at line {use} of cell [{defined}]:" in message, message
    assert f"The value is made at line {use - 1} of cell [{defined}]" in message, message
    assert "ipython-input" not in message and "ipykernel" not in message, message


@pytest.mark.parametrize("text, expected", [
    # older DSL releases worded these without the diagnostic ids
    ("unable to convert dynamic Boolean value to bool", "Python needed True or False from a run-time value"),
    ("error: 'scf.yield' operand does not dominate this use", "a run-time value carried out of its branch or loop"),
    ("error[PHASE_DYNAMIC_TO_STATIC_BOOL]: Cannot use ...", "Python needed True or False from a run-time value"),
    ("'cute.copy' op src ptr alignment (64 bits) does not meet requirement (128 bits)",
     "a vector copy wider than the data's alignment"),
])
def test_messages_are_explained_by_their_words(text: str, expected: str) -> None:
    assert ex.explain(text) == topic(expected)


def test_a_message_nothing_explains_gets_no_explanation() -> None:
    assert ex.explain("something no rule knows about") is None


def test_a_missing_name_is_a_branch_problem_only_where_the_source_assigns_it() -> None:
    message = "NameError: name 'v' is not defined"
    assert ex.explain(message, "    if tx < 1:\n        v = mA[tx]\n    mD[tx] = v\n").topic.startswith("a variable set")
    assert ex.explain(message, "    mD[tx] = v\n    w = 1\n").topic == "a name that is not defined"
    assert ex.is_assigned("v", "for i, v in enumerate(x):") and ex.is_assigned("v", "a, v = 1, 2")
    assert not ex.is_assigned("v", "mD[v] = 1\nif v == 2:\n    w.v = 3")


def test_the_dsl_message_is_read_into_its_parts() -> None:
    text = (
        "\nerror[INTERNAL]: The compiler could not build valid IR for this code.\n\n"
        "  --> /work/cell.py:13:4\n      in function `k(...)`:\n   |\n> 13 |     mD[tx] = SAVED[\"v\"]\n     |    ^\n"
        "  error: IR verification failed: operand #2 does not dominate this use\n"
        "  note: the escaping value is created here:\n\n  --> /work/cell.py:12:21\n   |\n"
        "  note: a staged value created inside a for/while/if body is used outside that body. The tracer\n"
        "        threads plain local variables\n"
        "  suggestion: Carry the value as a plain local variable\n")
    diag = parse(text)
    assert diag.diag_id == "INTERNAL"
    assert diag.summary == "operand #2 does not dominate this use"
    assert diag.locations == [("/work/cell.py", 13)] and diag.created_at == ("/work/cell.py", 12)
    assert diag.notes[-1].endswith("The tracer threads plain local variables")
    assert diag.suggestions == ["Carry the value as a plain local variable"]
    mlir = ('error: "mD[tx] = v"("<ipython-input-2-ab>":8:4): operand #2 does not dominate this use\n'
            ' note: "v = mA[tx]"("<ipython-input-2-ab>":7:21): operand defined here (op in a child region)\n')
    diag = parse("Verification failed:\n" + mlir)
    assert diag.summary == "operand #2 does not dominate this use"
    assert diag.locations == [("<ipython-input-2-ab>", 8)] and diag.created_at == ("<ipython-input-2-ab>", 7)
