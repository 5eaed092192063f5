"""Checks of a compiled kernel's resources that fail, rather than pass, when the resources could not be read.

Why: a kernel whose resources were not read reports none (``None`` from a DSL compile whose cubin could not
be read), or zeros (an NVRTC compile whose log had no ptxas report and whose cubin could not be read), and a
"no spills" check on either passes whatever the kernel does. Spills read from a cubin are counted in its
SASS, so a kernel with a stack frame has no spill count without the disassembler.
"""
from __future__ import annotations

from gemmlab.compiling.resources import Resources


def read_resources(resources: Resources | None, what: str) -> Resources:
    """``resources``, asserting that they were read (registers and, where a stack frame may hold them, spills)."""
    assert resources is not None, f"{what}: its resources could not be read from its cubin"
    assert resources.registers > 0, f"{what}: no register count was read (no ptxas report, no readable cubin): {resources}"
    if resources.stack_frame_bytes:
        from gemmlab.compiling.sass import disassembler

        assert disassembler() is not None, (
            f"{what} keeps {resources.stack_frame_bytes} B in a stack frame, and whether they are spills is read "
            "from its SASS: install nvdisasm (nvidia-cuda-nvdisasm, a gemmlab dependency)")
    return resources


def assert_no_spills(resources: Resources | None, what: str) -> None:
    """The kernel's resources were read and show no register spills."""
    read = read_resources(resources, what)
    assert not read.spills, f"{what} spills: {read}"
