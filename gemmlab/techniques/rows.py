"""Where a thread's stores land in the rows they write: the column offsets of each store from the thread's row base.

Why: a TiledMMA's permutation decides which elements of D each thread computes, and a test that only compares D
with a reference cannot see it (every thread computes the same sum). The machine code shows part of it: the
epilogue stores each row a thread writes through one address the thread computed (its *row base*) plus
constants, ``STG.E [R2.64+0x4]``. Those constants are the thread's columns in that row, relative to its first:
``0, 4, 8, 12`` when it writes four neighbouring fp32 values, ``0, 64, 128, 192`` when its values sit 16 columns
apart (04's integer tile).

A row base is a value of the value numbering (:mod:`.values`): stores whose addresses differ by a constant share
it. Rows whose pitch is a run-time value get bases of their own (the compiler multiplies the pitch in), so each
base is one row. When the pitch is known at compile time (a tile of static size), rows of one base are told
apart by ``row_bytes``: a store ``k·row_bytes`` bytes past the base's first store is ``k`` rows down.
"""
from __future__ import annotations

from dataclasses import dataclass

from .check import PLACE, Check, Finding, check_where, failed, no_main_loop, passed, signature
from .program import Program, Site
from .semantics import classify

#: Most offsets quoted in a message.
SHOWN = 8


@dataclass(frozen=True)
class RowStores:
    """One row a thread writes: the byte ranges ``(start, end)`` of its stores, from the row's first byte written."""

    ranges: tuple[tuple[int, int], ...]
    sites: tuple[Site, ...]

    @property
    def offsets(self) -> tuple[int, ...]:
        return tuple(sorted({start for start, _ in self.ranges}))

    @property
    def span(self) -> int:
        """Bytes from the first byte written to the last, gaps included."""
        return max(end for _, end in self.ranges) - min(start for start, _ in self.ranges)

    @property
    def contiguous(self) -> bool:
        """Whether the stores cover one run of bytes without a gap."""
        reach = 0
        for start, end in sorted(self.ranges):
            if start > reach:
                return False
            reach = max(reach, end)
        return True


def row_stores(p: Program, space: str = "global", where: str = "anywhere",
               row_bytes: int | None = None) -> tuple[list[RowStores], list[Site]]:
    """The rows a thread's stores to ``space`` memory in ``where`` write (see the module's docstring), and the stores
    whose address could not be read as a register plus a constant."""
    spaces = (space, "generic") if space == "global" else (space,)
    stores = [s for s in p.where("store", where) if classify(s.ins).space in spaces]
    groups: dict[int, list[tuple[int, int, Site]]] = {}
    unread: list[Site] = []
    for s in stores:
        found = p.values.address(p.state_before(s), s.ins.operands[0]) if s.ins.operands else None
        if found is None:
            unread.append(s)
            continue
        base, offset = p.values.split(found[1])
        groups.setdefault(base, []).append((offset, max(1, classify(s.ins).bytes), s))
    rows: list[RowStores] = []
    for members in groups.values():
        first = min(offset for offset, _, _ in members)
        by_row: dict[int, list[tuple[int, int, Site]]] = {}
        for offset, width, site in members:
            row = (offset - first) // row_bytes if row_bytes else 0
            by_row.setdefault(row, []).append((offset, width, site))
        for row, entries in sorted(by_row.items()):
            start = min(offset for offset, _, _ in entries)
            rows.append(RowStores(tuple(sorted((o - start, o - start + w) for o, w, _ in entries)),
                                  tuple(site for _, _, site in entries)))
    return rows, unread


def _offsets(row: RowStores) -> str:
    shown = ", ".join(str(o) for o in row.offsets[:SHOWN])
    return shown + (", ..." if len(row.offsets) > SHOWN else "")


def _widths(row: RowStores) -> str:
    widths = sorted({end - start for start, end in row.ranges})
    return " and ".join(f"{w}" for w in widths) + " bytes each"


def stores_per_row(run: int | None = None, within: int | None = None, row_bytes: int | None = None,
                   space: str = "global", where: str = "anywhere") -> Check:
    """In every row of ``space`` memory a thread's stores in ``where`` write: ``run``, one run of exactly ``run``
    contiguous bytes (a thread's neighbouring columns); ``within``, nothing more than ``within`` bytes from the
    first byte written (a thread's columns inside one block). ``row_bytes``: the row pitch, when it is known at
    compile time (a tile of static size).

    Reads: the address operand of each STG/ST/STS (``[R2.64+0x1004]``), split by the value numbering into the
    thread's row base and a constant (:mod:`.rows`). Cannot see: where the row base points (which rows and columns a
    thread starts at, so which thread owns which row: that takes a GPU), or rows apart by a run-time pitch
    (each is checked on its own).
    """
    if run is None and within is None:
        raise ValueError("stores_per_row needs run= (bytes of one contiguous run per row) or within= (bytes)")
    if any(v is not None and (isinstance(v, bool) or not isinstance(v, int) or v <= 0)
           for v in (run, within, row_bytes)):
        raise ValueError("run=, within= and row_bytes= are positive numbers of bytes")
    check_where(where)
    name = signature("stores_per_row", run=run, within=within, row_bytes=row_bytes,
                     space=space if space != "global" else None, where=where if where != "anywhere" else None)
    whose = f"a thread's stores to {space} memory"

    def run_check(p: Program) -> Finding:
        early = no_main_loop(p, name, where)
        if early:
            return early
        rows, unread = row_stores(p, space, where, row_bytes)
        if not rows:
            seen = f" (e.g. {unread[0].ins.opcode} {unread[0].ins.operands[0]})" if unread else ""
            return failed(name, f"found no stores to {space} memory {PLACE[where]} whose addresses the check could "
                                f"read{seen}.", unread)
        for row in rows:
            opcode = row.sites[0].ins.opcode
            if run is not None and not (row.contiguous and row.span == run):
                return failed(name, f"{PLACE[where]} {whose} write a row at byte offsets {_offsets(row)} from the "
                                    f"first ({_widths(row)}, {opcode}): not one run of {run} contiguous bytes.",
                              list(row.sites))
            if within is not None and row.span > within:
                return failed(name, f"{PLACE[where]} {whose} spread over {row.span} bytes of one row (at byte offsets "
                                    f"{_offsets(row)} from the first, {_widths(row)}, {opcode}): more than the "
                                    f"{within} bytes they should stay within.", list(row.sites))
        shape = " and ".join(([f"write each row as one run of {run} contiguous bytes"] if run is not None else []) +
                             ([f"keep each row within {within} bytes"] if within is not None else []))
        return passed(name, f"{PLACE[where]} {whose} {shape} ({len(rows)} row(s) read).",
                      [s for r in rows[:1] for s in r.sites])

    return Check(name, f"where each thread's stores to {space} memory fall within its rows", run_check)


__all__ = ["RowStores", "row_stores", "stores_per_row"]
