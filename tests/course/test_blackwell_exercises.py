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
    assert [e for e in events if e.startswith("init")] == [f"init {b}" for b in ns["bw_gemm_barriers"](stages)]
    waits = [e for e in events if e.startswith("wait ")]
    assert waits == ([f"wait empty[{t % stages}] {((t // stages) % 2) ^ 1}" for t in range(k)]      # producer
                     + [f"wait full[{t % stages}] {(t // stages) % 2}" for t in range(k)]         # MMA warp
                     + ["wait acc_full 0"])                                                     # epilogue
    assert [e for e in events if e.startswith("commit")] == [f"commit empty[{t % stages}]" for t in range(k)] + \
        ["commit acc_full"]
    assert events.count("mma") == 4 * k and events.count("tma") == 2 * k


def test_event_reader_resolves_registers_immediates_and_barriers(ns: dict) -> None:
    ptx = """
    shfl.sync.idx.b32 	%r1, %r18, 0, 31, -1;
    add.s32 	%r29, %r1, 16;
    mov.b32 	%r30, %r29;
    mbarrier.init.shared.b64 	[%r1], %r21;
    mbarrier.init.shared.b64 	[%r1+16], %r21;
    mov.b32 	%r22, 256;
    tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 	[%r2], %r22;
    mbarrier.try_wait.parity.shared.b64 P1, [%r1+8], 1, 10000000;
    mbarrier.try_wait.parity.shared.b64 P1, [%r30], %r9, 10000000;
    elect.sync 	%r61|%p32, -1;
    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 	[%r29];
    tcgen05.ld.sync.aligned.32x32b.x16.b32 {%r40, %r41}, [%r54];
    add.s32 	%r55, %r54, 16;
    tcgen05.ld.sync.aligned.32x32b.x16.b32 {%r42, %r43}, [%r55];
    cvt.rn.f16x2.f32 	%r44, %r43, %r42;
    tcgen05.wait::ld.sync.aligned;
    tcgen05.dealloc.cta_group::1.sync.aligned.b32 	%r8, %r22;
    """
    assert ns["tcgen05_events"](ptx, ("full", "empty")) == [
        "init full", "init empty", "alloc 256", "wait bar@8 1", "wait empty ?", "elect", "commit empty", "ld x16",
        "ld x16", "wait::ld", "dealloc 256"]
    assert ns["tmem_loads"](ptx) == [(("%r54", 0), 16, False), (("%r54", 16), 16, True)]   # converted before the wait


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


def test_operand_check_fails_the_k_loops_that_the_events_cannot_tell_apart(ns: dict) -> None:
    """ACCUMULATE reset every k-tile, never reset, or every k-tile reading slot 0: the same events, wrong
    results. The check reads each tcgen05.mma's predicate and descriptors from the solution's own PTX,
    edited the way each mistake would compile."""
    import re

    ptx, k, stages = ns["bw_gemm_built"].ptx, ns["BW_TEST_K_TILES"], ns["BW_STAGES"]
    check = ns["check_bw_operands"]
    assert check(ptx, k, stages)
    ops = ns["bw_mma_operands"](ptx)
    per_tile = len(ops) // k
    assert [f for _, _, f in ops] == ["0"] + ["-1"] * (len(ops) - 1)
    mma = [m.start() for m in re.finditer(r"tcgen05\.mma", ptx)]

    def set_pred(text: str, index: int, value: str) -> str:
        pred = re.search(r"(%p\d+)\s*;", text[mma[index]:]).group(1)
        return re.sub(rf"mov\.pred\s+{re.escape(pred)},\s*-?\d+;", f"mov.pred {pred}, {value};", text)

    with pytest.raises(AssertionError, match="k-tile 1, k-block 0 overwrites"):
        check(set_pred(ptx, per_tile, "0"), k, stages)                 # ACCUMULATE False again at k-tile 1
    with pytest.raises(AssertionError, match="holds garbage"):
        check(set_pred(ptx, 0, "-1"), k, stages)                       # never False
    line0 = ptx[mma[0]:ptx.index(";", mma[0])]
    line1 = ptx[mma[per_tile]:ptx.index(";", mma[per_tile])]
    a0, a1 = line0.split(",")[1], line1.split(",")[1]                  # the A descriptor operands
    slot0 = ptx.replace(line1, line1.replace(a1, a0, 1))               # k-tile 1 reads slot 0's descriptor
    with pytest.raises(AssertionError, match="same shared-memory descriptors"):
        check(slot0, k, stages)
