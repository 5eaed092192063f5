"""The in-kernel timeline's one format: its states, its buffer, and the PTX that writes it.

Why one module: a C++ kernel cell (``gemmlab_trace.h``) and a CuTe DSL kernel
(:mod:`gemmlab.profiling.marks`) write the same buffer with the same PTX, so one parser
(:mod:`gemmlab.profiling.timeline`) reads both. The PTX here is written with LLVM's operand
syntax (``$0``); :func:`cpp_asm` gives the CUDA C++ spelling the header carries (a test keeps the
two identical).

The buffer (allocated and owned by the judge, its address written into the kernel module's
global ``gemmlab_trace_buffer``; 0 there means "record nothing"):

- a header of :data:`HEADER_BYTES`: ``u32`` magic, version, records per warp, CTAs traced
  (linear CTA index ``< ctas``), warps per CTA; the rest zero;
- then one region per (CTA, warp), ``records per warp`` records of :data:`RECORD_BYTES` each:
  ``u64`` %globaltimer (ns, one clock for the whole GPU), ``u32`` %clock (the SM's cycles),
  ``u32`` meta: the state in bits 0–7, the SM in bits 16–27, bit 31 set when only part of the
  warp executed the mark.

A warp's mark is written by the lowest active lane; every executing lane advances its cursor.
A region never written stays zero (the judge zero-fills it before the traced launch).
"""
from __future__ import annotations

import re

#: "GLTR" as a little-endian u32: a buffer the judge prepared.
MAGIC = 0x52544C47
VERSION = 1
HEADER_BYTES = 64
RECORD_BYTES = 16
#: The name of the module global that holds the buffer's address.
BUFFER_SYMBOL = "gemmlab_trace_buffer"
#: The define that turns the C++ marks on (the judge compiles a traced build with it).
CPP_SWITCH = "GEMMLAB_TRACE_ON"
#: Bits of a record's meta word.
STATE_MASK = 0xFF
SM_SHIFT, SM_MASK = 16, 0xFFF
PARTIAL_BIT = 1 << 31

#: What a warp is doing from a mark until its next mark. One vocabulary for both front-ends:
#: in C++ ``GEMMLAB_TRACE(WAIT_LOAD)``, in the DSL ``tracer.mark(marks.WAIT_LOAD)``.
STATES: dict[str, int] = {
    "START": 1,       # the warp began tracing (GEMMLAB_TRACE_BEGIN / marks.begin)
    "LOAD": 2,        # issuing loads into shared memory (TMA, cp.async, plain loads)
    "WAIT_LOAD": 3,   # waiting for a tile to land (a full barrier, cp.async.wait_group)
    "WAIT_SLOT": 4,   # a producer waiting for a free slot (an empty barrier)
    "MMA": 5,         # issuing tensor-core instructions (wgmma, mma.sync, WMMA)
    "WAIT_MMA": 6,    # waiting for issued MMAs to finish (wgmma.wait_group)
    "SYNC": 7,        # waiting at a block or named barrier (__syncthreads, bar.sync)
    "EPILOGUE": 8,    # writing the result (registers -> shared -> global)
    "OTHER": 9,       # anything else worth a lane of its own (address arithmetic, scheduling)
    "DONE": 10,       # the warp is finished: ends its last state
}
#: Ids a kernel may use for states of its own (named in the call that draws them).
CUSTOM_IDS = range(32, 128)
NAMES = {v: k for k, v in STATES.items()}


# PTX of the two operations, in LLVM inline-asm syntax ($N operands, registers without %).
# begin: $0 (u64 out) first record address, $1 (u32 out) records left; $2 (u64 in) buffer address.
BEGIN_PTX = (
    "{\n"
    ".reg .pred gl_in;\n"
    ".reg .b32 gl_magic, gl_version, gl_cap, gl_ctas, gl_wpc, gl_a, gl_b, gl_cta, gl_tid;\n"
    ".reg .b64 gl_at;\n"
    "mov.u64 $0, 0;\n"
    "mov.u32 $1, 0;\n"
    "mov.u32 gl_magic, 0;\n"
    "mov.u32 gl_cap, 0;\n"
    "mov.u32 gl_ctas, 0;\n"
    "mov.u32 gl_wpc, 0;\n"
    "setp.ne.u64 gl_in, $2, 0;\n"
    "@gl_in ld.global.v4.u32 {gl_magic, gl_version, gl_cap, gl_ctas}, [$2];\n"
    "@gl_in ld.global.u32 gl_wpc, [$2+16];\n"
    "mov.u32 gl_a, %ctaid.z;\n"
    "mov.u32 gl_b, %nctaid.y;\n"
    "mov.u32 gl_cta, %ctaid.y;\n"
    "mad.lo.u32 gl_cta, gl_a, gl_b, gl_cta;\n"
    "mov.u32 gl_b, %nctaid.x;\n"
    "mov.u32 gl_a, %ctaid.x;\n"
    "mad.lo.u32 gl_cta, gl_cta, gl_b, gl_a;\n"
    "mov.u32 gl_a, %tid.z;\n"
    "mov.u32 gl_b, %ntid.y;\n"
    "mov.u32 gl_tid, %tid.y;\n"
    "mad.lo.u32 gl_tid, gl_a, gl_b, gl_tid;\n"
    "mov.u32 gl_b, %ntid.x;\n"
    "mov.u32 gl_a, %tid.x;\n"
    "mad.lo.u32 gl_tid, gl_tid, gl_b, gl_a;\n"
    "shr.u32 gl_tid, gl_tid, 5;\n"
    f"setp.eq.u32 gl_in, gl_magic, {MAGIC};\n"
    "setp.lt.and.u32 gl_in, gl_cta, gl_ctas, gl_in;\n"
    "setp.lt.and.u32 gl_in, gl_tid, gl_wpc, gl_in;\n"
    "mad.lo.u32 gl_a, gl_cta, gl_wpc, gl_tid;\n"
    "mul.wide.u32 gl_at, gl_a, gl_cap;\n"
    f"mul.lo.u64 gl_at, gl_at, {RECORD_BYTES};\n"
    f"add.u64 gl_at, gl_at, {HEADER_BYTES};\n"
    "add.u64 gl_at, gl_at, $2;\n"
    "@gl_in mov.u64 $0, gl_at;\n"
    "@gl_in mov.u32 $1, gl_cap;\n"
    "}"
)

# mark: $0 (u64 out), $1 (u32 out) the cursor after the mark; $2 (u64 in), $3 (u32 in) the cursor before;
# $4 (u32 in) the state. Writes one record when records are left; the lowest active lane writes it.
MARK_PTX = (
    "{\n"
    ".reg .pred gl_on, gl_lead, gl_part;\n"
    ".reg .b32 gl_mask, gl_lane, gl_low, gl_clk, gl_meta, gl_sm, gl_lo, gl_hi;\n"
    ".reg .b64 gl_t;\n"
    "setp.ne.u32 gl_on, $3, 0;\n"
    "activemask.b32 gl_mask;\n"
    "mov.u32 gl_lane, %laneid;\n"
    "brev.b32 gl_low, gl_mask;\n"
    "bfind.shiftamt.u32 gl_low, gl_low;\n"
    "setp.eq.and.u32 gl_lead, gl_lane, gl_low, gl_on;\n"
    "@gl_lead mov.u32 gl_clk, %clock;\n"
    "@gl_lead mov.u64 gl_t, %globaltimer;\n"
    "@gl_lead mov.u32 gl_sm, %smid;\n"
    "@gl_lead mov.b64 {gl_lo, gl_hi}, gl_t;\n"
    f"@gl_lead shl.b32 gl_meta, gl_sm, {SM_SHIFT};\n"
    "@gl_lead or.b32 gl_meta, gl_meta, $4;\n"
    "setp.ne.and.u32 gl_part, gl_mask, 0xFFFFFFFF, gl_lead;\n"
    f"@gl_part or.b32 gl_meta, gl_meta, {PARTIAL_BIT};\n"
    "@gl_lead st.global.v4.u32 [$2], {gl_lo, gl_hi, gl_clk, gl_meta};\n"
    f"selp.u64 $0, {RECORD_BYTES}, 0, gl_on;\n"
    "add.u64 $0, $0, $2;\n"
    "selp.u32 $1, 1, 0, gl_on;\n"
    "sub.u32 $1, $3, $1;\n"
    "}"
)


def cpp_asm(ptx: str) -> str:
    """``ptx`` in CUDA C++ inline-asm spelling: ``%`` doubled, ``$N`` operands as ``%N``."""
    return re.sub(r"\$(\d+)", r"%\1", ptx.replace("%", "%%"))


def state_id(name: str) -> int:
    """The id of a state named as in :data:`STATES` (any case); a ValueError lists the names."""
    key = str(name).upper()
    if key not in STATES:
        raise ValueError(f"no timeline state {name!r}; the states are {', '.join(STATES)}.")
    return STATES[key]


__all__ = ["BEGIN_PTX", "BUFFER_SYMBOL", "CPP_SWITCH", "CUSTOM_IDS", "HEADER_BYTES", "MAGIC", "MARK_PTX", "NAMES",
           "PARTIAL_BIT", "RECORD_BYTES", "SM_MASK", "SM_SHIFT", "STATES", "STATE_MASK", "VERSION", "cpp_asm",
           "state_id"]
