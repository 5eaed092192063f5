"""benchmarks/tensor_ceilings.py without a GPU: its instruction loops compile to the instructions they
are meant to time, with nothing in between that could slow them, and the FLOP count matches."""
from __future__ import annotations

import re

import pytest

import tensor_ceilings as tc  # noqa: E402


def _sass(source: str, name: str) -> str:
    import gemmlab
    from gemmlab.compiling import sass

    if sass.disassembler() is None:
        pytest.skip("nvdisasm is not installed")
    kernel = gemmlab.compile(source, name, arch="sm_90a")
    assert not kernel.resources.spills, kernel.resources.summary()
    return sass.disassemble(kernel.cubin, name)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_mma_sync_loop_is_only_hmma(dtype) -> None:
    code = _sass(tc.mma_sync_source(dtype), "mma_sync_loop")
    hmma = re.findall(r"HMMA\.16816\.F32(\.BF16)?\s", code)
    assert len(hmma) >= tc.MMA_CHAINS
    assert all(bool(h) == (dtype == "bfloat16") for h in hmma), "the loop multiplies the wrong type"
    assert "LDG" not in code.split("HMMA", 1)[1].rsplit("HMMA", 1)[0], "a global load inside the loop"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_wgmma_loop_keeps_a_group_in_flight(dtype) -> None:
    from gemmlab.compiling import sass

    code = _sass(tc.wgmma_source(dtype), "wgmma_loop")
    assert f"HGMMA.64x{tc.WGMMA_N}x16.F32" in code
    total, waiting = sass.wgmma_waits(code)
    assert 0 < waiting * tc.WGMMA_K_STEPS <= total, f"ptxas serialized the wgmma chain: {waiting} of {total} wait"


def test_flop_count_of_the_loops() -> None:
    mma = tc.Loop("mma.sync", None, grid=10, block=256, smem=0, iters=3)
    assert mma.flops == 2 * 10 * 8 * 3 * tc.MMA_CHAINS * 16 * 8 * 16
    wg = tc.Loop("wgmma", None, grid=10, block=256, smem=0, iters=3)
    assert wg.flops == 2 * 10 * 2 * 3 * tc.WGMMA_K_STEPS * 64 * tc.WGMMA_N * 16


def test_without_a_gpu_it_says_so(capsys, no_gpu) -> None:
    assert tc.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out
