"""A kernel's mbarrier, TMA and tcgen05 instructions as a list of events in program order, with their
operands resolved: which barrier (by address), which parity, which descriptors, which TMEM columns.

Why: warp-specialised kernels whose K loop is unrolled at compile time (07's Blackwell exercises) are
straight-line code per role; their protocol is the order of these events. Program order is address
order here; the loops ptxas writes to retry an mbarrier wait or a TMEM allocation (inline, or out of line
after the EXIT) or to run an instruction once per thread are left out (the retry repeats the wait it
belongs to, and the per-thread loop is reported by :func:`Event.per_thread`).

An event is ``Event(kind, site, args)``; ``str(event)`` reads like ``wait bar2 parity 1``,
``mma A=… acc=on``, ``commit bar2``, ``alloc 128``, ``ld tmem+0x20 x32``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .program import Program, Site
from .semantics import classify
from .values import Values

#: The kinds that make events.
EVENT_KINDS = ("mbarrier.init", "mbarrier.wait", "mbarrier.expect_tx", "mbarrier.arrive", "tma.load", "tma.store",
               "tcgen05.mma", "tcgen05.commit", "tcgen05.alloc", "tcgen05.dealloc", "tcgen05.relinquish",
               "tcgen05.ld", "nop", "barrier", "wgmma", "wgmma.wait", "elect")


@dataclass
class Event:
    """One event: its kind, where it is, and its resolved operands."""

    kind: str
    site: Site
    args: dict = field(default_factory=dict)
    per_thread: bool = False          # run once per thread of the warp (a serializing loop), not once per warp

    def __str__(self) -> str:
        shown = " ".join(f"{k}={v}" for k, v in self.args.items())
        return f"{self.kind} {shown}".strip() + (" (per thread)" if self.per_thread else "")


class Trace:
    """The events of one kernel, and names for its mbarriers (``bar0``, ``bar1``, … by address)."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.events: list[Event] = []
        self._barriers: dict[int, str] = {}
        self._build()

    def barrier_name(self, vid: int) -> str:
        if vid not in self._barriers:
            self._barriers[vid] = f"bar{len(self._barriers)}"
        return self._barriers[vid]

    def _build(self) -> None:
        p = self.program
        v = p.values
        sites = sorted((s for s in p.sites if classify(s.ins).kind in EVENT_KINDS and s.block not in p.spin_blocks),
                       key=lambda s: (s.ins.address, p.graph.blocks[s.block].context))
        inits = [s for s in sites if classify(s.ins).kind == "mbarrier.init"]
        for s in inits:                               # name barriers in the order they are initialised
            where = v.address(p.state_before(s), s.ins.operands[1] if len(s.ins.operands) > 1 else "")
            if where:
                self.barrier_name(where[1])
        for s in sites:
            kind = classify(s.ins).kind
            state = p.state_before(s)
            args: dict = {}
            ops = s.ins.operands
            if kind in ("mbarrier.wait", "mbarrier.expect_tx", "mbarrier.arrive", "mbarrier.init"):
                where = next((v.address(state, o) for o in ops if v.address(state, o)), None)
                if where:
                    args["barrier"] = self.barrier_name(where[1])
                if kind == "mbarrier.wait" and len(ops) > 2:
                    parity = v.constant(v.read(state, ops[2]))
                    args["parity"] = "?" if parity is None else int(parity != 0)
            elif kind == "tcgen05.commit":
                where = v.address(state, ops[0]) if ops else None
                if where:
                    args["barrier"] = self.barrier_name(where[1])
            elif kind == "tcgen05.mma":
                args["A"] = v.pair(state, ops[0])
                args["B"] = v.pair(state, ops[1])
                flag = ops[-1].strip()
                value = v.constant(v.read(state, flag))
                args["acc"] = "?" if value is None else ("on" if value & 1 else "off")
            elif kind == "tcgen05.ld":
                where = next((v.address(state, o) for o in ops if v.address(state, o)), None)
                args["tmem"] = where[1] if where else None
                args["x"] = classify(s.ins).shape
            elif kind == "tcgen05.dealloc":
                args["columns"] = _dealloc_columns(v, v.read(state, ops[-1])) if ops else "?"
            elif kind == "tcgen05.alloc":
                count = v.constant(v.read(state, ops[1])) if len(ops) > 1 else None
                args["columns"] = "?" if count is None else 32 * count
            elif kind == "wgmma.wait":
                args["n"] = classify(s.ins).count
            elif kind == "tma.load":
                args["multicast"] = classify(s.ins).detail == "multicast"
            if kind in ("mbarrier.wait", "tcgen05.alloc") and p.in_retry_loop(s) and any(
                    e.kind == kind and e.args == args for e in self.events):
                continue                              # the retry of a wait or an allocation already listed
            self.events.append(Event(kind, s, args, p.in_serializing_loop(s)))

    def of(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def __str__(self) -> str:
        return "\n".join(f"{e.site.ins.address:#06x} {e}" for e in self.events)


def _dealloc_columns(values: "Values", vid: int) -> int | str:
    """Columns a dealloc frees, from the mask ptxas builds for it: a run of ones (one bit per 32 columns)
    shifted to the first column (``SHF.L.U32 R, 0xf, col/32``): 0xf is 128 columns. "?" if not found."""
    for opcode, args in values.operations(vid):
        if opcode.startswith("SHF.L") and args:
            c = values.constant(args[0])
            if c and c & (c + 1) == 0:
                return 32 * c.bit_length()
    return "?"


__all__ = ["EVENT_KINDS", "Event", "Trace"]
