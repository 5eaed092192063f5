"""Resources read from a cubin stand in for ptxas's report when NVRTC's log lacks it."""
from __future__ import annotations

from gemmlab.compiling import resources
from gemmlab.compiling.cubin import resources_with_spills
from gemmlab.compiling.compiler import compile_to

KERNEL = 'extern "C" __global__ void add1(float* x, int n) { int i = threadIdx.x; if (i < n) x[i] += 1.0f; }'


def test_the_cubin_reading_equals_the_report_it_replaces() -> None:
    c = compile_to(KERNEL, "add1", arch="sm_90a")
    lowered = "add1"
    report = "ptxas info    : Compiling entry function 'add1' for 'sm_90a'\nptxas info    : Used 8 registers"
    assert resources.has_report(report, lowered)
    assert not resources.has_report("", lowered)
    assert not resources.has_report(report.replace("'add1'", "'other'"), lowered)
    name, read = resources_with_spills(c.cubin, c.ptx, lowered)
    assert name == lowered and read.registers == c.resources.registers > 0
    assert read.static_smem_bytes == c.resources.static_smem_bytes
    assert resources_with_spills(b"", c.ptx) is None and resources_with_spills(b"not an elf", c.ptx) is None
