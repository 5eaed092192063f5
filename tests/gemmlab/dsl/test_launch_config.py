"""A DSL kernel's shared memory: the dynamic size its launch asks for is read from the host IR, so the
resource line no longer shows only the cubin's small static part (1024 B where the launch takes 16 KiB)."""
from __future__ import annotations

import pytest
import torch

import gemmlab.dsl as dsl
from gemmlab.dsl.launch_config import dynamic_smem_bytes
from gemmlab.compiling.resources import Resources

STRUCT = "!llvm.struct<(array<3 x i32>, array<3 x i32>, i64, ptr, ptr, i32)>"


def host_function(name: str, smem: str) -> str:
    """The part of a host function that fills a launch config: ``smem`` is the stored SSA value's definition."""
    return f"""
  llvm.func @{name}(%arg0: !llvm.ptr) {{
    %7 = llvm.mlir.constant(99 : i64) : i64
    {smem}
    %42 = llvm.alloca %11 x {STRUCT} : (i32) -> !llvm.ptr
    %48 = llvm.getelementptr %42[0, 2] : (!llvm.ptr) -> !llvm.ptr, {STRUCT}
    llvm.store %9, %48 : i64, !llvm.ptr
  }}"""


def test_constant_launch_size_is_read() -> None:
    assert dynamic_smem_bytes(host_function("f", "%9 = llvm.mlir.constant(16640 : i64) : i64")) == 16640


def test_ssa_names_are_local_to_their_function() -> None:
    other = "  llvm.func @g() {\n    %9 = llvm.mlir.constant(5 : i64) : i64\n  }"
    ir = host_function("f", "%9 = llvm.mlir.constant(16640 : i64) : i64") + "\n" + other
    assert dynamic_smem_bytes(ir) == 16640


def test_run_time_size_or_no_launch_is_unknown() -> None:
    assert dynamic_smem_bytes(host_function("f", "%9 = llvm.load %arg0 : !llvm.ptr -> i64")) is None
    assert dynamic_smem_bytes("llvm.func @f() {\n}") is None


def test_summary_shows_static_and_dynamic_parts() -> None:
    base = dict(registers=40, static_smem_bytes=1024, spill_stores_bytes=0, spill_loads_bytes=0,
                stack_frame_bytes=0, max_threads_per_block=1024, const_bytes=400)
    assert Resources(**base).summary() == "40 regs, 1024 B smem, no spills"
    assert "1024 B static + 16640 B dynamic smem" in Resources(**base, dynamic_smem_bytes=16640).summary()
    assert "sized at launch" in Resources(**base, dynamic_smem_bytes=None).summary()
    assert ("dynamic shared memory", "16640 B") == Resources(**base, dynamic_smem_bytes=16640).rows()[2][:2]


@pytest.mark.slow
def test_a_dsl_gemm_reports_the_shared_memory_its_launch_asks_for() -> None:
    from tests.dsl_kernels import tensorop_gemm

    A, B, D = torch.empty(256, 64, dtype=torch.float16), torch.empty(256, 64, dtype=torch.float16), \
        torch.empty(256, 256, dtype=torch.float16)
    res = dsl.compile(tensorop_gemm.gemm, A, B, D, arch="sm_90a").resources
    elems = (tensorop_gemm.BM + tensorop_gemm.BN) * tensorop_gemm.BK * tensorop_gemm.STAGES
    assert res.dynamic_smem_bytes == 2 * elems, res
