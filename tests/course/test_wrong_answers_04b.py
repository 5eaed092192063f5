"""Notebook 04b's graded test cells fail wrong answers (CPU only).

As for notebook 04 (tests/course/test_wrong_answers_04.py): the solutions notebook's own cells run
in one namespace, a wrong answer (a confused student's) or a cheat (a hostile student's) replaces
the student's, and the graded cell, hidden tests included, must raise; the solution must pass. The
CTA kernel's test reads the machine code of real kernels, the solutions and wrong answers built from
them (tests/support/kernels04.py; slow: C++ builds take a minute each), and its GPU branch runs with a
stand-in kernel that writes D by a TiledMMA's ownership.
"""
from __future__ import annotations

import functools
import math
import os

import numpy as np
import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")

from tests.support import kernels04 as K  # noqa: E402
from tests.support.fake_kernels04 import fake_kernel, gpu_world, owner_map  # noqa: E402
from tests.support.graded_cells import cells_by_grade_id  # noqa: E402
from tests.support.notebook_cells import gpu_hidden, notebook_namespace, run_cell  # noqa: E402
from solution_cells import cell_folder  # noqa: E402

NB = "04b_tiled_mma"
CONTEXT = ["setup", "dsl_helpers", "dsl_truth", "warp_maps", "cta_mma_params", "cta_mma_checker", "plan_answer",
           "plan_checker", "kernel_helpers", "warp_shares"]


@pytest.fixture(scope="module")
def notebook():
    import matplotlib

    matplotlib.use("Agg")
    with gpu_hidden():
        ns, graded = notebook_namespace(NB, CONTEXT)
        # The check list of the CTA kernel's test, without compiling the notebook's kernels.
        checks = cells_by_grade_id(NB)["cta_check"].split("CTA_OPTIONS =")[0]
        run_cell(ns, "cta_checks", checks, cell_folder("04b-wrong"))
        yield ns, graded


# ---------------------------------------------------------------- Exercise 1: cta_mma_params

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
        if kind == "strides_swapped":   # one case sends rows and columns past the tile: the DSL's code would trap
            return (warps_m, warps_n, 1), (L.Layout((16, warps_m, rep_m), (1, 16, tile_m // warps_m)),
                                           L.Layout((8, warps_n, rep_n), (1, 8, tile_n // warps_n)), 16)
        raise AssertionError(kind)
    return fn


def test_cta_mma_solution_passes(notebook) -> None:
    _, graded = notebook
    graded("test_cta_mma")


@pytest.mark.parametrize("kind", ["integer", "n_integer", "modes_swapped", "hard_coded", "warps_swapped",
                                  "strides_swapped"])
def test_cta_mma_fails_wrong_answers(notebook, kind) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError):
        graded("test_cta_mma", cta_mma_params=_cta_wrong(kind))


def test_cta_mma_names_the_rows_and_columns_a_warp_computes(notebook) -> None:
    # The integer tile interleaves the warps' atoms: the message lists the spans, not a min..max that reads as a block.
    _, graded = notebook
    with pytest.raises(AssertionError) as failure:
        graded("test_cta_mma", cta_mma_params=_cta_wrong("integer"))
    message = str(failure.value)
    assert "warp 0 computes rows 0-15, 32-47 and columns 0-7, 16-23, 32-39, 48-55 of C" in message, message
    assert "not one 32x32 block" in message and "0..47" not in message, message


def test_a_permutation_past_its_tile_is_refused_before_the_dsl_could_end_the_kernel(notebook) -> None:
    """A newcomer's swapped strides for (128, 64, 4, 1) ended the notebook's process inside the CuTe DSL (SIGFPE):
    the helper now answers such a case with the reason, and still asks the DSL for the others."""
    import gemmlab.layout as L

    ns, _ = notebook
    bad = _cta_wrong("strides_swapped")(128, 64, 4, 1)
    good = _cta_wrong("warps_swapped")(64, 64, 2, 2)
    refused, built = ns["dsl_tiled_mma_c"](ns["mma16_op"], [bad, good])
    assert isinstance(refused, str) and "the M permutation (16,4,2):(1,16,32) sends its 128 positions to 0..95" in refused
    assert not isinstance(built, str) and built[:2] == ((64, 64, 16), 128), built
    assert L.permutation_problem(good[1]) is None


# ---------------------------------------------------------------- Exercise 2: plan_cta

def _right_plan(p: dict) -> dict:
    """An independent spelling of the right plan, for variants built from it."""
    bm, bn, bk = p["tile"]
    atom = {("fp16", "fp32"): "SM80_16x8x16_F32F16F16F32_TN", ("fp16", "fp16"): "SM80_16x8x16_F16F16F16F16_TN",
            ("bf16", "fp32"): "SM80_16x8x16_F32BF16BF16F32_TN"}.get((p["dtype"], p["acc"]))
    if atom is None:
        return {"atom": None}
    threads = 128
    return {"atom": atom, "atoms_layout": (4, 1, 1) if p["row_epilogue"] or bn < 16 else (2, 2, 1), "threads": threads,
            "acc_registers": bm * bn // threads // (2 if p["acc"] == "fp16" else 1),
            "smem_bytes": p["stages"] * (bm + bn) * bk * 2, "grid": [math.ceil(p["M"] / bm), math.ceil(p["N"] / bn)],
            "k_iterations": math.ceil(p["K"] / bk)}


def _plan_variant(change):
    def plan(p):
        out = _right_plan(p)
        if out["atom"] is not None:
            change(out, p)
        return out
    return plan


def _set(key, fn):
    return _plan_variant(lambda out, p: out.__setitem__(key, fn(out, p)))


WRONG_PLANS = {
    "smem without stages": _set("smem_bytes", lambda o, p: (p["tile"][0] + p["tile"][1]) * p["tile"][2] * 2),
    "smem of 4-byte elements": _set("smem_bytes", lambda o, p: o["smem_bytes"] * 2),
    "smem of A only": _set("smem_bytes", lambda o, p: p["stages"] * p["tile"][0] * p["tile"][2] * 2),
    "fp16 accumulators one per register": _set("acc_registers", lambda o, p: p["tile"][0] * p["tile"][1] // 128),
    "accumulators per warp": _set("acc_registers", lambda o, p: p["tile"][0] * p["tile"][1] // 4),
    "threads = warps": _set("threads", lambda o, p: p["warps"]),
    "grid rounded down": _set("grid", lambda o, p: (p["M"] // p["tile"][0], p["N"] // p["tile"][1])),
    "grid N first": _set("grid", lambda o, p: tuple(reversed(o["grid"]))),
    "grid as floats": _set("grid", lambda o, p: (p["M"] / p["tile"][0], p["N"] / p["tile"][1])),
    "k rounded down": _set("k_iterations", lambda o, p: p["K"] // p["tile"][2]),
    "k over the CTA tile": _set("k_iterations", lambda o, p: math.ceil(p["K"] / p["tile"][0])),
    "always (2, 2, 1)": _set("atoms_layout", lambda o, p: (2, 2, 1)),
    "always (4, 1, 1)": _set("atoms_layout", lambda o, p: (4, 1, 1)),
    "narrow tiles ignored": _set("atoms_layout", lambda o, p: (4, 1, 1) if p["row_epilogue"] else (2, 2, 1)),
    "row epilogue ignored": _set("atoms_layout", lambda o, p: (4, 1, 1) if p["tile"][1] < 16 else (2, 2, 1)),
    "fp32 atom for fp16 accumulation": _set("atom", lambda o, p: o["atom"].replace("F16F16F16F16", "F32F16F16F32")),
}


def _bf16_fp16_takes_the_fp16_atom(p):
    if (p["dtype"], p["acc"]) == ("bf16", "fp16"):
        return _right_plan({**p, "dtype": "fp16"})
    return _right_plan(p)


def test_plan_solution_and_a_list_grid_pass(notebook) -> None:
    _, graded = notebook
    graded("test_plan")
    graded("test_plan", plan_cta=_right_plan)          # the grid as a list: the same numbers


@pytest.mark.parametrize("name", list(WRONG_PLANS))
def test_plan_fails_wrong_answers(notebook, name: str) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError) as failure:
        graded("test_plan", plan_cta=WRONG_PLANS[name])
    key = str(failure.value).split("[", 1)[1].split("]", 1)[0].strip("'")
    hints = notebook[0]["PLAN_HINTS"]
    assert f"Row {key!r} of the exercise's table: {hints[key]}." in str(failure.value), failure.value   # the rule again


def test_plan_fails_an_fp16_accumulator_for_bf16(notebook) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError, match="'atom'"):
        graded("test_plan", plan_cta=_bf16_fp16_takes_the_fp16_atom)


def test_plan_fails_answers_made_for_the_visible_problems(notebook) -> None:
    """A plan right only for the visible problems (told apart by M) passes the student's checks and nothing more."""
    _, graded = notebook
    visible_m = {128, 4096, 1000, 193, 256}

    def remembered(p):
        return _right_plan(p) if p["M"] in visible_m else _right_plan({**p, "stages": 1, "tile": (64, 64, 16)})

    cells = cells_by_grade_id(NB)
    visible = cells["test_plan"].split("### BEGIN HIDDEN TESTS")[0]
    assert all(f'"M": {m}' in visible for m in visible_m), "the visible problems changed: update visible_m"
    ns, _ = notebook
    run_cell({**ns, "plan_cta": remembered}, "test_plan_visible", visible, cell_folder("04b-wrong"))   # visible only
    with pytest.raises(AssertionError):
        graded("test_plan", plan_cta=remembered)


def test_no_public_function_computes_the_plan() -> None:
    """The reference lives in the hidden tests only: neither the release nor gemmlab spells the plan's numbers."""
    from tests.support import ROOT

    release = (ROOT / "course" / NB / f"{NB}.ipynb").read_text()
    assert "_reference_plan" not in release and "acc_registers\": values" not in release
    for path in (ROOT / "gemmlab").rglob("*.py"):
        assert "acc_registers" not in path.read_text(), f"{path} computes part of the plan"


# ---------------------------------------------------------------- Exercise 3: the CTA kernel's checks

def _cta_owner(ns: dict, perm) -> np.ndarray:
    return owner_map(ns["L"].make_tiled_mma(ns["atom16"], (2, 2, 1), perm))


def test_warp_blocks_pass_the_blocks_and_fail_interleaved_warps(notebook) -> None:
    ns, _ = notebook
    L = ns["L"]
    check = functools.partial(ns["check_warp_blocks"], device="cpu")
    blocks = (L.Layout((16, 2, 2), (1, 32, 16)), L.Layout((8, 2, 4), (1, 32, 8)), 16)
    check("blocks", fake_kernel(_cta_owner(ns, blocks)))
    with pytest.raises(AssertionError, match="not one 32x32 block"):
        check("integer", fake_kernel(_cta_owner(ns, (64, 64, 16))))
    no_perm = owner_map(L.make_tiled_mma(ns["atom16"], (2, 2, 1)))           # a 32x16 step, repeated over 64x64
    owner = np.tile(no_perm, (2, 4))
    with pytest.raises(AssertionError, match="not one 32x32 block"):
        check("no permutation", fake_kernel(owner))
    with pytest.raises(AssertionError, match="not one 32x32 block"):                 # blocks along N only
        check("M interleaved", fake_kernel(_cta_owner(ns, (64, blocks[1], 16))))


def _launcher(A, B, D, threads=128) -> None:
    """Where the graded cell launches the kernel (its GPU branch), these tests give it nothing to do."""


def _graded_kernel(graded, kernel, cpp: bool = False, **extra) -> dict:
    """test_cta_kernel_slow with ``kernel``'s machine code as the only option that built (option A's if ``cpp``)."""
    built = {"C++ (option A)": (None, None), "DSL (option B)": (None, None)}
    built["C++ (option A)" if cpp else "DSL (option B)"] = (_launcher, lambda: kernel)
    return graded("test_cta_kernel_slow", cta_cpp=_launcher if cpp else None, cta_dsl=None if cpp else _launcher,
                  CTA_OPTIONS=built, **{"GPU": False, **extra})


@pytest.mark.slow
def test_cta_kernel_solutions_pass_on_their_machine_code(notebook, no_gpu) -> None:
    _, graded = notebook
    _graded_kernel(graded, K.compiled("cta_dsl"))
    _graded_kernel(graded, K.compiled("cta_cpp"), cpp=True)


#: Each wrong CTA kernel and what its test says (every sentence listed must be in the message).
CTA_WRONG = {
    ("cta_dsl", "integer tile"): ["spread over 200 bytes of one row", "more than the 128 bytes"],
    ("cta_dsl", "no permutation"): ["6 ldmatrix loads for 8 MMAs, 3 for every 4 MMAs, where 1 for every 2 MMAs",
                                    "spread over 200 bytes of one row"],
    ("cta_dsl", "blocks along M only"): ["spread over 200 bytes of one row"],
    ("cta_dsl", "B by plain copy"): ["the B fragments of your MMAs in your main loop come from plain shared-memory "
                                     "loads (LDS), not from ldmatrix.x4"],
    ("cta_dsl", "B by ldmatrix.x2"): ["the B fragments of your MMAs in your main loop come from ldmatrix.x2",
                                      "6 ldmatrix loads for 8 MMAs"],
    ("cta_cpp", "integer tile"): ["spread over 200 bytes of one row"],
    ("cta_cpp", "no permutation, B by ldmatrix.x2"): ["come from ldmatrix.x2", "spread over 200 bytes of one row"],
    ("cta_cpp", "B by plain copy"): ["the B fragments of your MMAs in your main loop come from plain shared-memory"],
}


@pytest.mark.slow
@pytest.mark.parametrize("kernel, variant", list(CTA_WRONG), ids=[f"{k}-{v}" for k, v in CTA_WRONG])
def test_cta_kernel_wrong_answers_fail_without_a_gpu(notebook, no_gpu, kernel: str, variant: str) -> None:
    _, graded = notebook
    with pytest.raises(AssertionError) as err:
        _graded_kernel(graded, K.compiled(kernel, variant), cpp=kernel.endswith("cpp"))
    message = str(err.value)
    assert "cta_mma_params(64, 64, 2, 2)" in message, message
    for sentence in CTA_WRONG[kernel, variant]:
        assert sentence in message, message
    # Stores spread over the row: the message says what to change; other failures do not get that advice.
    fix = "build the TiledMMA with the permutation layouts of Exercise 1, those of cta_mma_params(64, 64, 2, 2)"
    assert (fix in message) == any("spread over" in s for s in CTA_WRONG[kernel, variant]), message


@pytest.mark.slow
def test_cta_kernel_with_warps_interleaved_along_m_only_is_left_to_the_gpu(notebook, no_gpu) -> None:
    """What the machine code cannot show: rows apart by a run-time pitch. Blocks along N with the integer tile along M
    keep each thread's columns within 32, so the kernel passes without a GPU; the warp check on a GPU fails it
    (tests/course/test_gpu_mma04.py)."""
    _, graded = notebook
    _graded_kernel(graded, K.compiled("cta_dsl", "blocks along N only"))


@pytest.mark.slow
def test_cta_kernel_forged_ptx_changes_nothing(notebook, no_gpu, monkeypatch) -> None:
    """B loaded by a plain copy, with PTX text that shows every ldmatrix.x4 the solution has: judged on its SASS."""
    import gemmlab.dsl.core as core

    _, graded = notebook
    forged = ("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1, %r2, %r3, %r4}, [%r5];\n" * 4
              + "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f1}, {%r1}, {%r2}, {%f1};\n" * 8)
    monkeypatch.setattr(core.DslKernel, "ptx", property(lambda self: forged))
    with pytest.raises(AssertionError, match="not from ldmatrix.x4"):
        _graded_kernel(graded, K.compiled("cta_dsl", "B by plain copy"))


@pytest.mark.slow
def test_graded_cta_cell_fails_interleaved_warps_on_a_gpu(notebook) -> None:
    """The GPU branch with stand-in launches: the solution's machine code passes, then only which warp writes which
    block decides."""
    ns, graded = notebook
    L = ns["L"]
    world = gpu_world(ns["nbh"])
    options = {"C++ (option A)": (None, lambda: K.compiled("cta_dsl")), "DSL (option B)": (None, None)}
    check = functools.partial(ns["check_warp_blocks"], device="cpu")
    blocks = (L.Layout((16, 2, 2), (1, 32, 16)), L.Layout((8, 2, 4), (1, 32, 8)), 16)
    common = dict(cta_dsl=None, CTA_OPTIONS=options, check_warp_blocks=check, **world)
    graded("test_cta_kernel_slow", cta_cpp=fake_kernel(_cta_owner(ns, blocks)), **common)
    with pytest.raises(AssertionError, match="not one 32x32 block"):
        graded("test_cta_kernel_slow", cta_cpp=fake_kernel(_cta_owner(ns, (64, 64, 16))), **common)
