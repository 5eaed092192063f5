"""Registers and shared memory of a kernel, read from its cubin.

The CuTe DSL runs ptxas inside its own library and does not hand us ptxas's report, and NVRTC's
log does not always carry it either (on a GPU host whose process has not loaded torch's CUDA
libraries first, the log came back empty), but the cubin (an ELF file) records what we need: each kernel's ``.text.<name>`` section carries
its register count in the top byte of ``sh_info``, ``.nv.shared.<name>`` is its static
shared memory, ``.nv.constant0.<name>`` its parameter bank, and the global ``.nv.info``
table holds each function's register count and stack frame (by symbol index); the kernel's own
``.nv.info.<name>`` table (or, from older ptxas, the text section's flags) its named-barrier
count. Spills are not recorded in a cubin: the caller counts them in the SASS
(``gemmlab.compiling.sass.spill_bytes``) and passes them in.
"""
from __future__ import annotations

import subprocess

import struct

from gemmlab.compiling.elf import by_name, section_size
from gemmlab.compiling.resources import Resources, max_threads_for_registers, max_threads_from_ptx

_EIATTR_FRAME_SIZE = 0x11
_EIATTR_REGCOUNT = 0x2F
_EIATTR_NUM_BARRIERS = 0x4C
_SHF_BARRIERS_SHIFT = 20


def _nv_info_records(data: bytes) -> list[tuple[int, bytes]]:
    """(attribute, payload) records of an .nv.info table (format u8, attribute u8, u16, payload)."""
    out, pos = [], 0
    while pos + 4 <= len(data):
        fmt, code = data[pos], data[pos + 1]
        if fmt == 0x04:  # EIFMT_SVAL: a u16 size, then that many bytes
            size, = struct.unpack_from("<H", data, pos + 2)
            out.append((code, data[pos + 4:pos + 4 + size]))
            pos += 4 + size
        else:  # EIFMT_NVAL / EIFMT_HVAL: the u16 itself is the value
            out.append((code, data[pos + 2:pos + 4]))
            pos += 4
    return out


def _per_symbol(info: bytes, attr: int, symbol: int) -> int | None:
    """A per-function attribute of the global .nv.info: payload (symbol index u32, value u32)."""
    for code, payload in _nv_info_records(info):
        if code == attr and len(payload) >= 8:
            sym, value = struct.unpack_from("<II", payload)
            if sym == symbol:
                return value
    return None


def _kernel_attr(info: bytes, attr: int) -> int | None:
    """A small attribute of a kernel's own .nv.info.<name> table (its value in the record's u16)."""
    for code, payload in _nv_info_records(info):
        if code == attr and len(payload) == 2:
            return struct.unpack("<H", payload)[0]
    return None


def resources(cubin: bytes, ptx: str = "", kernel: str | None = None,
              spills: tuple[int, int] = (0, 0)) -> tuple[str, Resources]:
    """(kernel name, Resources) of ``kernel`` (default: the first kernel in the cubin).

    ``spills``: (store, load) bytes of register spills, which the cubin does not record."""
    secs = by_name(cubin)
    names = [n[len(".text."):] for n in secs if n.startswith(".text.")]
    if not names:
        raise ValueError("the cubin holds no kernel")
    name = kernel if kernel in names else names[0]
    text = secs[f".text.{name}"]
    symbol = text.info & 0xFFFFFF  # low bits: the function's symbol; old cubins keep registers on top
    glob = secs[".nv.info"].data if ".nv.info" in secs else b""
    registers = _per_symbol(glob, _EIATTR_REGCOUNT, symbol) or (text.info >> 24) & 0xFF
    smem = section_size(secs, f".nv.shared.{name}")
    const = section_size(secs, f".nv.constant0.{name}")
    frame = _per_symbol(glob, _EIATTR_FRAME_SIZE, symbol) or 0
    own = secs[f".nv.info.{name}"].data if f".nv.info.{name}" in secs else b""
    # Newer ptxas records the named-barrier count as an attribute, older ones in the text section's flags.
    barriers = _kernel_attr(own, _EIATTR_NUM_BARRIERS)
    if barriers is None:
        barriers = (text.flags >> _SHF_BARRIERS_SHIFT) & 0x7F
    by_regs = max_threads_for_registers(registers)
    by_ptx = max_threads_from_ptx(ptx, name) if ptx else None
    return name, Resources(
        registers=registers,
        static_smem_bytes=smem,
        spill_stores_bytes=spills[0],
        spill_loads_bytes=spills[1],
        stack_frame_bytes=frame,
        max_threads_per_block=min(by_regs, by_ptx) if by_ptx else by_regs,
        const_bytes=const,
        barriers=barriers,
    )


def resources_with_spills(cubin: bytes, ptx: str = "", kernel: str | None = None) -> tuple[str, Resources] | None:
    """(kernel name, Resources) from the cubin, with spills counted in the SASS; None when the
    cubin cannot be read. Spilled registers live in the stack frame, so only a kernel with one is
    disassembled (about 0.3 s)."""
    from gemmlab.errors import ToolchainError
    from gemmlab.compiling.sass import disassemble, disassembler, spill_bytes

    if not cubin:
        return None
    try:
        name, res = resources(cubin, ptx, kernel)
    except (ValueError, KeyError, IndexError):
        return None
    if res.stack_frame_bytes and disassembler() is not None:
        try:
            spills = spill_bytes(disassemble(cubin, name))
        except (ToolchainError, OSError, subprocess.SubprocessError):
            return name, res
        name, res = resources(cubin, ptx, kernel, spills=spills)
    return name, res
