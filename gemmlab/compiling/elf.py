"""The sections of a cubin (a 64-bit little-endian ELF file), for reading sizes ptxas does not report.

Both compilers need it: NVRTC's ptxas 13 leaves the constant bank out of its report for sm_90,
and the CuTe DSL hands over no report at all (``gemmlab.compiling.cubin`` reads everything from here).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

_SHT_NOBITS = 8


@dataclass(frozen=True)
class Section:
    """One ELF section; ``size`` comes from the header (NOBITS sections, e.g. shared memory, have no bytes)."""

    name: str
    type: int
    flags: int
    info: int
    size: int
    data: bytes


def sections(elf: bytes) -> list[Section]:
    """All sections of a 64-bit little-endian ELF (what every CUDA cubin is); ValueError for anything else."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    raw = [struct.unpack_from("<IIQQQQII", elf, shoff + i * shentsize) for i in range(shnum)]
    str_off, str_size = raw[shstrndx][4], raw[shstrndx][5]
    names = elf[str_off:str_off + str_size]

    def name_at(i: int) -> str:
        return names[i:names.index(b"\0", i)].decode(errors="replace")

    return [
        Section(name_at(name), stype, flags, info, size, b"" if stype == _SHT_NOBITS else elf[offset:offset + size])
        for name, stype, flags, _addr, offset, size, _link, info in raw
    ]


def by_name(elf: bytes) -> dict[str, Section]:
    """The sections of ``elf`` keyed by name."""
    return {s.name: s for s in sections(elf)}


def section_size(secs: dict[str, Section], name: str) -> int:
    """Size of section ``name``, 0 if the cubin has none."""
    return secs[name].size if name in secs else 0


def constant_bank_bytes(elf: bytes, kernel: str) -> int:
    """Size of ``kernel``'s constant bank 0 (its parameters and the driver's words), 0 if absent."""
    return section_size(by_name(elf), f".nv.constant0.{kernel}")
