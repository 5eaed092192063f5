"""Load an x86-64 ELF relocatable object (a ``.o``) into this process and find its functions.

Why: a CuTe DSL compile can export its host launch code as an object file (``export_to_c``).
Recording what that code launches (:mod:`gemmlab.dsl.host_recording`) means running it against
CUDA functions of our own that write the launch down instead of making it; no linker or compiler
is needed for that, and none is installed on every grader. This module is that loader: it maps the
object's sections, gives every external symbol the address the caller provides (a ctypes
callback) and applies the relocations the DSL's code uses (its large code model: ``GOT64``,
``GOTOFF64``, ``GOTPC64``, ``PC64``) and the common small-model ones.

It loads only what it understands: an object of another machine or class, a relocation type not
listed, an undefined symbol the caller did not provide or a 32-bit field that overflows is an
:class:`ElfObjectError` that names it. The code runs in this process with its rights; callers run
it only where that code could run anyway (the process that compiled it).
"""
from __future__ import annotations

import ctypes
import mmap
import struct
from dataclasses import dataclass
from typing import Mapping

from gemmlab.errors import GemmlabError

PAGE = mmap.PAGESIZE
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_RELA, SHT_NOBITS = 1, 2, 3, 4, 8
SHF_ALLOC = 0x2
SHN_UNDEF, SHN_ABS, SHN_COMMON = 0, 0xFFF1, 0xFFF2
EM_X86_64 = 62

# Relocation types (System V AMD64 ABI): name, size in bytes, and whether the value is signed 32-bit.
R_64, R_PC32, R_PLT32, R_32, R_32S = 1, 2, 4, 10, 11
R_GOTPCREL, R_GOTPCRELX, R_REX_GOTPCRELX = 9, 41, 42
R_PC64, R_GOTOFF64, R_GOTPC32, R_GOT64, R_GOTPCREL64, R_GOTPC64 = 24, 25, 26, 27, 28, 29
_SIZE = {R_64: 8, R_PC32: 4, R_PLT32: 4, R_32: 4, R_32S: 4, R_GOTPCREL: 4, R_GOTPCRELX: 4, R_REX_GOTPCRELX: 4,
         R_PC64: 8, R_GOTOFF64: 8, R_GOTPC32: 4, R_GOT64: 8, R_GOTPCREL64: 8, R_GOTPC64: 8}
_NEEDS_GOT_ENTRY = {R_GOTPCREL, R_GOTPCRELX, R_REX_GOTPCRELX, R_GOT64, R_GOTPCREL64}


class ElfObjectError(GemmlabError):
    """The object file cannot be loaded here; the message says what it holds that the loader does not support."""


@dataclass(frozen=True)
class _Section:
    name: str
    kind: int
    flags: int
    offset: int
    size: int
    link: int
    info: int
    align: int


@dataclass(frozen=True)
class _Symbol:
    name: str
    section: int
    value: int


def _sections(data: bytes) -> list[_Section]:
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ElfObjectError("not a 64-bit little-endian ELF object.")
    e_type, e_machine = struct.unpack_from("<HH", data, 16)
    if e_type != 1 or e_machine != EM_X86_64:
        raise ElfObjectError(f"not an x86-64 relocatable object (type {e_type}, machine {e_machine}).")
    shoff, = struct.unpack_from("<Q", data, 40)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 58)
    raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = raw[shstrndx][4]

    def name(offset: int) -> str:
        end = data.index(b"\0", names_at + offset)
        return data[names_at + offset:end].decode()

    return [_Section(name(r[0]), r[1], r[2], r[4], r[5], r[6], r[7], max(1, r[8])) for r in raw]


def _symbols(data: bytes, sections: list[_Section]) -> list[_Symbol]:
    table = next((s for s in sections if s.kind == SHT_SYMTAB), None)
    if table is None:
        return []
    strings = sections[table.link]
    out = []
    for i in range(table.size // 24):
        st_name, _info, _other, shndx, value, _size = struct.unpack_from("<IBBHQQ", data, table.offset + 24 * i)
        end = data.index(b"\0", strings.offset + st_name)
        out.append(_Symbol(data[strings.offset + st_name:end].decode(), shndx, value))
    return out


class LoadedObject:
    """An object file mapped into memory, relocated, its functions callable through :meth:`function`."""

    def __init__(self, data: bytes, externals: Mapping[str, int]) -> None:
        sections = _sections(data)
        symbols = _symbols(data, sections)
        if any(s.section == SHN_COMMON for s in symbols):
            raise ElfObjectError("the object has common symbols, which this loader does not place.")
        # Place every allocated section, each at its alignment, then a GOT of one slot per symbol.
        base_of: dict[int, int] = {}
        size = 0
        for index, sec in enumerate(sections):
            if sec.flags & SHF_ALLOC and sec.size:
                size = -(-size // sec.align) * sec.align
                base_of[index] = size
                size += sec.size
        got_offset = -(-size // 16) * 16
        total = -(-(got_offset + 8 * max(1, len(symbols))) // PAGE) * PAGE
        self._memory = mmap.mmap(-1, total, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self._memory))
        for index, offset in base_of.items():
            sec = sections[index]
            if sec.kind != SHT_NOBITS:
                self._memory[offset:offset + sec.size] = data[sec.offset:sec.offset + sec.size]
        got = self.base + got_offset
        self.addresses: dict[str, int] = {}
        address_of: list[int | None] = []
        missing = []
        for sym in symbols:
            if sym.section == SHN_UNDEF:
                if not sym.name:
                    address_of.append(0)
                elif sym.name == "_GLOBAL_OFFSET_TABLE_":
                    address_of.append(got)
                elif sym.name in externals:
                    address_of.append(int(externals[sym.name]))
                else:
                    address_of.append(None)
                    missing.append(sym.name)
            elif sym.section == SHN_ABS:
                address_of.append(sym.value)
            elif sym.section in base_of:
                address_of.append(self.base + base_of[sym.section] + sym.value)
                if sym.name:
                    self.addresses[sym.name] = self.base + base_of[sym.section] + sym.value
            else:
                address_of.append(0)  # a symbol of a section not loaded (debug info, notes)
        slots: dict[int, int] = {}
        for sec in sections:
            if sec.kind != SHT_RELA or sec.info not in base_of:
                continue
            target = self.base + base_of[sec.info]
            for i in range(sec.size // 24):
                r_offset, r_info, addend = struct.unpack_from("<QQq", data, sec.offset + 24 * i)
                sym_index, kind = r_info >> 32, r_info & 0xFFFFFFFF
                if kind not in _SIZE:
                    raise ElfObjectError(f"relocation type {kind} in {sections[sec.info].name} is not supported.")
                S = address_of[sym_index]
                if S is None:
                    continue  # reported below, with every other missing name
                if kind in _NEEDS_GOT_ENTRY and sym_index not in slots:
                    slots[sym_index] = len(slots)
                    struct.pack_into("<Q", self._memory, got_offset + 8 * slots[sym_index], S)
                P = target + r_offset
                G = 8 * slots.get(sym_index, 0)
                value = {
                    R_64: S + addend, R_32: S + addend, R_32S: S + addend,
                    R_PC32: S + addend - P, R_PLT32: S + addend - P, R_PC64: S + addend - P,
                    R_GOTPCREL: got + G + addend - P, R_GOTPCRELX: got + G + addend - P,
                    R_REX_GOTPCRELX: got + G + addend - P, R_GOTPCREL64: got + G + addend - P,
                    R_GOTOFF64: S + addend - got, R_GOTPC32: got + addend - P, R_GOTPC64: got + addend - P,
                    R_GOT64: G + addend,
                }[kind]
                where = P - self.base
                if _SIZE[kind] == 8:
                    struct.pack_into("<Q", self._memory, where, value & 0xFFFFFFFFFFFFFFFF)
                elif kind == R_32:
                    if not 0 <= value < 2**32:
                        raise ElfObjectError(f"relocation at {where:#x} does not fit 32 bits.")
                    struct.pack_into("<I", self._memory, where, value)
                else:
                    if not -2**31 <= value < 2**31:
                        raise ElfObjectError(f"relocation at {where:#x} is out of 32-bit range.")
                    struct.pack_into("<i", self._memory, where, value)
        if missing:
            raise ElfObjectError(f"the object calls functions that are not provided: {', '.join(sorted(set(missing)))}.")

    def function(self, name: str, restype: object, *argtypes: object) -> ctypes._CFuncPtr:
        """The object's function ``name`` as a ctypes function."""
        if name not in self.addresses:
            raise ElfObjectError(f"the object defines no symbol {name!r}.")
        return ctypes.CFUNCTYPE(restype, *argtypes)(self.addresses[name])

    def names(self) -> list[str]:
        """Every symbol the object defines."""
        return sorted(self.addresses)


__all__ = ["ElfObjectError", "LoadedObject"]
