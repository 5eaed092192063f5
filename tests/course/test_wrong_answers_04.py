"""Notebook 04's graded test cells fail wrong answers (CPU only).

Each test runs the solutions notebook's own cells (setup, the DSL helpers, the checkers) in one
namespace, replaces the student's answer with a plausible wrong one and runs the graded test cell,
hidden tests included, as the grader would: it must raise. The solution itself must pass, so a test
that cannot fail shows up here too.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import nbformat
import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")

from tests.support import ROOT  # noqa: E402

NOTEBOOK = ROOT / "solutions" / "04_mma" / "04_mma.ipynb"
# The cells every graded test below needs, in notebook order (no kernel is compiled).
CONTEXT = ["setup", "simt_build", "dsl_helpers", "simt_answers", "simt_checker", "atoms", "dsl_truth", "owners",
           "owner_checker", "warp_maps", "cta_mma_params", "cta_mma_checker", "table_helper", "spot_answer"]


def _cells() -> dict[str, str]:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    return {c.metadata.get("nbgrader", {}).get("grade_id"): c.source for c in nb.cells if c.cell_type == "code"}


def _run(ns: dict, name: str, source: str, folder: Path) -> None:
    path = folder / f"{name}.py"          # the CuTe DSL reads its functions' source from a file
    path.write_text(source)
    exec(compile(source, str(path), "exec"), ns)


@pytest.fixture(scope="module")
def hidden_gpu():
    """gemmlab sees no GPU while this module's notebook cells run (only these tests, never the session)."""
    from gemmlab import gpu as gpu_module

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(gpu_module.HIDE_ENV, "1")
        gpu_module.refresh()
        yield
    gpu_module.refresh()


@pytest.fixture(scope="module")
def notebook(hidden_gpu):
    import matplotlib

    matplotlib.use("Agg")
    cells = _cells()
    folder = Path(tempfile.mkdtemp(prefix="gemmlab-04-wrong-"))
    ns: dict = {"__name__": "nb04"}
    for name in CONTEXT:
        _run(ns, name, cells[name], folder)
    # The helpers of the SIMT kernel check, without compiling the kernels.
    _run(ns, "simt_check_helpers", cells["simt_check"].split("SIMT_OPTIONS =")[0], folder)

    def graded(test: str, **answers) -> None:
        local = dict(ns)
        local.update(answers)
        _run(local, test, cells[test], folder)

    return ns, graded


# ---------------------------------------------------------------- Exercise 1 (a): simt_owned

def _row_major(t, tm, tn):
    return {(t // 16 + 16 * i, t % 16 + 16 * j) for i in range(tm // 16) for j in range(tn // 16)}


def _one_step(t, tm, tn):
    return {(t % 16, t // 16)}


def _blocks(t, tm, tn):
    rm, rn = tm // 16, tn // 16
    return {(rm * (t % 16) + i, rn * (t // 16) + j) for i in range(rm) for j in range(rn)}


def _swapped_repeats(t, tm, tn):
    return {(t % 16 + 16 * i, t // 16 + 16 * j) for i in range(tn // 16) for j in range(tm // 16)}


def _as_list_with_repeats(t, tm, tn):
    cells = sorted({(t % 16 + 16 * i, t // 16 + 16 * j) for i in range(tm // 16) for j in range(tn // 16)})
    return cells + cells[:1]


def test_simt_owned_solution_passes(notebook) -> None:
    ns, graded = notebook
    graded("test_simt_owned")


@pytest.mark.parametrize("wrong", [_row_major, _one_step, _blocks, _swapped_repeats, _as_list_with_repeats])
def test_simt_owned_fails_wrong_answers(notebook, wrong) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError):
        graded("test_simt_owned", simt_owned=wrong)


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


# ---------------------------------------------------------------- Exercise 1 (c): the kernel's CPU check

class _FakeKernel:
    def __init__(self, ptx: str) -> None:
        self.ptx = ptx


def _ptx(fmas: int, extra: str = "") -> str:
    return '\t.file\t1 "cute/arch/mma.hpp"\n' + "\tfma.rn.f32 \t%f1, %f2, %f3, %f1;\n" * fmas + extra


@pytest.mark.parametrize("ptx, passes", [
    (_ptx(256), True),
    (_ptx(0), False),                                                        # no gemm call
    (_ptx(64), False),                                                       # a quarter of the tile
    (_ptx(256, "\tmma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r1}, {%r2}, {%f1};\n"), False),
])
def test_simt_kernel_ptx_check(notebook, ptx: str, passes: bool) -> None:
    _, graded = notebook
    launcher = lambda A, B, D: None  # noqa: E731
    options = {"C++ (option A)": (launcher, lambda: _FakeKernel(ptx)), "DSL (option B)": (None, None)}
    run = lambda: graded("test_simt_tile", simt_cpp=launcher, simt_dsl=None, SIMT_OPTIONS=options, GPU=False)  # noqa: E731
    if passes:
        run()
    else:
        with pytest.raises(AssertionError):
            run()


def test_simt_kernel_check_passes_the_compiled_dsl_solution(notebook, tmp_path: Path) -> None:
    import gemmlab
    import torch

    ns, graded = notebook
    source = _cells()["simt_dsl"]
    mod: dict = {"__name__": "simt_dsl"}
    path = tmp_path / "simt_dsl.py"
    path.write_text(source)
    exec(compile(source, str(path), "exec"), mod)
    example = (torch.empty(64, 16, dtype=torch.float16), torch.empty(64, 16, dtype=torch.float16),
               torch.empty(64, 64, dtype=torch.float32))
    kernel = gemmlab.dsl.compile(mod["simt_tile_dsl"], *example, arch="sm_90a")
    launcher = lambda A, B, D: None  # noqa: E731
    options = {"C++ (option A)": (None, None), "DSL (option B)": (launcher, lambda: kernel)}
    graded("test_simt_tile", simt_cpp=None, simt_dsl=launcher, SIMT_OPTIONS=options, GPU=False)


# ---------------------------------------------------------------- Exercise 2: owners

def _owner_wrong(kind: str):
    def owner_A(m, k):
        if kind == "A_no_k_half":
            return 4 * (m % 8) + (k % 8) // 2, k % 2 + 2 * (m // 8)
        return 4 * (m % 8) + (k % 8) // 2, k % 2 + 2 * (m // 8) + 4 * (k // 8)

    def owner_B(n, k):
        if kind == "B_swapped":
            return 4 * n + (k % 8) // 2, 2 * (k % 2) + k // 8
        return 4 * n + (k % 8) // 2, k % 2 + 2 * (k // 8)

    def owner_C(m, n):
        if kind == "C_row_major_lanes":
            return 4 * (n // 2) + m % 8, n % 2 + 2 * (m // 8)
        if kind == "C_values_swapped":
            return 4 * (m % 8) + n // 2, 2 * (n % 2) + m // 8
        return 4 * (m % 8) + n // 2, n % 2 + 2 * (m // 8)
    return {"owner_A": owner_A, "owner_B": owner_B, "owner_C": owner_C}


def test_owners_solution_passes(notebook) -> None:
    _, graded = notebook
    graded("test_owners")
    graded("test_owners", **_owner_wrong("none"))     # the helper's right branch is the solution


@pytest.mark.parametrize("kind", ["A_no_k_half", "B_swapped", "C_row_major_lanes", "C_values_swapped"])
def test_owners_fail_wrong_answers(notebook, kind) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError):
        graded("test_owners", **_owner_wrong(kind))


# ---------------------------------------------------------------- Exercise 3: cta_mma_params

def _cta_wrong(kind: str):
    import gemmlab.layout as L

    def fn(tile_m, tile_n, warps_m, warps_n):
        rep_m, rep_n = tile_m // (16 * warps_m), tile_n // (8 * warps_n)
        good_m = L.Layout((16, warps_m, rep_m), (1, tile_m // warps_m, 16))
        good_n = L.Layout((8, warps_n, rep_n), (1, tile_n // warps_n, 8))
        if kind == "integer":
            return (warps_m, warps_n, 1), (tile_m, tile_n, 16)
        if kind == "n_integer":
            return (warps_m, warps_n, 1), (good_m, tile_n, 16)
        if kind == "modes_swapped":
            return (warps_m, warps_n, 1), (L.Layout((16, rep_m, warps_m), (1, 16, tile_m // warps_m)), good_n, 16)
        if kind == "hard_coded":
            return (2, 2, 1), (L.Layout((16, 2, 2), (1, 32, 16)), L.Layout((8, 2, 4), (1, 32, 8)), 16)
        if kind == "warps_swapped":
            return (warps_n, warps_m, 1), (good_m, good_n, 16)
        raise AssertionError(kind)
    return fn


def test_cta_mma_solution_passes(notebook) -> None:
    _, graded = notebook
    graded("test_cta_mma")


@pytest.mark.parametrize("kind", ["integer", "n_integer", "modes_swapped", "hard_coded", "warps_swapped"])
def test_cta_mma_fails_wrong_answers(notebook, kind) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError):
        graded("test_cta_mma", cta_mma_params=_cta_wrong(kind))


# ---------------------------------------------------------------- Exercise 6: spot the error

def test_spot_solution_passes(notebook) -> None:
    _, graded = notebook
    graded("test_spot")


@pytest.mark.parametrize("answer", [
    {"WRONG_ROW": 5},
    {"WRONG_ROW": 4},
    {"WRONG_ROW_SHOWS": "A"},
    {"WRONG_ROW_SHOWS": "C"},
    {"FIXED_LAYOUT": "((4,8),(2,2)):((32,1),(16,8))"},
    {"FIXED_LAYOUT": ("layout", ((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))},   # A's layout
    {"FIXED_LAYOUT": ("layout", ((4, 8), (2, 2)), ((32, 1), (8, 16)))},           # value modes swapped
    {"FIXED_LAYOUT": ("layout", ((4, 8), (2, 2)), ((1, 4), (32, 64)))},           # lanes the other way round
])
def test_spot_fails_wrong_answers(notebook, answer: dict) -> None:
    import gemmlab.layout as L

    _, graded = notebook
    answer = {k: (L.Layout(v[1], v[2]) if isinstance(v, tuple) else v) for k, v in answer.items()}
    with pytest.raises(AssertionError):
        graded("test_spot", **answer)
