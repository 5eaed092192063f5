"""One kernel's machine code with everything the checks ask of it: its graph, its loops, where its
main loop is, the values in its registers and the asynchronous groups in flight.

Why one object: every check reads the same few analyses; each is computed once, when first asked.

The **main loops** are the loops that hold the kernel's tensor-core instructions: for each MMA, the
innermost loop around it (a k-block loop the compiler unrolled is no loop: the k-tile loop holds the
MMAs then). A kernel without MMAs (a copy kernel) has as main loops those that hold its copies into
shared memory. Checks that speak of "the main loop" must hold in *every* main loop: a kernel cannot
pass with one loop that shows the technique and another that does the work.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Iterable

from .cfg import ControlFlowGraph, Loop
from .groups import CP_ASYNC, WGMMA, Groups
from .listing import Instruction, Listing
from .semantics import ASYNC_COPIES, TENSOR_CORE, Effect, classify
from .values import Values

#: Regions a check can be asked about.
WHERES = ("anywhere", "main_loop", "prologue", "epilogue", "outside_main_loop")
_SPIN = {"SYNCS", "NANOSLEEP", "BRA", "NOP", "YIELD"}


@dataclass(frozen=True)
class Site:
    """An instruction at its place in the graph."""

    block: int
    index: int
    ins: Instruction

    @property
    def effect(self) -> Effect:
        return classify(self.ins)


class Program:
    """The machine code of one kernel of one image (a cubin), ready for technique checks."""

    def __init__(self, listing: Listing, kernel: str | None = None, label: str = "") -> None:
        self.listing = listing
        self.graph = ControlFlowGraph.of(listing, kernel)
        self.kernel = self.graph.name
        self.label = label or self.kernel
        self.arch = listing.arch

    # ---------------------------------------------------------------- instructions

    @cached_property
    def sites(self) -> list[Site]:
        """Every reachable instruction, in reverse postorder of its block."""
        return [Site(b, i, ins) for b in self.graph.order for i, ins in enumerate(self.graph.blocks[b].instructions)]

    def where(self, kind: str | Iterable[str], region: str = "anywhere") -> list[Site]:
        """The sites of instructions of ``kind`` (a kind of :data:`semantics.KINDS`, or several) in ``region``."""
        kinds = {kind} if isinstance(kind, str) else set(kind)
        blocks = self.region(region)
        return [s for s in self.sites if s.effect.kind in kinds and (blocks is None or s.block in blocks)]

    # ---------------------------------------------------------------- loops and regions

    @cached_property
    def main_loops(self) -> list[Loop]:
        """The loops around the tensor-core instructions (in a kernel without any, around its multiply-adds on the
        CUDA cores; in a copy kernel, around its copies into shared memory): for each, the innermost loop around
        it, or the innermost one around it that also fills shared memory (a k-block loop the compiler kept inside
        the k-tile loop is part of that loop, not the main loop)."""
        g = self.graph
        fills = self._copy_blocks
        for wanted in (lambda i: classify(i).kind in TENSOR_CORE, lambda i: classify(i).kind == "fma",
                       _fills_shared):
            if not any(wanted(s.ins) for s in self.sites):
                continue
            out: list[Loop] = []
            for i in g.loops_holding(wanted):
                chosen = i
                up = i
                while up is not None and not (g.loops[up].body & fills):
                    up = g.loops[up].parent
                if up is not None:
                    chosen = up
                loop = g.loops[chosen]
                if not self._spin(loop) and loop not in out:
                    out.append(loop)
            return out
        return []

    @cached_property
    def _copy_blocks(self) -> set[int]:
        """Blocks that copy global memory into shared memory: cp.async, TMA and bulk loads, and stores to shared
        memory of values loaded from global memory."""
        out: set[int] = set()
        for s in self.sites:
            e = s.effect
            if e.kind in ASYNC_COPIES:
                out.add(s.block)
            elif e.kind == "store" and e.space == "shared" and len(s.ins.operands) > 1 and any(
                    o.effect.kind == "load" and o.effect.space in ("global", "generic")
                    for o in self.origins(s, len(s.ins.operands) - 1)):
                out.add(s.block)
        return out

    def _spin(self, loop: Loop) -> bool:
        """A loop that only waits on an mbarrier or serializes a warp-wide instruction: not a program loop."""
        instructions = self.graph.instructions(loop.body)
        return all(i.base in _SPIN or i.never_runs for i in instructions) or _serializing(loop, self.graph)

    @cached_property
    def spin_blocks(self) -> set[int]:
        """Blocks of loops that only retry an mbarrier wait."""
        out: set[int] = set()
        for loop in self.graph.loops:
            if all(i.base in _SPIN or i.never_runs for i in self.graph.instructions(loop.body)):
                out |= loop.body
        return out

    def in_retry_loop(self, site: Site) -> bool:
        """Whether ``site`` sits in a loop ptxas writes to try an instruction again until it succeeds (an mbarrier
        wait, a TMEM allocation): its innermost loop sleeps (NANOSLEEP) between tries. ptxas 13.0 puts such a
        loop inline or out of line after the kernel's EXIT, where it repeats the instruction tried first."""
        loop = self.graph.loop_of(site.block)
        return loop is not None and any(i.base == "NANOSLEEP"
                                        for i in self.graph.instructions(self.graph.loops[loop].body))

    @cached_property
    def _regions(self) -> dict[str, set[int] | None]:
        g = self.graph
        inside: set[int] = set()
        before: set[int] = set()
        after: set[int] = set()
        for loop in self.main_loops:
            inside |= loop.body
        for loop in self.main_loops:
            before |= g.before(loop)
            after |= g.after(loop)
        before -= inside
        after -= inside
        every = set(g.order)
        return {"anywhere": None, "main_loop": inside, "prologue": before - after, "epilogue": after,
                "outside_main_loop": every - inside}

    def region(self, name: str) -> set[int] | None:
        """Blocks of a region (None: every block). ``prologue``/``epilogue``: before/after the main loops."""
        if name not in WHERES:
            raise ValueError(f"where= must be one of {', '.join(WHERES)}, not {name!r}")
        return None if name == "anywhere" else self._regions[name]

    # ---------------------------------------------------------------- analyses

    @cached_property
    def values(self) -> Values:
        return Values(self.graph)

    @cached_property
    def cp_async_groups(self) -> Groups:
        return Groups(self.graph, CP_ASYNC)

    @cached_property
    def wgmma_groups(self) -> Groups:
        return Groups(self.graph, WGMMA)

    def state_before(self, site: Site) -> dict[str, int]:
        return self.values.before(site.block, site.index)

    def site(self, block: int, index: int) -> Site:
        return Site(block, index, self.graph.blocks[block].instructions[index])

    def origins(self, site: Site, operand: int) -> list[Site]:
        """The loads whose values operand ``operand`` of ``site`` was computed from (through moves,
        arithmetic and merges of paths), e.g. the ``LDSM`` that filled an MMA's A fragment."""
        if operand >= len(site.ins.operands):
            return []
        vid = self.values.read(self.state_before(site), site.ins.operands[operand])
        out = []
        for name in sorted(self.values.origins(vid)):
            where = name.split("@", 1)[1].rsplit(":", 1)[0]
            block, index = (int(x) for x in where.split("."))
            out.append(self.site(block, index))
        return out

    def in_serializing_loop(self, site: Site) -> bool:
        """Whether ``site`` sits in a loop the compiler made to run a warp-wide instruction once per thread."""
        g = self.graph
        loop = g.loop_of(site.block)
        while loop is not None:
            if _serializing(g.loops[loop], g):
                return True
            loop = g.loops[loop].parent
        return False


def _fills_shared(ins: Instruction) -> bool:
    """A copy into shared memory: cp.async, a TMA or bulk load, or a store to shared memory."""
    e = classify(ins)
    return e.kind in ASYNC_COPIES or (e.kind == "store" and e.space == "shared")


def _serializing(loop: Loop, graph: ControlFlowGraph) -> bool:
    """A loop closed by ``BRA.U.ANY`` (or ``BRA.ANY``): "while any thread of the warp is left, elect one and
    repeat", what ptxas writes when every thread runs an instruction the hardware issues once per warp."""
    for u, _h in loop.back_edges:
        last = graph.blocks[u].instructions[-1]
        if last.base == "BRA" and "ANY" in last.modifiers:
            return True
    return False


__all__ = ["Program", "Site", "WHERES"]
