"""Registers, shared memory, spills and stack of a compiled kernel.

These numbers decide occupancy and often explain a slow kernel (spills, too many
registers), so the course shows them after every compile. They come from ptxas's
verbose report, which NVRTC puts in its log when compiling to a cubin.
"""
from __future__ import annotations

import html
import re
from dataclasses import asdict, dataclass

#: Hardware facts used when the PTX does not pin the block size (all archs sm_70..sm_100).
REGISTER_FILE = 65536
REGISTER_ALLOC_UNIT = 256  # registers are given out per warp in chunks of 256
SUB_PARTITIONS = 4  # each SM splits its register file between 4 schedulers; a warp lives in one
MAX_THREADS = 1024
MAX_REGISTERS_PER_THREAD = 255


@dataclass(frozen=True)
class Resources:
    """Per-kernel resource use; ``max_threads_per_block`` is what a launch may ask for."""

    registers: int
    static_smem_bytes: int
    spill_stores_bytes: int
    spill_loads_bytes: int
    stack_frame_bytes: int
    max_threads_per_block: int
    const_bytes: int
    barriers: int = 0
    #: Shared memory the launch adds dynamically: 0 for none, None where it is sized at run time.
    #: The CuTe DSL allocates all of a kernel's shared memory this way (its cubin's static part is
    #: only the alignment of that region), so a DSL kernel's line shows both.
    dynamic_smem_bytes: int | None = 0

    @property
    def spills(self) -> bool:
        return bool(self.spill_stores_bytes or self.spill_loads_bytes)

    def rows(self) -> list[tuple[str, str, str]]:
        """(label, value, why it matters) rows for tables."""
        return [
            ("registers / thread", str(self.registers), "more registers, fewer resident warps"),
            ("static shared memory", f"{self.static_smem_bytes} B", "per block; limits blocks per SM"),
            *([("dynamic shared memory", self._dynamic_text(), "per block, asked for at launch")]
              if self.dynamic_smem_bytes != 0 else []),
            ("spill stores / loads", f"{self.spill_stores_bytes} B / {self.spill_loads_bytes} B",
             "non-zero means local-memory traffic: usually slow"),
            ("stack frame", f"{self.stack_frame_bytes} B", "local arrays indexed at run time live here"),
            ("max threads / block", str(self.max_threads_per_block), "from __launch_bounds__ or the register count"),
            ("constant memory", f"{self.const_bytes} B", "kernel constants (bank 0 holds the parameters)"),
            ("barriers", str(self.barriers), "named barriers used"),
        ]

    def summary(self) -> str:
        """One line for the %%kernel magic."""
        spill = "no spills" if not self.spills else f"SPILLS {self.spill_stores_bytes}B st/{self.spill_loads_bytes}B ld"
        if self.dynamic_smem_bytes == 0:
            return f"{self.registers} regs, {self.static_smem_bytes} B smem, {spill}"
        return f"{self.registers} regs, {self.static_smem_bytes} B static + {self._dynamic_text()} dynamic smem, {spill}"

    def _dynamic_text(self) -> str:
        return "sized at launch" if self.dynamic_smem_bytes is None else f"{self.dynamic_smem_bytes} B"

    def __str__(self) -> str:
        width = max(len(r[0]) for r in self.rows())
        vwidth = max(len(r[1]) for r in self.rows())
        return "\n".join(f"{label:<{width}}  {value:>{vwidth}}   {why}" for label, value, why in self.rows())

    def _repr_html_(self) -> str:
        cells = []
        for label, value, why in self.rows():
            shown = html.escape(value)
            if label.startswith("spill") and self.spills:
                shown = f"<b style='color:#c00'>{shown}</b>"
            cells.append(
                f"<tr><td style='text-align:left'>{html.escape(label)}</td>"
                f"<td style='text-align:right'>{shown}</td>"
                f"<td style='text-align:left;color:#666'>{html.escape(why)}</td></tr>"
            )
        return f"<table><tr><th>resource</th><th>value</th><th>why it matters</th></tr>{''.join(cells)}</table>"

    def to_dict(self) -> dict:
        return asdict(self)


def max_threads_for_registers(registers: int) -> int:
    """Largest block (a multiple of 32) whose registers fit in one SM's register file.

    The file is split in four quarters and a warp's registers come from one quarter,
    which is why 201 registers allow 256 threads, not 288 (same rule as cuda_occupancy.h).
    """
    if registers <= 0:
        return MAX_THREADS
    per_warp = -(-registers * 32 // REGISTER_ALLOC_UNIT) * REGISTER_ALLOC_UNIT
    warps = SUB_PARTITIONS * ((REGISTER_FILE // SUB_PARTITIONS) // per_warp)
    return max(0, min(MAX_THREADS, warps * 32))


def _entry_block(ptxas_log: str, lowered_name: str) -> str:
    """The lines of the ptxas report that belong to this entry function."""
    lines = ptxas_log.splitlines()
    start = None
    for i, line in enumerate(lines):
        if re.search(rf"Compiling entry function '{re.escape(lowered_name)}'", line):
            start = i
            break
    if start is None:
        return ""
    block = []
    for line in lines[start + 1:]:
        if "Compiling entry function" in line:
            break
        block.append(line)
    return "\n".join(block)


def _number(pattern: str, text: str) -> int:
    match = re.search(pattern, text)
    return int(match.group(1)) if match else 0


def max_threads_from_ptx(ptx: str, lowered_name: str) -> int | None:
    """The block-size cap that ``__launch_bounds__`` put in the PTX (``.maxntid x, y, z``)."""
    match = re.search(rf"\.entry\s+{re.escape(lowered_name)}\s*\(", ptx)
    if not match:
        return None
    close = ptx.find(")", match.end())
    brace = ptx.find("{", close)
    header = ptx[close:brace if brace >= 0 else len(ptx)]
    ntid = re.search(r"\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", header)
    if not ntid:
        return None
    total = 1
    for group in ntid.groups():
        if group:
            total *= int(group)
    return total


def has_report(log: str, lowered_name: str) -> bool:
    """Whether the NVRTC log holds ptxas's ``-v`` report for this entry function."""
    return "Used " in _entry_block(log, lowered_name)


def parse(log: str, ptx: str, lowered_name: str) -> Resources:
    """Resources of ``lowered_name`` from the NVRTC log (ptxas -v report) and its PTX."""
    block = _entry_block(log, lowered_name)
    registers = _number(r"Used (\d+) registers", block)
    const = sum(int(n) for n in re.findall(r"(\d+) bytes cmem\[\d+\]", block))
    by_regs = max_threads_for_registers(registers)
    by_ptx = max_threads_from_ptx(ptx, lowered_name)
    return Resources(
        registers=registers,
        static_smem_bytes=_number(r"(\d+) bytes smem", block),
        spill_stores_bytes=_number(r"(\d+) bytes spill stores", block),
        spill_loads_bytes=_number(r"(\d+) bytes spill loads", block),
        stack_frame_bytes=_number(r"(\d+) bytes stack frame", block),
        max_threads_per_block=min(by_regs, by_ptx) if by_ptx else by_regs,
        const_bytes=const,
        barriers=_number(r"used (\d+) barriers", block),
    )

