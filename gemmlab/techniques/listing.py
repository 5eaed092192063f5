"""A cubin's machine code as data: its functions, their labels, and each SASS instruction split into parts.

Why: a technique check asks what the GPU will execute, so it reads the SASS of the very cubin that is
launched, not the PTX it came from (ptxas decides what really runs, and PTX text can be written by anyone).
``nvdisasm -c`` prints one instruction a line::

    /*0460*/                   LDGSTS.E.BYPASS.128 [R19], desc[UR8][R8.64] ;
    /*04f0*/               @P0 BRA `(.L_x_1) ;

:func:`parse` turns that text into :class:`Listing` → :class:`Section` (one per ``.text`` section:
a kernel, or a device function the compiler kept out of line) → :class:`Instruction`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..errors import ToolchainError
from gemmlab.compiling.signature import split_top_level

_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_ENTRY = re.compile(r'^\s*\.other\s+([^,\s]+)\s*,\s*@"[^"]*STO_CUDA_ENTRY')
_LABEL = re.compile(r"^\s*([.$\w][\w.$@]*):\s*$")
_INSTRUCTION = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s*(.*?)\s*;?\s*(?:/\*.*)?$")
_PREDICATE = re.compile(r"^(@!?U?P(?:T|\d+))\s+")
_TARGET = re.compile(r"^\s*\.target\s+(sm_\w+)")

#: Predicates that are never true: ptxas pads with ``@!PT LDS RZ, [RZ]``, and a student may hide an
#: instruction the same way. Such an instruction never executes, so no check counts it.
NEVER = ("@!PT", "@!UPT")


def split_operands(text: str) -> tuple[str, ...]:
    """Operands at top-level commas: ``desc[UR8][R8.64]`` and ``c[0x0][0x28]`` stay one operand."""
    return tuple(part.strip() for part in split_top_level(text) if part.strip())


@dataclass(frozen=True)
class Instruction:
    """One SASS instruction: where it is, its guard predicate, its opcode and operands."""

    address: int
    opcode: str                 # with its modifiers, e.g. "LDGSTS.E.BYPASS.128"
    operands: tuple[str, ...]
    predicate: str = ""         # "@P0", "@!P1", "@!PT", or "" when it always executes

    @property
    def base(self) -> str:
        """The opcode without modifiers: ``LDGSTS``."""
        return self.opcode.split(".", 1)[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])

    @property
    def never_runs(self) -> bool:
        """Guarded by a predicate that is never true (``@!PT``)."""
        return self.predicate in NEVER

    @property
    def conditional(self) -> bool:
        """Guarded by a predicate that may be false."""
        return bool(self.predicate) and self.predicate not in ("@PT", "@UPT") and not self.never_runs

    def text(self) -> str:
        """As nvdisasm prints it (without the address)."""
        pred = f"{self.predicate} " if self.predicate else ""
        return f"{pred}{self.opcode} {', '.join(self.operands)}".strip()

    def __str__(self) -> str:
        return f"/*{self.address:04x}*/ {self.text()}"


@dataclass(frozen=True)
class Section:
    """The code of one ``.text`` section: a kernel (``entry``) or an out-of-line device function."""

    name: str
    entry: bool
    instructions: tuple[Instruction, ...]
    labels: dict[str, int] = field(default_factory=dict)   # label -> address of the instruction after it

    def at(self, address: int) -> int | None:
        """Index of the instruction at ``address`` (None if there is none)."""
        lo, hi = 0, len(self.instructions)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.instructions[mid].address < address:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < len(self.instructions) and self.instructions[lo].address == address else None


@dataclass(frozen=True)
class Listing:
    """Every code section of one cubin, and the architecture it was built for."""

    arch: str
    sections: tuple[Section, ...]

    def kernels(self) -> list[Section]:
        return [s for s in self.sections if s.entry]

    def kernel(self, name: str | None = None) -> Section:
        """The kernel called ``name`` (its symbol, mangled or not); the only kernel when ``name`` is None."""
        kernels = self.kernels()
        if name is None:
            if len(kernels) != 1:
                raise ToolchainError(f"the cubin holds {len(kernels)} kernels ({', '.join(k.name for k in kernels)}): "
                                     "say which one to read.")
            return kernels[0]
        for k in kernels:
            if k.name == name:
                return k
        raise ToolchainError(f"the cubin holds no kernel {name!r} (it holds {', '.join(k.name for k in kernels)}).")

    def section_holding(self, label: str) -> tuple[Section, int] | None:
        """The section that defines ``label`` (a device function's symbol) and its address there."""
        for s in self.sections:
            if label in s.labels:
                return s, s.labels[label]
        return None


def parse(text: str) -> Listing:
    """The sections of ``nvdisasm -c`` output (``cuobjdump -sass`` output parses too, without labels)."""
    arch = ""
    sections: list[Section] = []
    entries: set[str] = set()
    name: str | None = None
    instructions: list[Instruction] = []
    labels: dict[str, int] = {}
    pending: list[str] = []

    def close() -> None:
        if name is not None:
            sections.append(Section(name, False, tuple(instructions), dict(labels)))

    for line in text.splitlines():
        if not arch and (m := _TARGET.match(line)):
            arch = m.group(1)
            continue
        if m := _SECTION.match(line):
            close()
            name, instructions, labels, pending = m.group(1), [], {}, []
            continue
        if m := _ENTRY.match(line):
            entries.add(m.group(1))
            continue
        if name is None:
            continue
        if m := _LABEL.match(line):
            pending.append(m.group(1))
            continue
        if m := _INSTRUCTION.match(line):
            body = m.group(2).strip().rstrip(";").strip()
            if not body:
                continue
            address = int(m.group(1), 16)
            predicate = ""
            if p := _PREDICATE.match(body):
                predicate, body = p.group(1), body[p.end():]
            opcode, _, rest = body.partition(" ")
            for label in pending:
                labels[label] = address
            pending = []
            instructions.append(Instruction(address, opcode, split_operands(rest), predicate))
    close()
    return Listing(arch, tuple(Section(s.name, s.name in entries, s.instructions, s.labels) for s in sections))


def branch_target(ins: Instruction, section: Section) -> int | None:
    """The address a branch or call jumps to: a label ``(.L_x_3)`` or a plain address ``0x4e0``."""
    for operand in reversed(ins.operands):
        text = operand.strip("` ")
        if text.startswith("(") and text.endswith(")"):
            text = text[1:-1].strip()
        if text in section.labels:
            return section.labels[text]
        if re.fullmatch(r"0x[0-9a-fA-F]+", text):
            return int(text, 16)
    return None


def call_target(ins: Instruction) -> str | None:
    """The symbol a ``CALL`` jumps to (a device function), as nvdisasm names it."""
    for operand in ins.operands:
        text = operand.strip("` ")
        if text.startswith("(") and text.endswith(")"):
            return text[1:-1].strip()
    return None


__all__ = ["Instruction", "Listing", "NEVER", "Section", "branch_target", "call_target", "parse", "split_operands"]
