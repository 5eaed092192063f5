"""The control flow of a kernel's machine code: basic blocks, dominators, natural loops, and where code sits.

Why: "a wait inside the main loop" or "vector stores in the epilogue" are statements about *where* an
instruction runs. The SASS is a list; the structure comes from its branches. This module builds the
control-flow graph of one kernel (device functions the compiler kept out of line are copied in at
each ``CALL``, so nothing a kernel runs is left out), finds the natural loops from the back edges
(an edge to a block that dominates its source), and tells the blocks before a loop (its prologue)
from those inside it and after it (its epilogue).

The textbook algorithms, kept small: dominators by Cooper, Harvey and Kennedy's iteration over reverse
postorder ("A Simple, Fast Dominance Algorithm"); a loop's body is its header plus every block that
reaches a back edge's source without passing the header.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..errors import ToolchainError
from .listing import Instruction, Listing, Section, branch_target, call_target

#: Deepest chain of out-of-line calls that is copied in; deeper (or recursive) calls stay opaque.
MAX_CALL_DEPTH = 8
#: Most blocks one kernel's graph may hold (a guard against pathological code).
MAX_BLOCKS = 50_000

_PREDICATE_OPERAND = re.compile(r"^!?U?P(?:\d+)$")


def _ends_block(ins: Instruction) -> bool:
    return ins.base in ("BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL", "KILL", "BPT")


def _branch_is_conditional(ins: Instruction) -> bool:
    """A branch that may fall through: a guard predicate, or a uniform predicate operand (``BRA.U UP2, ...``)."""
    if ins.conditional:
        return True
    return bool(ins.operands) and bool(_PREDICATE_OPERAND.match(ins.operands[0].strip()))


@dataclass
class Block:
    """A straight run of instructions entered only at its first and left only after its last."""

    index: int
    instructions: list[Instruction]
    context: tuple[int, ...] = ()              # call sites (addresses) of an inlined device function's copy
    successors: list[int] = field(default_factory=list)
    predecessors: list[int] = field(default_factory=list)

    @property
    def address(self) -> int:
        return self.instructions[0].address if self.instructions else -1


@dataclass(frozen=True)
class Loop:
    """A natural loop: its header block, every block of its body, its back edges and the loops inside it."""

    header: int
    body: frozenset[int]
    back_edges: tuple[tuple[int, int], ...]
    parent: int | None = None        # index of the innermost loop around it, in ControlFlowGraph.loops
    depth: int = 1


class ControlFlowGraph:
    """The basic blocks of one kernel, their edges, dominators and natural loops."""

    def __init__(self, blocks: list[Block], name: str, opaque_calls: tuple[str, ...] = ()) -> None:
        self.blocks = blocks
        self.name = name
        self.opaque_calls = opaque_calls          # calls not followed (too deep, recursive, or unknown)
        self.entry = 0
        self.order = self._reverse_postorder()
        self.idom = self._dominators()
        self.back_edges = self._back_edges()
        self.loops = self._loops()
        self._loop_of = self._innermost_loops()
        self._dag_succ = self._acyclic_successors()

    # ---------------------------------------------------------------- building

    @classmethod
    def of(cls, listing: Listing, kernel: str | None = None) -> "ControlFlowGraph":
        """The graph of ``kernel`` (a symbol of the listing; the only kernel when None)."""
        section = listing.kernel(kernel)
        blocks: list[Block] = []
        opaque: list[str] = []
        _build(listing, section, section.instructions[0].address if section.instructions else 0, (),
               blocks, opaque, ())
        if not blocks:
            raise ToolchainError(f"the kernel {section.name} has no instructions.")
        for block in blocks:
            for s in block.successors:
                blocks[s].predecessors.append(block.index)
        return cls(blocks, section.name, tuple(dict.fromkeys(opaque)))

    # ---------------------------------------------------------------- analyses

    def _reverse_postorder(self) -> list[int]:
        seen, post = set(), []
        stack: list[tuple[int, int]] = [(self.entry, 0)]
        seen.add(self.entry)
        while stack:
            node, i = stack[-1]
            succ = self.blocks[node].successors
            if i < len(succ):
                stack[-1] = (node, i + 1)
                nxt = succ[i]
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, 0))
            else:
                post.append(node)
                stack.pop()
        return post[::-1]

    def _dominators(self) -> dict[int, int]:
        rank = {b: i for i, b in enumerate(self.order)}
        idom = {self.entry: self.entry}

        def intersect(a: int, b: int) -> int:
            while a != b:
                while rank[a] > rank[b]:
                    a = idom[a]
                while rank[b] > rank[a]:
                    b = idom[b]
            return a

        changed = True
        while changed:
            changed = False
            for b in self.order[1:]:
                preds = [p for p in self.blocks[b].predecessors if p in idom]
                if not preds:
                    continue
                new = preds[0]
                for p in preds[1:]:
                    new = intersect(p, new)
                if idom.get(b) != new:
                    idom[b] = new
                    changed = True
        return idom

    def dominates(self, a: int, b: int) -> bool:
        """Whether every path from the entry to block ``b`` passes block ``a``."""
        if b not in self.idom:
            return False
        while True:
            if a == b:
                return True
            parent = self.idom[b]
            if parent == b:
                return False
            b = parent

    def reachable(self) -> list[int]:
        """Blocks reachable from the entry, in reverse postorder."""
        return list(self.order)

    def _back_edges(self) -> list[tuple[int, int]]:
        """Edges to a block that dominates the source, and retreating edges of irreducible code (to a block
        earlier in reverse postorder that does not dominate the source): either closes a cycle."""
        rank = {b: i for i, b in enumerate(self.order)}
        edges = []
        for u in self.order:
            for v in self.blocks[u].successors:
                if v in rank and (self.dominates(v, u) or rank[v] <= rank[u]):
                    edges.append((u, v))
        return edges

    def _loops(self) -> list[Loop]:
        by_header: dict[int, tuple[set[int], list[tuple[int, int]]]] = {}
        for u, h in self.back_edges:
            body, edges = by_header.setdefault(h, ({h}, []))
            edges.append((u, h))
            stack = [u]
            while stack:
                n = stack.pop()
                if n in body:
                    continue
                body.add(n)
                stack.extend(p for p in self.blocks[n].predecessors if p not in body)
        raw = sorted(by_header.items(), key=lambda item: len(item[1][0]), reverse=True)
        loops: list[Loop] = []
        for header, (body, edges) in raw:
            parent = None
            for i, outer in enumerate(loops):         # sorted outer first: the last enclosing one is innermost
                if header in outer.body and body <= outer.body:
                    parent = i
            depth = 1 if parent is None else loops[parent].depth + 1
            loops.append(Loop(header, frozenset(body), tuple(edges), parent, depth))
        return loops

    def _innermost_loops(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for i, loop in enumerate(self.loops):      # outer loops first: inner ones overwrite
            for b in loop.body:
                if b not in out or self.loops[out[b]].depth < loop.depth:
                    out[b] = i
        return out

    def _acyclic_successors(self) -> dict[int, list[int]]:
        back = set(self.back_edges)
        return {b.index: [s for s in b.successors if (b.index, s) not in back] for b in self.blocks}

    # ---------------------------------------------------------------- questions

    def loop_of(self, block: int) -> int | None:
        """Index (in ``loops``) of the innermost loop holding ``block``, or None."""
        return self._loop_of.get(block)

    def loops_holding(self, wanted: Callable[[Instruction], bool]) -> list[int]:
        """The innermost loops that hold an instruction ``wanted`` (each once, in program order)."""
        out: list[int] = []
        for b in self.order:
            if any(wanted(ins) for ins in self.blocks[b].instructions):
                loop = self.loop_of(b)
                if loop is not None and loop not in out:
                    out.append(loop)
        return out

    def outside_loops(self, wanted: Callable[[Instruction], bool]) -> bool:
        """Whether some instruction ``wanted`` runs outside every loop."""
        return any(self.loop_of(b) is None and any(wanted(i) for i in self.blocks[b].instructions) for b in self.order)

    def _reach(self, starts: Iterable[int], forward: bool) -> set[int]:
        preds: dict[int, list[int]] = {}
        if not forward:
            for u, succ in self._dag_succ.items():
                for v in succ:
                    preds.setdefault(v, []).append(u)
        seen: set[int] = set()
        stack = list(starts)
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            stack.extend(self._dag_succ.get(n, []) if forward else preds.get(n, []))
        return seen

    def before(self, loop: Loop) -> set[int]:
        """Blocks outside ``loop`` that lead to its header without going round any loop: its prologue."""
        return self._reach([loop.header], forward=False) - set(loop.body)

    def after(self, loop: Loop) -> set[int]:
        """Blocks outside ``loop`` reached from its exits without going round any loop: its epilogue."""
        exits = [s for b in loop.body for s in self.blocks[b].successors if s not in loop.body]
        return self._reach(exits, forward=True) - set(loop.body)

    def instructions(self, blocks: Iterable[int] | None = None) -> list[Instruction]:
        """The instructions of ``blocks`` (every reachable block by default), in reverse postorder."""
        keep = None if blocks is None else set(blocks)
        return [ins for b in self.order if keep is None or b in keep for ins in self.blocks[b].instructions]


def _build(listing: Listing, section: Section, start: int, context: tuple[int, ...], blocks: list[Block],
           opaque: list[str], calling: tuple[str, ...]) -> tuple[int, list[int]]:
    """Blocks of the code reached from ``start`` in ``section`` (a kernel or a copied-in device function).
    Returns (entry block index, indices of the blocks that end in RET)."""
    index_of = {ins.address: i for i, ins in enumerate(section.instructions)}
    if start not in index_of:
        raise ToolchainError(f"{section.name}: no instruction at {start:#x}.")
    leaders = {start}
    seen: set[int] = set()
    work = [start]
    while work:                                # the instructions reachable from start, and where blocks begin
        pos = index_of.get(work.pop())
        while pos is not None and pos < len(section.instructions):
            ins = section.instructions[pos]
            if ins.address in seen:
                break
            seen.add(ins.address)
            if not _ends_block(ins):
                pos += 1
                continue
            nxt = section.instructions[pos + 1].address if pos + 1 < len(section.instructions) else None
            if ins.base in ("BRA", "JMP"):
                target = branch_target(ins, section)
                if target is not None and target in index_of:
                    leaders.add(target)
                    work.append(target)
                if _branch_is_conditional(ins) and nxt is not None:
                    leaders.add(nxt)
                    work.append(nxt)
                break
            if ins.base in ("BRX", "JMX"):           # an indirect jump: any label of the section may follow
                for target in section.labels.values():
                    if target in index_of:
                        leaders.add(target)
                        work.append(target)
                break
            if ins.base in ("EXIT", "RET", "KILL", "BPT"):
                if ins.conditional and nxt is not None:
                    leaders.add(nxt)
                    work.append(nxt)
                break
            if nxt is not None:                     # CALL: the code after it runs when the callee returns
                leaders.add(nxt)
                work.append(nxt)
            break
    addresses = sorted(seen)
    local: dict[int, int] = {}                  # leader address -> block index
    rets: list[int] = []
    current: Block | None = None
    for address in addresses:
        ins = section.instructions[index_of[address]]
        if current is None or address in leaders:
            current = Block(len(blocks), [], context)
            if len(blocks) >= MAX_BLOCKS:
                raise ToolchainError(f"{section.name}: more than {MAX_BLOCKS} basic blocks; not analysed.")
            blocks.append(current)
            local[address] = current.index
        current.instructions.append(ins)
    for block in [blocks[i] for i in local.values()]:
        last = block.instructions[-1]
        pos = index_of[last.address]
        nxt = section.instructions[pos + 1].address if pos + 1 < len(section.instructions) else None
        falls = nxt is not None and nxt in local
        if last.base in ("BRA", "JMP"):
            target = branch_target(last, section)
            if target in local:
                block.successors.append(local[target])
            if _branch_is_conditional(last) and falls:
                block.successors.append(local[nxt])
        elif last.base in ("BRX", "JMX"):
            block.successors.extend(local[t] for t in section.labels.values() if t in local)
        elif last.base in ("EXIT", "KILL", "BPT"):
            if last.conditional and falls:
                block.successors.append(local[nxt])
        elif last.base == "RET":
            rets.append(block.index)
            if last.conditional and falls:
                block.successors.append(local[nxt])
        elif last.base == "CALL":
            callee = call_target(last)
            found = listing.section_holding(callee) if callee else None
            if found is None or callee in calling or len(context) >= MAX_CALL_DEPTH:
                opaque.append(callee or last.text())
                if falls:
                    block.successors.append(local[nxt])
            else:
                entry, returns = _build(listing, found[0], found[1], context + (last.address,), blocks, opaque,
                                        calling + (callee,))
                block.successors.append(entry)
                if falls:
                    for r in returns:
                        blocks[r].successors.append(local[nxt])
        elif falls:
            block.successors.append(local[nxt])
        block.successors[:] = list(dict.fromkeys(block.successors))
    return local[start], rets


__all__ = ["Block", "ControlFlowGraph", "Loop", "MAX_CALL_DEPTH"]
