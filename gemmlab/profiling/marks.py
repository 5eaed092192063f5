"""The timeline's marks in a CuTe DSL kernel: the same states and the same PTX as ``gemmlab_trace.h``.

Use inside a ``@cute.kernel``, every warp, in code the whole warp runs::

    from gemmlab.profiling import marks

    tracer = marks.begin()                 # first thing in the kernel: the warp's START
    ...
    tracer.mark(marks.WAIT_LOAD)           # from here on the warp waits for a tile
    pipe.consumer_wait(read)
    tracer.mark(marks.MMA)                 # ... and from here on it issues wgmmas
    ...
    tracer.mark(marks.DONE)

A tracer is a cursor (the address of the warp's next record and how many are left) kept in two
registers and carried through ``cutlass.range`` loops like a pipeline state. Outside
:func:`gemmlab.profiling.timeline` (see :mod:`.switch`) ``begin`` and ``mark`` emit nothing at
all, so the checked and timed builds of the same source carry no marks.
"""
from __future__ import annotations

from typing import Any

from . import switch
from .trace_format import BEGIN_PTX, BUFFER_SYMBOL, MARK_PTX, STATES

START, LOAD, WAIT_LOAD, WAIT_SLOT, MMA, WAIT_MMA, SYNC, EPILOGUE, OTHER, DONE = (
    STATES[n] for n in ("START", "LOAD", "WAIT_LOAD", "WAIT_SLOT", "MMA", "WAIT_MMA", "SYNC", "EPILOGUE", "OTHER",
                        "DONE"))


def _buffer_address(loc: Any, ip: Any) -> Any:
    """The module global holding the buffer's address (declared once per kernel module), loaded as an i64."""
    from cutlass._mlir import ir
    from cutlass._mlir.dialects import llvm

    point = ip or ir.InsertionPoint.current
    op = point.block.owner
    while op is not None and op.name != "gpu.module":
        op = op.parent
    if op is None:
        raise RuntimeError("gemmlab.profiling.marks is used inside a @cute.kernel only.")
    body = op.regions[0].blocks[0]
    i64 = ir.IntegerType.get_signless(64)
    declared = any(o.operation.name == "llvm.mlir.global"
                   and ir.StringAttr(o.operation.attributes["sym_name"]).value == BUFFER_SYMBOL
                   for o in body.operations)
    if not declared:
        with ir.InsertionPoint.at_block_begin(body):
            llvm.GlobalOp(i64, BUFFER_SYMBOL, ir.Attribute.parse("#llvm.linkage<external>"),
                          value=ir.IntegerAttr.get(i64, 0), addr_space=1, alignment=8)
    pointer = llvm.AddressOfOp(ir.Type.parse("!llvm.ptr<1>"), BUFFER_SYMBOL, loc=loc, ip=ip).result
    return llvm.load(i64, pointer, volatile_=True, loc=loc, ip=ip)


def _asm(ptx: str, inputs: list[Any], constraints: str, loc: Any, ip: Any) -> tuple[Any, Any]:
    """Run ``ptx`` with ``inputs``; its two results (u64 address, u32 count) as DSL values."""
    from cutlass import Int32, Int64
    from cutlass._mlir import ir
    from cutlass._mlir.dialects import llvm

    i64, i32 = ir.IntegerType.get_signless(64), ir.IntegerType.get_signless(32)
    pair = ir.Type.parse("!llvm.struct<(i64, i32)>")
    out = llvm.inline_asm(pair, inputs, ptx, constraints, has_side_effects=True, is_align_stack=False,
                          asm_dialect=llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)
    at = llvm.extractvalue(i64, out, [0], loc=loc, ip=ip)
    left = llvm.extractvalue(i32, out, [1], loc=loc, ip=ip)
    return Int64(at), Int32(left)


class Tracer:
    """One warp's cursor into the timeline buffer (a DSL value, carried through dynamic loops)."""

    def __init__(self, at: Any = None, left: Any = None) -> None:
        self._at, self._left = at, left

    @property
    def active(self) -> bool:
        """False in a build without marks (outside a timeline): then :meth:`mark` emits nothing."""
        return self._at is not None

    def mark(self, state: int, *, loc: Any = None, ip: Any = None) -> None:
        """From here on this warp is in ``state`` (``marks.MMA`` ...); a no-op in a build without marks."""
        if self._at is None:
            return
        if not isinstance(state, int) or not (0 < state < 128):
            raise ValueError(f"a mark's state is one of gemmlab.profiling.marks' states (or an id from 32 to 127), "
                             f"not {state!r}.")
        from cutlass import Int32

        self._at, self._left = _asm(MARK_PTX, [self._at.ir_value(), self._left.ir_value(),
                                               Int32(state).ir_value(loc=loc, ip=ip)],
                                    "=l,=r,l,r,r", loc, ip)

    # The DSL's protocol for values carried through scf.for / scf.if.
    def __extract_mlir_values__(self) -> list[Any]:
        return [] if self._at is None else [self._at.ir_value(), self._left.ir_value()]

    def __new_from_mlir_values__(self, values: list[Any]) -> "Tracer":
        if self._at is None:
            return Tracer()
        from cutlass import Int32, Int64

        return Tracer(Int64(values[0]), Int32(values[1]))


def begin(*, loc: Any = None, ip: Any = None) -> Tracer:
    """This warp's tracer, its START marked; call it first in the kernel, in every warp."""
    if not switch.enabled():
        return Tracer()
    base = _buffer_address(loc, ip)
    at, left = _asm(BEGIN_PTX, [base], "=l,=r,l", loc, ip)
    tracer = Tracer(at, left)
    tracer.mark(START, loc=loc, ip=ip)
    return tracer


__all__ = ["DONE", "EPILOGUE", "LOAD", "MMA", "OTHER", "START", "SYNC", "Tracer", "WAIT_LOAD", "WAIT_MMA",
           "WAIT_SLOT", "begin"]
