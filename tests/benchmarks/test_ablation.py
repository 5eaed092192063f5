"""benchmarks/ablation.py: every ablation still fits its kernel's cell, and the guard against
ptxas deleting MMAs works on the real compiled kernels (CuTe DSL builds: no GPU needed)."""
from __future__ import annotations


import pytest

import ablation  # noqa: E402


def _need_disassembler() -> None:
    from gemmlab.compiling import sass

    if sass.disassembler() is None:
        pytest.skip("nvdisasm is not installed")


@pytest.mark.parametrize("kernel,ab", [(k, a) for k, abl in ablation.ABLATIONS.items() for a in abl],
                         ids=lambda x: x if isinstance(x, str) else x.label)
def test_every_ablation_edits_its_cell(kernel, ab) -> None:
    original = ablation.variant_source(kernel, None)
    edited = ablation.variant_source(kernel, ab)
    assert edited != original
    for old, new in ab.edits:
        assert old not in edited or old in new, f"{ab.label}: the edit left its text in place"


def test_a_stale_ablation_names_kernel_and_edit() -> None:
    stale = ablation.Ablation("stale", "text that is not there", (("no such line in the cell\n", ""),))
    with pytest.raises(ablation.AblationError, match=r"'stale' of gemm06_cpp.*update ABLATIONS"):
        ablation.variant_source("gemm06_cpp", stale)


def test_guard_refuses_an_ablation_that_lost_its_wgmmas() -> None:
    import torch

    _need_disassembler()
    variants = {v.label: v for v in ablation.prepare("hopper_ws", ablation.ABLATIONS["hopper_ws"], "sm_90a",
                                                       torch.float16)}
    base = variants["unchanged"]
    assert base.mma == 4 and not base.refused                 # four wgmma 64x256x16 per k-tile of 64
    assert variants["no TMA store"].mma == base.mma and not variants["no TMA store"].refused
    gone = variants["no epilogue"]
    assert gone.mma < base.mma and "ptxas kept" in gone.refused


def test_dsl_main_loop_ablations_keep_every_mma() -> None:
    import torch

    _need_disassembler()
    variants = ablation.prepare("gemm06_dsl", ablation.ABLATIONS["gemm06_dsl"], "sm_90a", torch.bfloat16)
    counts = {v.label: v.mma for v in variants}
    assert counts["unchanged"] > 0
    assert set(counts.values()) == {counts["unchanged"]}, counts
    assert not any(v.refused for v in variants)


def test_table_divides_out_the_clock() -> None:
    base = ablation.Variant("k", None, mma=4, runs=[{"tflops": 600.0, "mhz": 1500.0, "watts": 690.0},
                                                    {"tflops": 580.0, "mhz": 1450.0, "watts": 695.0}])
    cooler = ablation.Variant("k", ablation.ABLATIONS["hopper_ws"][0], mma=4,
                              runs=[{"tflops": 700.0, "mhz": 1750.0, "watts": 600.0}])
    lost = ablation.Variant("k", ablation.ABLATIONS["hopper_ws"][1], mma=1, refused="ptxas kept 1 of 4")
    text = ablation.table([base, cooler, lost], cublas=700.0)
    rows = text.splitlines()[2:]
    assert rows[0].endswith("| 1.000 |") and rows[1].endswith("| 1.000 |")   # base runs: 0.4 TFLOPS/MHz each
    assert "| 1.000 | 1750 | 600 | 1.000 |" in rows[2]       # as fast as cuBLAS, and only from its clock
    assert "not timed: ptxas kept 1 of 4" in rows[3]


def test_compile_only_prints_counts_without_a_gpu(capsys) -> None:
    _need_disassembler()
    assert ablation.main(["hopper_ws", "--compile-only", "--only", "no epilogue"]) == 0
    out = capsys.readouterr().out
    assert "hopper_ws   unchanged" in out and "REFUSED" in out


@pytest.mark.gpu
def test_gpu_run_prints_a_table(capsys) -> None:
    assert ablation.main(["hopper_ws", "--shape", "2048", "--seconds", "0.3", "--only", "no TMA store"]) == 0
    out = capsys.readouterr().out
    assert "| hopper_ws | no TMA store |" in out and "cuBLAS:" in out
