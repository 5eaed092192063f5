"""Notebooks 02 and 05, option B (CuTe DSL): technique checks on the machine code of the solution kernels and
of wrong answers written as text edits of them. 02's copy through shared memory without its commit, with a wait
that leaves the only group pending, without the barrier, or storing 2 bytes at a time; 02's copy with its threads
numbered down the columns (every lane of a warp in another row: twice the sectors), in C++ too; 05's kernel copying
with UniversalCopy everywhere (no cp.async, no ldmatrix). Notebooks 04's and 04b's checks are their test cells' own
(SIMT_CHECKS, TILE_CHECKS, CTA_CHECKS), run on wrong answers in tests/course/test_wrong_answers_04*.py."""
from __future__ import annotations

from functools import cache

import pytest
import torch

from gemmlab import techniques as T
from tests.support import techniques as S

pytestmark = pytest.mark.slow

# ------------------------------------------------------------------ 02, Exercise 2: the copy kernel

COPY_WAIT = "    cute.arch.cp_async_wait_group(0)\n"
COPY_COMMIT = "    cute.arch.cp_async_commit_group()\n"
COPY_SYNC = "    cute.arch.cp_async_wait_group(0)\n    cute.arch.sync_threads()\n"
S2G_ATOM = "s2g_atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), src.element_type, num_bits_per_copy=128)"
DSL_THREADS = "thr_layout = cute.make_layout((16, 8), stride=(8, 1))"
CPP_THREADS = "auto thr_layout = make_layout(make_shape(Int<16>{}, Int<8>{}), LayoutRight{});"


@cache
def copy_report(variant: str) -> T.TechniqueReport:
    import gemmlab

    src = S.cell("02_tiled_copy", "copy_dsl")
    edited = {
        "solution": src,
        "no commit": S.edit(src, COPY_COMMIT, ""),
        "wait 1 on one group": S.edit(src, COPY_WAIT, COPY_WAIT.replace("(0)", "(1)")),
        "no barrier": S.edit(src, COPY_SYNC, COPY_WAIT),
        "2-byte stores": S.edit(src, S2G_ATOM, S2G_ATOM.replace("num_bits_per_copy=128", "num_bits_per_copy=16")),
        "threads numbered down the columns": S.edit(src, DSL_THREADS, "thr_layout = cute.make_layout((64, 2), stride=(1, 64))"),
    }[variant]
    ns = S.run_sources("02", [edited])
    example = S.dsl_examples((256, 512))[0]
    who = S.dsl_examples((256, 512), dtype=torch.int32)[0]
    kernel = gemmlab.dsl.compile(ns["tiled_copy_dsl"], example, example.clone(), who, True, arch="sm_90a")
    return T.check(kernel, S.COPY02, what="the copy kernel (option B)")


def test_the_copy_solution_has_every_technique() -> None:
    report = copy_report("solution")
    assert report.passed, str(report)


def test_the_notebooks_check_lists_are_these() -> None:
    """02's THROUGH_SHARED and 01's COPY_TECHNIQUES, as the notebooks write them."""
    import ast

    for assignment, grade_id, name, checks in (("02_tiled_copy", "copy_check_helpers", "THROUGH_SHARED", S.COPY02),
                                               ("01_layouts_and_partitioning", "copy_helpers", "COPY_TECHNIQUES",
                                                S.COPY01)):
        tree = ast.parse(S.cell(assignment, grade_id))
        (value,) = [n.value for n in tree.body if isinstance(n, ast.Assign) and
                    [t.id for t in n.targets if isinstance(t, ast.Name)] == [name]]
        written = eval(compile(ast.Expression(value), name, "eval"), {"T": T})  # the list only: T's calls
        assert [repr(c) for c in written] == [repr(c) for c in checks], (assignment, name)


COPY_WRONG = {
    "no commit": ("copies_land_before_reads", "not closed into a group before the wait"),
    "wait 1 on one group": ("copies_land_before_reads", "up to 1 group(s) of copies may still be in flight"),
    "no barrier": ("copies_land_before_reads", "no barrier (__syncthreads)"),
    "2-byte stores": ("copies", "2-byte"),
    "threads numbered down the columns": ("coalesced", "touch 32 32-byte sectors where 16 would hold their bytes"),
}


@pytest.mark.parametrize("variant", COPY_WRONG)
def test_each_wrong_copy_kernel_fails_with_its_mistake_named(variant: str) -> None:
    check, phrase = COPY_WRONG[variant]
    failed = S.failures(copy_report(variant))
    assert check in failed and phrase in failed[check], failed


@pytest.mark.parametrize("uncoalesced", [False, True])
def test_the_cpp_copy_kernel_and_its_twin_with_threads_numbered_down_the_columns(monkeypatch, uncoalesced: bool) -> None:
    """Option A (CuTe C++, a compile of a minute on two cores): the same checks, the same verdicts."""
    import gemmlab

    monkeypatch.setenv("GEMMLAB_COMPILE_TIMEOUT", "900")
    src = S.cell("02_tiled_copy", "copy_cpp")
    if uncoalesced:
        src = S.edit(src, CPP_THREADS, "auto thr_layout = make_layout(make_shape(Int<64>{}, Int<2>{}));")
    kernel = gemmlab.compile(S.run_sources("02cpp", [src])["COPY_CPP"], "tiled_copy", arch="sm_90a")
    failed = S.failures(T.check(kernel, S.COPY02))
    assert failed == ({"coalesced": failed.get("coalesced", "")} if uncoalesced else {}), failed
    if uncoalesced:
        assert "touch 32 32-byte sectors where 16 would hold their bytes" in failed["coalesced"]


# ------------------------------------------------------------------ 05, Exercise 5: the global GEMM

@cache
def gemm05(universal: bool):
    import gemmlab

    tag = "kernel:gemm05_dsl"
    src = S.edit(S.source("05_global_gemm", tag), "gemm05_dsl = dsl_gemm_from(gemm05_dsl_jit)", "")
    if universal:
        src = S.edit(src, "op = cute.nvgpu.cpasync.CopyG2SOp() if bits >= 32 else cute.nvgpu.CopyUniversalOp()",
                     "op = cute.nvgpu.CopyUniversalOp()")
        src = S.edit(src, "cute.nvgpu.warp.LdMatrix8x8x16bOp(False, 4)", "cute.nvgpu.CopyUniversalOp()")
        src = S.edit(src, "cute.nvgpu.warp.LdMatrix8x8x16bOp(True, 4)", "cute.nvgpu.CopyUniversalOp()")
    ns = S.namespace("05_global_gemm", ["kernel:gemm05_vec", "kernel:gemm05_launch", tag], {tag: src})   # the kernel reads nbh
    A, B, C = S.dsl_examples((256, 64), (64, 64), (256, 64))
    return gemmlab.dsl.compile(ns["gemm05_dsl_jit"], A, B, C, 1.0, 0.5, 8, arch="sm_90a")


def test_05_copies_by_cp_async_and_ldmatrix_and_universal_copies_everywhere_fail() -> None:
    report = T.check(gemm05(False), S.GEMM05)
    assert report.passed, str(report)
    failed = S.failures(T.check(gemm05(True), S.GEMM05))
    assert "no 16-byte cp.async from global to shared memory in your main loop" in failed["copies"], failed
    assert "not from ldmatrix" in failed["fragments_by"], failed
