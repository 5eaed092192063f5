"""Asynchronous groups in flight: how many committed groups of copies (or of wgmmas) may be pending where.

Why: a pipeline is a statement about time: while the MMAs of one k-tile run, the copies of later
k-tiles are on their way. In the machine code that is a count. ``cp.async`` copies (SASS ``LDGSTS``)
are closed into a group by a commit (``LDGDEPBAR``); ``DEPBAR.LE SB0, N`` waits until at most the
newest N groups are pending. wgmmas (``HGMMA``) are closed into a group by the one marked ``gsb0``;
``WARPGROUP.DEPBAR.LE gsb0, N`` waits until at most N groups still run.

This module runs that bookkeeping over the control-flow graph (a may-analysis: every path is
followed, conditional instructions both ways) until it reaches a fixed point, so every instruction
knows the groups that may be pending when it runs: how many, and whether each holds data (a commit
with no copy since the previous one makes an *empty* group: it counts for ``wait_group N`` but brings
nothing). The abstract state: the pending groups, oldest first, each marked as holding data or not
(at most :data:`DEPTH` are kept: a wait never keeps more than its N newest), whether issued copies are
not yet committed, and whether a barrier came after the last wait.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .cfg import ControlFlowGraph, Loop
from .listing import Instruction
from .semantics import Effect, classify

#: Pending groups tracked per state (the oldest beyond this are dropped: no wait of the course keeps more).
DEPTH = 16
#: Most distinct states kept per program point (beyond it the analysis gives up on that kernel).
MAX_STATES = 512


@dataclass(frozen=True)
class GroupState:
    """Pending groups, oldest first (True: holds data); copies issued since the last commit; a barrier since
    the last wait."""

    pending: tuple[bool, ...] = ()
    open: bool = False
    synced: bool = True

    @property
    def in_flight(self) -> int:
        """Groups of data that may not have landed: committed ones with data, plus open copies."""
        return sum(self.pending) + int(self.open)

    @property
    def committed_data(self) -> int:
        return sum(self.pending)


@dataclass(frozen=True)
class GroupModel:
    """Which instructions issue, commit and wait for one kind of asynchronous group."""

    name: str
    issues: Callable[[Effect], bool]
    commits: Callable[[Effect], bool]          # the instruction closes the current group
    closes_empty: Callable[[Effect], bool]     # a commit of a group that never holds data (e.g. bulk stores)
    waits: Callable[[Effect], int | None]      # N of a wait, None if not a wait


CP_ASYNC = GroupModel(
    "cp.async",
    issues=lambda e: e.kind == "cp.async",
    commits=lambda e: e.kind in ("cp.async.commit", "bulk.commit"),
    closes_empty=lambda e: e.kind == "bulk.commit",
    waits=lambda e: e.count if e.kind == "async.wait" else None,
)

WGMMA = GroupModel(
    "wgmma",
    issues=lambda e: e.kind == "wgmma",
    commits=lambda e: e.kind == "wgmma" and e.commits,
    closes_empty=lambda e: False,
    waits=lambda e: e.count if e.kind == "wgmma.wait" else None,
)


class Groups:
    """The :class:`GroupState`s that may hold before each instruction of a graph, for one :class:`GroupModel`."""

    def __init__(self, graph: ControlFlowGraph, model: GroupModel) -> None:
        self.graph = graph
        self.model = model
        self.entry: dict[int, frozenset[GroupState]] = {}
        self.overflow = False
        self._solve()

    def _step(self, ins: Instruction, states: frozenset[GroupState]) -> frozenset[GroupState]:
        e = classify(ins)
        m = self.model
        out: set[GroupState] = set()
        for s in states:
            new = s
            if m.issues(e):
                new = GroupState(s.pending, True, s.synced)
            if m.commits(e):
                data = new.open and not m.closes_empty(e)
                new = GroupState((new.pending + (data,))[-DEPTH:], False, new.synced)
            n = m.waits(e)
            if n is not None:
                new = GroupState(new.pending[len(new.pending) - n:] if n else (), new.open, False)
            if e.kind == "barrier":
                new = GroupState(new.pending, new.open, True)
            out.add(new)
            if ins.conditional and new != s:           # a predicated instruction may not run
                out.add(s)
        return frozenset(out)

    def _solve(self) -> None:
        g = self.graph
        exit_states: dict[int, frozenset[GroupState]] = {}
        work = list(g.order)
        rank = {b: i for i, b in enumerate(g.order)}
        queued = set(work)
        while work:
            work.sort(key=lambda b: rank[b], reverse=True)
            b = work.pop()
            queued.discard(b)
            preds = [exit_states[p] for p in g.blocks[b].predecessors if p in exit_states]
            if b == g.entry:
                preds.append(frozenset({GroupState()}))
            entry = frozenset().union(*preds) if preds else frozenset()
            if len(entry) > MAX_STATES:
                self.overflow = True
                entry = frozenset(sorted(entry, key=lambda s: (len(s.pending), s.pending, s.open, s.synced))[:MAX_STATES])
            if b in self.entry and self.entry[b] == entry and b in exit_states:
                continue
            self.entry[b] = entry
            states = entry
            for ins in g.blocks[b].instructions:
                states = self._step(ins, states)
            if exit_states.get(b) != states:
                exit_states[b] = states
                for s in g.blocks[b].successors:
                    if s not in queued:
                        work.append(s)
                        queued.add(s)

    def _exit(self, block: int, entry: frozenset[GroupState]) -> frozenset[GroupState]:
        states = entry
        for ins in self.graph.blocks[block].instructions:
            states = self._step(ins, states)
        return states

    def steady(self, loop: Loop) -> dict[int, frozenset[GroupState]]:
        """Entry states of ``loop``'s blocks in its steady state: from the second trip on (the header entered
        only from the loop's own back edges), so what the prologue left in flight does not count."""
        g = self.graph
        header_in = frozenset().union(*[self._exit(u, self.entry.get(u, frozenset())) for u, _h in loop.back_edges])
        entry: dict[int, frozenset[GroupState]] = {loop.header: header_in}
        body = [b for b in g.order if b in loop.body]
        changed = True
        while changed:
            changed = False
            for b in body:
                if b == loop.header:
                    incoming = header_in | frozenset().union(*[self._exit(q, entry.get(q, frozenset()))
                                                              for q in g.blocks[b].predecessors
                                                              if q in loop.body and (q, b) not in loop.back_edges])
                else:
                    incoming = frozenset().union(*[self._exit(q, entry.get(q, frozenset()))
                                                   for q in g.blocks[b].predecessors if q in loop.body])
                if entry.get(b) != incoming:
                    entry[b] = incoming
                    changed = True
        return entry

    def each_steady(self, loop: Loop, wanted: Callable[[Instruction], bool]
                    ) -> list[tuple[int, int, Instruction, frozenset[GroupState]]]:
        """Like :meth:`each`, inside ``loop`` and in its steady state (:meth:`steady`)."""
        entry = self.steady(loop)
        out = []
        for b in self.graph.order:
            if b not in loop.body:
                continue
            states = entry.get(b, frozenset())
            for i, ins in enumerate(self.graph.blocks[b].instructions):
                if wanted(ins):
                    out.append((b, i, ins, states))
                states = self._step(ins, states)
        return out

    def before(self, block: int, index: int) -> frozenset[GroupState]:
        """The states that may hold just before instruction ``index`` of ``block``."""
        states = self.entry.get(block, frozenset())
        for ins in self.graph.blocks[block].instructions[:index]:
            states = self._step(ins, states)
        return states

    def after(self, block: int, index: int) -> frozenset[GroupState]:
        return self._step(self.graph.blocks[block].instructions[index], self.before(block, index))

    def each(self, wanted: Callable[[Instruction], bool], blocks: set[int] | None = None
             ) -> list[tuple[int, int, Instruction, frozenset[GroupState]]]:
        """``(block, index, instruction, states before it)`` for every instruction ``wanted`` (in ``blocks``)."""
        out = []
        for b in self.graph.order:
            if blocks is not None and b not in blocks:
                continue
            states = self.entry.get(b, frozenset())
            for i, ins in enumerate(self.graph.blocks[b].instructions):
                if wanted(ins):
                    out.append((b, i, ins, states))
                states = self._step(ins, states)
        return out


__all__ = ["CP_ASYNC", "DEPTH", "GroupModel", "GroupState", "Groups", "WGMMA"]
