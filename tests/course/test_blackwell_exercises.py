"""Notebook 07's Blackwell appendix without a Blackwell GPU: the solution kernels compile for sm_100a and
pass every test cell (visible and hidden), the PTX event reader the tests rely on reads what it should,
and, on an sm_100 GPU only, the GEMM is correct."""
from __future__ import annotations

import pytest
import torch

from tests.support import hopper07


@pytest.fixture(scope="module")
def ns() -> dict:
    return hopper07.blackwell_namespace()


@pytest.mark.parametrize("test_cell", ["test_bw_tile", "test_bw_grid", "test_bw_kloop", "test_bw_tmem",
                                       "test_bw_many_ctas"])
def test_solution_passes_the_blackwell_test_cells(ns: dict, test_cell: str) -> None:
    hopper07.run(ns, [test_cell])


def test_solution_events_are_the_rings(ns: dict) -> None:
    events = [e for e in ns["bw_gemm_events"] if e != "elect"]
    k, stages = ns["BW_TEST_K_TILES"], ns["BW_STAGES"]
    waits = [e for e in events if e.startswith("wait ")]
    assert waits == ([f"wait {((t // stages) % 2) ^ 1}" for t in range(k)]        # producer: empty[s]
                     + [f"wait {(t // stages) % 2}" for t in range(k)] + ["wait 0"])   # MMA warp, epilogue
    assert events.count("commit") == k + 1 and events.count("mma") == 4 * k and events.count("tma") == 2 * k


def test_event_reader_resolves_registers_and_immediates(ns: dict) -> None:
    ptx = """
    mov.b32 	%r22, 256;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 	[%r2], %r22;
    mbarrier.try_wait.parity.shared.b64 P1, [%r1+8], 1, 10000000;
    mbarrier.try_wait.parity.shared.b64 P1, [%r1], %r9, 10000000;
    elect.sync 	%r61|%p32, -1;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 	[%r29];
    tcgen05.ld.sync.aligned.32x32b.x16.b32 {%r1}, [%r54];
    tcgen05.wait::ld.sync.aligned;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 	%r8, %r22;
    """
    assert ns["tcgen05_events"](ptx) == ["alloc 256", "wait 1", "wait ?", "elect", "commit", "ld x16", "wait::ld",
                                         "dealloc 256"]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_blackwell_gemm_is_correct_on_sm100(dtype) -> None:
    import gemmlab

    if not gemmlab.gpu.current_arch().startswith("sm_10"):
        pytest.skip("the Blackwell GEMM runs only on an sm_100 GPU (B200, GB200)")
    ns = hopper07.blackwell_namespace()
    shapes = [(128, 128, 64), (128, 128, 64 * 9), (256, 384, 512), (1000, 1001, 999), (2048, 2048, 1024)]
    result = gemmlab.check_gemm(ns["blackwell_gemm"], dtype=dtype, shapes=shapes, timeout_s=300)
    assert result.passed, str(result)
