"""gemmlab.compiling.ptx reads PTX as statements: inline-asm blocks, labels, predicates and comments do not hide
an instruction or invent one, and a load that may read global memory is found whatever its spelling."""
from __future__ import annotations

from gemmlab.compiling import ptx

SAMPLE = """
.visible .entry k(.param .u64 p)
{
	.reg .b32 %r<9>;
	ld.param.u64 %rd1, [p];
	{ ld.global.v4.u32 {%r1,%r2,%r3,%r4}, [%rd1]; }
$L__BB0_2: @%p1 ld.u32 %r5, [%rd2]; // ld.global.u32 %r7, [%rd7]; in a comment
	/* ld.global.nc.u32 %r9, [%rd9];
	   two lines of comment */
	@!%p2 atom.global.add.u32 %r6, [%rd3], 0;
	atom.shared.add.u32 %r6, [%r3], 1;
	red.global.add.u32 [%rd3], 1;
	cp.async.bulk.global.shared::cta.bulk_group [%rd4], [%r7], 256;
	cp.async.ca.shared.global.L2::128B [%r1], [%rd1], 16;
	cp.async.commit_group;
	cp.async.wait_group 0;
	ld.shared::cta.v4.b32 {%r1,%r2,%r3,%r4}, [%r8];
	ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r1,%r2,%r3,%r4}, [%r8];
	ld.volatile.global.u32 %r1, [%rd5];
	ld.local.u32 %r1, [%rd6];
	tex.2d.v4.f32.s32 {%f1,%f2,%f3,%f4}, [t, {%r1,%r2}];
	st.global.v4.b32 [%rd1], {%r1,%r2,%r3,%r4};
	bar.sync 0;
}
"""


def test_statements_split_blocks_and_drop_comments_labels_and_predicates() -> None:
    ops = [ptx.opcode(s) for s in ptx.statements(SAMPLE)]
    assert ops[:4] == ["ld.param.u64", "ld.global.v4.u32", "ld.u32", "atom.global.add.u32"]
    assert "ld.global.nc.u32" not in ops and ops.count("ld.global.u32") == 0        # both only in comments
    assert not any(op.startswith((".", "{", "}", "$")) for op in ops)
    assert ptx.operands("cp.async.ca.shared.global.L2::128B [%r1+16], [%rd1], 16") == ["[%r1+16]", "[%rd1]", "16"]
    assert ptx.operands("ld.shared.v4.b32 {%r1,%r2,%r3,%r4}, [%r8]") == ["{%r1,%r2,%r3,%r4}", "[%r8]"]


def test_every_read_that_may_reach_global_memory_is_listed() -> None:
    found = [ptx.opcode(s) for s in ptx.reads_outside_shared(SAMPLE)]
    assert found == ["ld.global.v4.u32", "ld.u32", "atom.global.add.u32", "ld.volatile.global.u32",
                     "tex.2d.v4.f32.s32"]
    # copies into shared memory, shared and local loads, parameters, stores and reductions are not reads of global
    assert ptx.reads_outside_shared("cp.async.cg.shared.global [%r1], [%rd1], 16, 16;\nld.shared.u32 %r2, [%r1];\n"
                                    "st.global.u32 [%rd2], %r2;\nld.param.u64 %rd1, [p];") == []
