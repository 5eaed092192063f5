"""Notebook 04's graded test cells fail wrong answers (CPU only).

Each test runs the solutions notebook's own cells (setup, the DSL helpers, the checkers) in one
namespace, replaces the student's answer with a plausible wrong one (a confused student's) or a
cheat (a hostile student's) and runs the graded test cell, hidden tests included, as the grader
would: it must raise. The solution itself must pass, so a test that cannot fail shows up here too.
The kernels' tests read the machine code of real kernels, the solutions and wrong answers built from
them (tests/support/kernels04.py: DSL kernels take seconds, C++ ones a minute, so those tests are
slow). Their GPU checks are run here with stand-ins for the GPU: a fake kernel that writes D by a
TiledMMA's ownership, so the check that reads which thread writes what is exercised without one.
"""
from __future__ import annotations

import functools
import os
import re

import numpy as np
import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")

from tests.support import kernels04 as K  # noqa: E402
from tests.support.fake_kernels04 import fake_kernel, gpu_world, owner_map  # noqa: E402
from tests.support.graded_cells import cells_by_grade_id  # noqa: E402
from tests.support.notebook_cells import gpu_hidden, notebook_namespace, run_cell  # noqa: E402
from solution_cells import cell_folder  # noqa: E402

NB = "04_mma"
# The cells every graded test below needs, in notebook order (no kernel is compiled).
CONTEXT = ["setup", "simt_build", "dsl_helpers", "simt_owned_exprs", "simt_answers", "expression_answers",
           "simt_checker", "simt_shares", "atoms", "dsl_truth", "owners", "owner_checker", "table_helper",
           "spot_answer"]


@pytest.fixture(scope="module")
def notebook():
    import matplotlib

    matplotlib.use("Agg")
    with gpu_hidden():
        ns, graded = notebook_namespace(NB, CONTEXT)
        # The check lists of the kernels' tests, without compiling the notebook's kernels.
        cells, folder = cells_by_grade_id(NB), cell_folder("04-wrong")
        run_cell(ns, "simt_checks", cells["simt_check"].split("SIMT_OPTIONS =")[0], folder)
        run_cell(ns, "tile_checks", cells["tile_check_helpers"].split("TILE_OPTIONS =")[0], folder)
        yield ns, graded


# ---------------------------------------------------------------- Exercise 1 (a): SIMT_M, SIMT_N

SIMT_RIGHT = ("t % 16 + 16 * (v % (TM / 16))", "t / 16 + 16 * (v / (TM / 16))")


def test_simt_owned_solution_and_another_numbering_pass(notebook) -> None:
    _, graded = notebook
    graded("test_simt_owned")
    graded("test_simt_owned", SIMT_M=SIMT_RIGHT[0], SIMT_N=SIMT_RIGHT[1])
    # values numbered along N first: also right
    graded("test_simt_owned", SIMT_M="t % 16 + 16 * (v / (TN / 16))", SIMT_N="t / 16 + 16 * (v % (TN / 16))")


@pytest.mark.parametrize("m, n", [
    ("t / 16 + 16 * (v % (TM / 16))", "t % 16 + 16 * (v / (TM / 16))"),      # threads numbered row-major
    ("t % 16", "t / 16"),                                                    # one step of 16x16 only
    ("(TM / 16) * (t % 16) + v % (TM / 16)", "(TN / 16) * (t / 16) + v / (TM / 16)"),   # each thread a block
    ("t % 16 + 16 * (v % (TN / 16))", "t / 16 + 16 * (v / (TN / 16))"),      # repeats counted with the other mode
    ("t % 16 + 16 * (v % 4)", "t / 16 + 16 * (v / 4)"),                      # right only for 64x64 tiles
    ("t % 16 + 16 * (v % (TM / 16))", "t / 16"),                             # one value repeated along N
    ("t % 16 + 16 * (v % (TM // 16))", "t / 16 + 16 * (v / (TM // 16))"),    # Python's //: C has no such operator
    ("t % 16 + 16 * (v % (TM / 16))" + " + 0" * 40, "t / 16 + 16 * (v / (TM / 16))"),   # longer than any formula
], ids=["row-major", "one-step", "blocks", "swapped-modes", "only-64", "repeated", "python-floordiv", "too-long"])
def test_simt_owned_fails_wrong_formulas(notebook, m: str, n: str) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError):
        graded("test_simt_owned", SIMT_M=m, SIMT_N=n)


def test_simt_owned_cannot_read_a_layout(notebook) -> None:
    """The cheats an expression rules out: a Python function reading tv_c, a name of the notebook, nothing written."""
    ns, graded = notebook
    L = ns["L"]

    def from_tv_c(t, v, tm, tn):
        tm_ = L.make_tiled_mma(ns["fma"], (16, 16, 1), (tm, tn, 1))
        i = int(L.layout_to_array(tm_.tv_c).ravel(order="F")[t + 256 * v])
        return i % tm, i // tm

    with pytest.raises(AssertionError, match="must be a C expression"):
        graded("test_simt_owned", SIMT_M=from_tv_c, SIMT_N=from_tv_c)
    with pytest.raises(AssertionError, match="the names it may use"):
        graded("test_simt_owned", SIMT_M="simt_16", SIMT_N="t / 16")
    with pytest.raises(Exception, match="not written yet"):
        graded("test_simt_owned", SIMT_M=None, SIMT_N=None)


# ---------------------------------------------------------------- Exercise 1 (b): simt_mma_params

def _wrong_params(kind: str):
    import gemmlab.layout as L

    def fn(tm, tn, vec):
        if kind == "integer":
            return (16, 16, 1), (tm, tn, 1)
        if kind == "fixed_16x4":
            return (16, 16, 1), (tm, L.Layout((16, 4), (4, 1)), 1)
        if kind == "no_block_mode":
            return (16, 16, 1), (tm, L.Layout((16, vec), (vec, 1)), 1)
        if kind == "vec_capped_at_4":
            v = min(vec, 4)
            return (16, 16, 1), (tm, L.Layout((16, v, tn // (16 * v)), (v, 1, 16 * v)), 1)
        if kind == "on_m":
            return (16, 16, 1), (L.Layout((16, vec, tm // 16 // vec or 1), (vec, 1, 16 * vec)), tn, 1)
        if kind == "runs_too_long":
            v = 2 * vec
            return (16, 16, 1), (tm, L.Layout((16, v, max(tn // (16 * v), 1)), (v, 1, 16 * v)), 1)
        raise AssertionError(kind)
    return fn


def test_simt_params_solution_and_a_row_major_variant_pass(notebook) -> None:
    ns, graded = notebook
    graded("test_simt_params")
    import gemmlab.layout as L

    def row_major_threads(tm, tn, vec):          # threads numbered along N first: also right
        atoms, perm = ns["simt_mma_params"](tm, tn, vec)
        return L.Layout((16, 16, 1), (16, 1, 0)), perm

    graded("test_simt_params", simt_mma_params=row_major_threads)


@pytest.mark.parametrize("kind", ["integer", "fixed_16x4", "no_block_mode", "vec_capped_at_4", "on_m", "runs_too_long"])
def test_simt_params_fails_wrong_answers(notebook, kind) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError):
        graded("test_simt_params", simt_mma_params=_wrong_params(kind))


# ---------------------------------------------------------------- Exercise 1 (c): the kernel's machine code

def _launcher(A, B, D, threads=256) -> None:
    """Where a graded cell launches the kernel (its GPU branch), these tests give it nothing to do."""


def _graded_kernel(graded, test: str, kernel, cpp: bool = False, **extra) -> dict:
    """Graded cell ``test`` (test_simt_tile or test_mma_tile) with ``kernel``'s machine code as the only option that
    built (option A's if ``cpp``), as in a notebook where that option's build cell compiled it."""
    prefix, options = {"test_simt_tile": ("simt", "SIMT_OPTIONS"), "test_mma_tile": ("tile", "TILE_OPTIONS")}[test]
    built = {"C++ (option A)": (None, None), "DSL (option B)": (None, None)}
    built["C++ (option A)" if cpp else "DSL (option B)"] = (_launcher, lambda: kernel)
    names = {f"{prefix}_cpp": _launcher if cpp else None, f"{prefix}_dsl": None if cpp else _launcher}
    return graded(test, **names, **{options: built}, **{"GPU": False, **extra})


@pytest.mark.slow
@pytest.mark.parametrize("test, kernel", [("test_simt_tile", "simt"), ("test_mma_tile", "tile")])
def test_kernel_solutions_pass_on_their_machine_code(notebook, no_gpu, test: str, kernel: str) -> None:
    """Exercises 1(c) and 3: both options of the solution pass their test's technique checks."""
    _, graded = notebook
    _graded_kernel(graded, test, K.compiled(f"{kernel}_dsl"))
    _graded_kernel(graded, test, K.compiled(f"{kernel}_cpp"), cpp=True)


@pytest.mark.slow
@pytest.mark.parametrize("kernel, variant, offsets", [
    ("simt_dsl", "integer tile", "0, 64, 128, 192"),     # the same D; a thread's columns 16 apart
    ("simt_dsl", "pairs", "0, 4, 128, 132"),             # runs of 2 neighbouring columns, not 4
    ("simt_cpp", "integer tile", "0, 64, 128, 192"),
])
def test_simt_kernel_with_another_permutation_fails_without_a_gpu(notebook, no_gpu, kernel: str, variant: str,
                                                                  offsets: str) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError) as err:
        _graded_kernel(graded, "test_simt_tile", K.compiled(kernel, variant), cpp=kernel.endswith("cpp"))
    message = str(err.value)
    assert f"byte offsets {offsets} from the first" in message and "not one run of 16 contiguous bytes" in message
    assert "simt_mma_params(64, 64, 4)" in message, message


@pytest.mark.slow
def test_simt_kernel_forged_ptx_changes_nothing(notebook, no_gpu, monkeypatch) -> None:
    """A kernel whose PTX text claims the solution's instructions is judged on its machine code."""
    import gemmlab.dsl.core as core

    _, graded = notebook
    wrong = K.compiled("simt_dsl", "integer tile")
    monkeypatch.setattr(core.DslKernel, "ptx", property(lambda self: "\tfma.rn.f32 %f1, %f2, %f3, %f1;\n" * 256))
    with pytest.raises(AssertionError, match="not one run of 16 contiguous bytes"):
        _graded_kernel(graded, "test_simt_tile", wrong)


@pytest.mark.slow
def test_simt_kernel_checks_name_each_missing_instruction(notebook) -> None:
    """The counts of the check list, on a kernel with tensor-core instructions and no FMA (04's one-tile MMA)."""
    from gemmlab import techniques as T

    ns, _ = notebook
    message = T.check(K.compiled("tile_dsl"), ns["SIMT_CHECKS"]).message()
    assert "expected 256, found 0 FMAs" in message and "expected 0, found 1 mma.sync" in message, message


def _simt_owner(ns: dict, atoms, perm_n) -> np.ndarray:
    return owner_map(ns["L"].make_tiled_mma(ns["fma"], atoms, (64, perm_n, 1)))


def test_simt_shares_pass_the_permutation_and_fail_the_integer_tile(notebook) -> None:
    ns, _ = notebook
    L = ns["L"]
    check = functools.partial(ns["check_simt_shares"], device="cpu")
    check("layout", fake_kernel(_simt_owner(ns, (16, 16, 1), L.Layout((16, 4), (4, 1)))), [0, 17, 200, 255])
    row_major = L.Layout((16, 16, 1), (16, 1, 0))                 # threads numbered along N first: also right
    check("row-major", fake_kernel(_simt_owner(ns, row_major, L.Layout((16, 4), (4, 1)))), [0, 17, 200])
    with pytest.raises(AssertionError, match="16 apart"):
        check("integer", fake_kernel(_simt_owner(ns, (16, 16, 1), 64)), [0, 17])
    with pytest.raises(AssertionError, match="runs of"):           # pairs of neighbours, not fours
        check("pairs", fake_kernel(_simt_owner(ns, (16, 16, 1), L.Layout((16, 2, 2), (2, 1, 32)))), [0, 17])
    everything = np.zeros((64, 64), dtype=int)                      # thread 0 writes the whole tile
    with pytest.raises(AssertionError, match="4096 elements"):
        check("all", fake_kernel(everything), [0])


@pytest.mark.slow
def test_graded_simt_cell_fails_the_integer_tile_on_a_gpu(notebook) -> None:
    """The graded cell's GPU branch with a stand-in launch: a right D from the integer tile loses the points (the
    machine code read is the solution's, so only the check of which thread writes what can fail)."""
    ns, graded = notebook
    L = ns["L"]
    world = gpu_world(ns["nbh"])
    shares = functools.partial(ns["check_simt_shares"], device="cpu")
    options = {"C++ (option A)": (None, lambda: K.compiled("simt_dsl")), "DSL (option B)": (None, None)}
    right = fake_kernel(_simt_owner(ns, (16, 16, 1), L.Layout((16, 4), (4, 1))))
    graded("test_simt_tile", simt_cpp=right, simt_dsl=None, SIMT_OPTIONS=options, check_simt_shares=shares, **world)
    wrong = fake_kernel(_simt_owner(ns, (16, 16, 1), 64))
    with pytest.raises(AssertionError, match="16 apart"):
        graded("test_simt_tile", simt_cpp=wrong, simt_dsl=None, SIMT_OPTIONS=options, check_simt_shares=shares, **world)


# ---------------------------------------------------------------- Exercise 3: one warp, one mma.sync

@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["tile_dsl", "tile_cpp"])
def test_mma_tile_with_the_m16n8k8_atom_fails(notebook, no_gpu, kernel: str) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError) as err:
        _graded_kernel(graded, "test_mma_tile", K.compiled(kernel, "m16n8k8 atom"), cpp=kernel.endswith("cpp"))
    assert "expected 1, found 0 m16n8k16" in str(err.value) and "2 mma.sync m16n8k8" in str(err.value)


@pytest.mark.slow
def test_mma_tile_forged_ptx_changes_nothing(notebook, no_gpu, monkeypatch) -> None:
    import gemmlab.dsl.core as core

    _, graded = notebook
    monkeypatch.setattr(core.DslKernel, "ptx", property(
        lambda self: ".entry k() { mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 }"))
    with pytest.raises(AssertionError, match="m16n8k8"):
        _graded_kernel(graded, "test_mma_tile", K.compiled("tile_dsl", "m16n8k8 atom"))


# ---------------------------------------------------------------- Exercise 2: owners as expressions

OWNERS = {"OWNER_A": ("4 * (m % 8) + (k % 8) / 2", "k % 2 + 2 * (m / 8) + 4 * (k / 8)"),
          "OWNER_B": ("4 * n + (k % 8) / 2", "k % 2 + 2 * (k / 8)"),
          "OWNER_C": ("4 * (m % 8) + n / 2", "n % 2 + 2 * (m / 8)")}


def test_owners_solution_passes(notebook) -> None:
    _, graded = notebook
    graded("test_owners")
    graded("test_owners", **OWNERS)
    graded("test_owners", OWNER_C=("(m & 7) << 2 | n >> 1", "(n & 1) | (m >> 3) << 1"))    # bit operations: also C


@pytest.mark.parametrize("name, answer", [
    ("OWNER_A", ("4 * (m % 8) + (k % 8) / 2", "k % 2 + 2 * (m / 8)")),              # the k >= 8 half forgotten
    ("OWNER_B", ("4 * n + (k % 8) / 2", "2 * (k % 2) + k / 8")),                   # value bits swapped
    ("OWNER_C", ("4 * (n / 2) + m % 8", "n % 2 + 2 * (m / 8)")),                   # lanes the other way round
    ("OWNER_C", ("4 * (m % 8) + n / 2", "2 * (n % 2) + m / 8")),                   # value bits swapped
    ("OWNER_A", ("4 * (m % 8) + (k % 8) // 2", "k % 2 + 2 * (m // 8) + 4 * (k // 8)")),   # Python's //
    ("OWNER_C", ("4 * (m % 8) + n / 2",)),                                          # one expression, not a pair
])
def test_owners_fail_wrong_answers(notebook, name: str, answer: tuple) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError):
        graded("test_owners", **{**OWNERS, name: answer})


def test_owners_cannot_be_read_from_truth(notebook) -> None:
    """Inverting the notebook's TRUTH arrays is no answer: a function, or a name of the notebook, is refused."""
    ns, graded = notebook
    vals = ns["TRUTH"]["m16n8k16", "A"][1]

    def inverted(m, k):
        where = int(np.flatnonzero(vals == m + 16 * k)[0])
        return where % 32, where // 32

    with pytest.raises(AssertionError, match="C expression"):
        graded("test_owners", **{**OWNERS, "OWNER_A": (inverted, inverted)})
    with pytest.raises(AssertionError):
        graded("test_owners", **{**OWNERS, "OWNER_A": ("TRUTH", "vals")})


# ---------------------------------------------------------------- Exercise 4: spot the error

def test_spot_solution_passes(notebook) -> None:
    _, graded = notebook
    graded("test_spot")


def _layout(spec):
    import gemmlab.layout as L

    return L.Layout(spec[0], spec[1])


@pytest.mark.parametrize("answer", [
    {"WRONG_ROW": 5},
    {"WRONG_ROW": 4},
    {"WRONG_ROW": 1, "FIXED_LAYOUT": (((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))},
    {"WRONG_ROW_SHOWS": "A"},
    {"WRONG_ROW_SHOWS": "C"},
    {"FIXED_LAYOUT": "((4,8),(2,2)):((32,1),(16,8))"},
    {"FIXED_LAYOUT": (((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))},   # A's layout
    {"FIXED_LAYOUT": (((4, 8), (2, 2)), ((32, 1), (8, 16)))},           # value modes swapped
    {"FIXED_LAYOUT": (((4, 8), (2, 2)), ((1, 4), (32, 64)))},           # lanes the other way round
    {"FIXED_LAYOUT": (((4, 8), (2, 2)), ((16, 1), (8, 64)))},           # the row's own (B's) layout
])
def test_spot_fails_wrong_answers(notebook, answer: dict) -> None:
    _, graded = notebook
    answer = {k: (_layout(v) if isinstance(v, tuple) else v) for k, v in answer.items()}
    with pytest.raises(AssertionError):
        graded("test_spot", **answer)


def _string_matcher(ns: dict) -> dict:
    """A student who matches text: the first row whose layout is not printed as the layout it claims, shown as the
    operand whose printed text it equals (DSL's or gemmlab's), fixed to the printed text of the claimed operand."""
    import gemmlab.layout as L

    printed = {key: {text} for key, (text, _) in ns["TRUTH"].items()}
    for (instr, op) in printed:
        atom = ns["atom16"] if instr == "m16n8k16" else ns["atom8"]
        printed[instr, op].add(str(getattr(atom, f"tv_{op.lower()}")).replace(" ", ""))
    for row, (instr, op, lay, _) in ns["TABLE"].items():
        text = str(lay).replace(" ", "")
        if text not in printed[instr, op]:
            same = [o for (i, o), texts in printed.items() if i == instr and text in texts]
            shows = same[0] if same else ("A" if op != "A" else "B")
            fixed = L.Layout(*{"C": (((4, 8), (2, 2)), ((32, 1), (16, 8)))}.get(op, (((4, 8), 2), ((16, 1), 8))))
            return {"WRONG_ROW": row, "WRONG_ROW_SHOWS": shows, "FIXED_LAYOUT": fixed}
    return {"WRONG_ROW": 1, "WRONG_ROW_SHOWS": "B", "FIXED_LAYOUT": L.Layout(((4, 8), (2, 2)), ((32, 1), (16, 8)))}


def test_spot_cannot_be_found_by_matching_text(notebook) -> None:
    ns, graded = notebook
    answer = _string_matcher(ns)
    assert answer["WRONG_ROW"] != 2, "the table's text gives the wrong row away"
    with pytest.raises(AssertionError):
        graded("test_spot", **answer)


@pytest.mark.parametrize("answer", [
    {"WRONG_ROW": 1, "WRONG_ROW_SHOWS": "B", "FIXED_LAYOUT": (((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))},
    {"WRONG_ROW": 3, "WRONG_ROW_SHOWS": "C", "FIXED_LAYOUT": (((4, 8), (2, 2)), ((32, 1), (16, 8)))},
    {"WRONG_ROW": 4, "WRONG_ROW_SHOWS": "A", "FIXED_LAYOUT": (((4, 8), 2), ((16, 1), 8))},
    {"WRONG_ROW": 5, "WRONG_ROW_SHOWS": "A", "FIXED_LAYOUT": (((4, 8), (2, 2)), ((32, 1), (16, 8)))},
    {"WRONG_ROW": 2, "WRONG_ROW_SHOWS": "A", "FIXED_LAYOUT": (((4, 8), (2, 2)), ((32, 1), (16, 8)))},
])
def test_spot_messages_never_give_the_answer_away(notebook, answer: dict) -> None:
    """Whatever the wrong guess, its message names neither the wrong row (2) nor what it shows (B) unless the student
    named them, and never the element the correct layout puts where theirs goes wrong."""
    _, graded = notebook
    answer = {k: (_layout(v) if isinstance(v, tuple) else v) for k, v in answer.items()}
    with pytest.raises(AssertionError) as err:
        graded("test_spot", **answer)
    message = str(err.value)
    if answer["WRONG_ROW"] != 2:
        assert not re.search(r"\brow 2\b|WRONG_ROW = 2\b", message), message
    if answer["WRONG_ROW_SHOWS"] != "B":
        assert not re.search(r"\bB\b", message), message


def test_spot_fixed_layout_message_names_only_the_students_element(notebook) -> None:
    _, graded = notebook
    wrong = _layout((((4, 8), (2, 2)), ((32, 1), (8, 16))))             # values 1 and 2 swapped
    with pytest.raises(AssertionError) as err:
        graded("test_spot", FIXED_LAYOUT=wrong)
    message = str(err.value)
    t, v = (int(x) for x in re.search(r"thread (\d+) value (\d+)", message).groups())
    got = wrong((t, v))
    assert f"index {got}" in message and message.count("row ") == 1, message
