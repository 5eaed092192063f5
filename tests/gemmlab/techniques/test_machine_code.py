"""The machine-code layer of the technique checks on real SASS (small kernels compiled here by NVRTC for sm_80,
sm_90a and sm_100a, no GPU): the listing parser, the control-flow graph with its loops and regions, out-of-line
device functions copied in at their calls, register values (mbarrier addresses and parities), and the cp.async
groups in flight."""
from __future__ import annotations

from functools import cache

import pytest

import gemmlab
from gemmlab import techniques as T
from gemmlab.techniques import listing
from gemmlab.techniques.cfg import ControlFlowGraph
from gemmlab.techniques.groups import CP_ASYNC, Groups
from gemmlab.techniques.semantics import classify
from gemmlab.techniques.trace import Trace
from tests.gemmlab.techniques import kernels


@cache
def compiled(source: str, name: str, arch: str, options: tuple[str, ...] = ()):
    return gemmlab.compile(source, name, arch=arch, options=options)


@cache
def program(source: str, name: str, arch: str, options: tuple[str, ...] = ()) -> T.Program:
    return T.programs(compiled(source, name, arch, options))[0]


def kinds(instructions) -> list[str]:
    return [classify(i).kind for i in instructions]


# ------------------------------------------------------------------ listing

@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_the_listing_holds_the_kernel_its_labels_and_each_instruction_in_parts(arch: str) -> None:
    from gemmlab.compiling.sass import disassemble

    text = disassemble(compiled(kernels.RING, "ring", arch).cubin, "ring")
    parsed = listing.parse(text)
    assert parsed.arch == arch
    (kernel,) = parsed.kernels()
    assert kernel.name == "ring" and kernel.entry
    addresses = [i.address for i in kernel.instructions]
    assert addresses == sorted(addresses) and len(set(addresses)) == len(addresses)
    assert kernel.labels and all(kernel.at(a) is not None for a in kernel.labels.values())
    copies = [i for i in kernel.instructions if i.base == "LDGSTS"]
    assert copies and all(len(c.operands) == 2 and c.operands[1].startswith(("desc[", "[")) for c in copies)
    branches = [i for i in kernel.instructions if i.base == "BRA"]
    assert branches and all(listing.branch_target(i, kernel) is not None for i in branches)
    graph = ControlFlowGraph.of(parsed, "ring")
    assert any(len(b.successors) == 2 for b in graph.blocks), "a conditional branch (guard or uniform predicate)"
    padding = [i for i in kernel.instructions if i.predicate == "@!PT"]
    assert all(i.never_runs and classify(i).kind == "none" for i in padding)


def test_operands_split_at_top_level_commas_only() -> None:
    assert listing.split_operands("R2, desc[UR8][R8.64+0x10], c[0x0][0x28], `(.L_x_3)`") == (
        "R2", "desc[UR8][R8.64+0x10]", "c[0x0][0x28]", "`(.L_x_3)`")


def test_a_listing_without_labels_resolves_branch_targets_by_address() -> None:
    text = ("\t.section\t.text.k,\"ax\",@progbits\n\t.other\tk,@\"STO_CUDA_ENTRY STV_DEFAULT\"\nk:\n"
            "        /*0000*/                   MOV R1, 0x1 ;\n"
            "        /*0010*/               @P0 BRA 0x30 ;\n"
            "        /*0020*/                   MOV R2, 0x2 ;\n"
            "        /*0030*/                   EXIT ;\n")
    parsed = listing.parse(text)
    graph = ControlFlowGraph.of(parsed, "k")
    assert [len(b.instructions) for b in graph.blocks] == [2, 1, 1]
    assert sorted(graph.blocks[0].successors) == [1, 2] and not graph.loops


# ------------------------------------------------------------------ control flow, loops, regions

def test_every_main_loop_of_the_ring_holds_copy_commit_wait_and_barrier() -> None:
    """ptxas unrolls the ring's loop four times and keeps a loop for the remainder: two main loops, each a ring."""
    p = program(kernels.RING, "ring", "sm_80")
    assert p.main_loops
    for loop in p.main_loops:
        inside = kinds(p.graph.instructions(loop.body))
        for kind in ("cp.async", "cp.async.commit", "async.wait", "barrier"):
            assert kind in inside
        assert not set(p.region("prologue")) & set(loop.body)
    epilogue = kinds(p.graph.instructions(p.region("epilogue")))
    assert "store" in epilogue and "cp.async" not in epilogue


def test_a_loop_the_compiler_keeps_inside_is_nested_and_the_copy_loop_stays_the_main_loop() -> None:
    p = program(kernels.RING, "ring", "sm_80", ("-DINNER",))
    nested = [lp for lp in p.graph.loops if lp.parent is not None]
    assert nested and all(lp.body < p.graph.loops[lp.parent].body for lp in nested)
    (main,) = p.main_loops
    assert "cp.async" in kinds(p.graph.instructions(main.body)) and main.parent is None


def test_a_device_function_kept_out_of_line_is_copied_in_at_its_call() -> None:
    p = program(kernels.RING, "ring", "sm_80", ("-DCALL",))
    assert any(i.base == "CALL" for i in p.graph.instructions()), "the wait must stay out of line for this test"
    assert not p.graph.opaque_calls and p.main_loops
    for loop in p.main_loops:
        assert "async.wait" in kinds(p.graph.instructions(loop.body))
    assert any(b.context for b in p.graph.blocks), "the callee's blocks carry their call site"


# ------------------------------------------------------------------ cp.async groups

@pytest.mark.parametrize("wait, pending", [(0, 0), (1, 1)])
def test_the_groups_pending_after_a_wait_are_what_wait_prior_leaves(wait: int, pending: int) -> None:
    p = program(kernels.RING, "ring", "sm_80", (f"-DWAIT={wait}",))
    groups = Groups(p.graph, CP_ASYNC)
    inside = set().union(*[loop.body for loop in p.main_loops])
    waits = groups.each(lambda i: classify(i).kind == "async.wait", inside)
    assert waits
    for b, i, _ins, _states in waits:
        assert max(s.committed_data for s in groups.after(b, i)) == pending
    reads = groups.each(lambda i: classify(i).kind == "load" and classify(i).space == "shared", inside)
    assert reads and all(all(s.synced for s in states) for *_, states in reads), "the barrier comes before the read"


# ------------------------------------------------------------------ values: mbarrier addresses and parities

def test_waits_name_their_barrier_and_parity() -> None:
    waits = Trace(program(kernels.BARRIERS, "bars", "sm_90a")).of("mbarrier.wait")
    assert len(waits) == 2
    assert waits[0].args["barrier"] != waits[1].args["barrier"]
    assert [w.args["parity"] for w in waits] == [1, 0]


def test_the_mma_of_a_wmma_tile_is_two_m16n8k16_fed_from_global_memory() -> None:
    p = program(kernels.WMMA_TILE, "tile", "sm_80")
    report = T.check(p.listing and T.MachineCode(compiled(kernels.WMMA_TILE, "tile", "sm_80").cubin, "tile", "tile"),
                     [T.mma("m16n8k16", count=2, only=True), T.fragments_by("ldmatrix", where="anywhere")])
    findings = {f.check.split("(")[0]: f for _, f in report.findings}
    assert findings["mma"].passed
    assert not findings["fragments_by"].passed and "global memory" in findings["fragments_by"].message


def test_a_copy_that_overwrites_shared_memory_before_a_barrier_after_its_reads_is_found() -> None:
    """The loop's last barrier keeps a fast thread from copying the next tile over one a slow thread still reads."""
    def found(options):
        code = T.MachineCode(compiled(kernels.RING, "ring", "sm_80", options).cubin, "ring", "ring")
        (finding,) = [f for _, f in T.check(code, [T.refills_after_barrier()]).findings]
        return finding

    assert found(()).passed
    wrong = found(("-DNO_REFILL_BARRIER",))
    assert not wrong.passed and "no barrier since the last read of shared memory" in wrong.message, wrong.message


@pytest.mark.parametrize("bf16", [False, True])
def test_an_mma_names_the_type_it_multiplies(bf16: bool) -> None:
    """HMMA.16816.F32 multiplies fp16, HMMA.16816.F32.BF16 bf16: a bf16 kernel built on the fp16 MMA is told so."""
    options = ("-DBF16",) if bf16 else ()
    code = T.MachineCode(compiled(kernels.MMA_INPUTS, "one_mma", "sm_90a", options).cubin, "one_mma", "one_mma")
    right, wrong = ("bf16", "f16") if bf16 else ("f16", "bf16")
    assert T.check(code, [T.mma("m16n8k16", count=1, only=True, inputs=right)]).passed
    report = T.check(code, [T.mma("m16n8k16", only=True, inputs=wrong)])
    (finding,) = [f for _, f in report.findings]
    assert not finding.passed and f"on {wrong} inputs" in finding.message and f"1 mma.sync m16n8k16 on {right} inputs" \
        in finding.message, finding.message
    with pytest.raises(ValueError, match="inputs="):
        T.mma("m16n8k16", inputs="fp8")


def test_a_warps_addresses_are_evaluated_lane_by_lane() -> None:
    from gemmlab.techniques.datapath import warp_sectors

    p = program(kernels.RING, "ring", "sm_80")
    copies = p.where("cp.async", "main_loop")
    assert copies and all(warp_sectors(p, s) == (16, 16) for s in copies), "32 lanes x 16 consecutive bytes"
    assert T.check(T.MachineCode(compiled(kernels.RING, "ring", "sm_80").cubin, "ring", "ring"),
                   [T.coalesced(where="main_loop")]).passed
