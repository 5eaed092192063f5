"""Which Nsight Compute counters the students' readout asks for, and what each stall reason means.

Why a curated list: the full report has hundreds of numbers; a student asking "why is my kernel
slow" needs the handful the course teaches, each in a sentence, each pointing at the notebook that
treats it. Names are Nsight Compute's (verified on an H100 with ncu 2025.3 where FACTS.md says so);
one this GPU or ncu does not know is left out of the run and shown as "not measured".
"""
from __future__ import annotations

from dataclasses import dataclass

#: Speed of light: how busy each unit was, % of its peak over the kernel's run (the bars of the picture).
SPEED_OF_LIGHT: dict[str, tuple[str, ...]] = {
    # Several names for one bar: the first the GPU knows with a value wins (wgmma on Hopper, mma.sync before).
    "tensor pipe": ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed"),
    "issue slots": ("sm__inst_issued.avg.pct_of_peak_sustained_elapsed",),
    "L1 / shared": ("l1tex__throughput.avg.pct_of_peak_sustained_elapsed",),
    "L2": ("lts__throughput.avg.pct_of_peak_sustained_elapsed",),
    "DRAM": ("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
}
#: What each bar means, one sentence, and the notebook that treats it.
SPEED_OF_LIGHT_NOTES: dict[str, tuple[str, str]] = {
    "tensor pipe": ("cycles the tensor cores were busy: near 100% is a GEMM at its compute roof", "04, 07"),
    "issue slots": ("instructions issued per cycle against the four schedulers' peak: high with a low tensor pipe "
                    "means the warps are busy with other instructions (addresses, copies)", "04, 06"),
    "L1 / shared": ("traffic through the L1/shared-memory unit: shared-memory reads and writes, bank conflicts "
                    "included", "03, 06"),
    "L2": ("traffic through L2: tiles re-read by many CTAs; bigger tiles and a grouped raster lower it", "05, 08"),
    "DRAM": ("traffic to HBM: near 100% is a copy at its bandwidth roof; a large GEMM should stay well below",
             "00, 02"),
}

#: Shared-memory counters per instruction kind. On the H100 ncu counts ldmatrix under op_ld (FACTS.md).
SHARED: dict[str, dict[str, tuple[str, ...]]] = {
    "ld": {"instructions": ("smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_ldsm.sum"),
           "wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",),
           "conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",)},
    "st": {"instructions": ("smsp__inst_executed_op_shared_st.sum", "smsp__inst_executed_op_stsm.sum"),
           "wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",),
           "conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",)},
}
SHARED_LABELS = {"ld": "loads (ld.shared, ldmatrix)", "st": "stores (st.shared, stmatrix)"}
#: The instruction each count of SHARED[...]["instructions"] is, for the per-type breakdown.
SHARED_OPS = {"smsp__inst_executed_op_shared_ld.sum": "ld.shared", "smsp__inst_executed_op_ldsm.sum": "ldmatrix",
              "smsp__inst_executed_op_shared_st.sum": "st.shared", "smsp__inst_executed_op_stsm.sum": "stmatrix"}

OCCUPANCY = {
    "achieved_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "theoretical_pct": "sm__maximum_warps_per_active_cycle_pct",
    "registers_per_thread": "launch__registers_per_thread",
    "block_size": "launch__block_size",
    "grid_size": "launch__grid_size",
    "dynamic_smem": "launch__shared_mem_per_block_dynamic",
    "static_smem": "launch__shared_mem_per_block_static",
    "waves": "launch__waves_per_multiprocessor",
    "sms": "device__attribute_multiprocessor_count",
}
#: Blocks per SM each resource allows; the smallest is the limiter.
OCCUPANCY_LIMITS = {
    "registers": "launch__occupancy_limit_registers",
    "shared memory": "launch__occupancy_limit_shared_mem",
    "warps": "launch__occupancy_limit_warps",
    "blocks": "launch__occupancy_limit_blocks",
}
LIMIT_ADVICE = {
    "registers": "fewer registers per thread (a smaller tile per thread, or __launch_bounds__) would fit more "
                 "warps",
    "shared memory": "each CTA's shared memory (stages × tile) leaves room for this many CTAs; fewer stages or "
                     "a smaller tile fit more",
    "warps": "the threads per CTA fill the SM's 64 warps; that is the most there can be",
    "blocks": "the SM's limit on CTAs (32 on Hopper): tiny CTAs run out of CTA slots before anything else",
}

CLOCKS = {
    "time_ns": "gpu__time_duration.sum",
    "sm_hz": "sm__cycles_elapsed.avg.per_second",
    "dram_hz": "dram__cycles_elapsed.avg.per_second",
}


@dataclass(frozen=True)
class StallReason:
    """One warp stall reason of Nsight Compute: what it means in a sentence, and the notebook that treats it."""

    key: str
    title: str
    sentence: str
    notebook: str


STALLS: tuple[StallReason, ...] = (
    StallReason("long_scoreboard", "waiting for global memory",
                "a warp needs a value still on its way from global memory (L1TEX): load earlier, or overlap "
                "the next tile's loads with this tile's math", "06 (cp.async ring), 07 (TMA)"),
    StallReason("barrier", "waiting at a barrier",
                "warps wait at __syncthreads / a named barrier for the slowest warp of the CTA: fewer barriers "
                "per k-tile, or warps that do not all need to meet", "06, 07 (warp specialisation)"),
    StallReason("mio_throttle", "shared-memory queue full",
                "the queue of shared-memory instructions is full: too many ld.shared/ldmatrix, or bank "
                "conflicts making each one take several wavefronts", "03 (banks), 06"),
    StallReason("short_scoreboard", "waiting for shared memory",
                "a warp needs a value still on its way from shared memory (or a special-function result)",
                "03, 06 (register double buffering)"),
    StallReason("math_pipe_throttle", "math pipe busy",
                "the pipe the next instruction needs (often the tensor cores) is busy: for a GEMM, the good "
                "kind of stall", "04, 07"),
    StallReason("wait", "fixed-latency wait",
                "a fixed wait the compiler inserted after an instruction (a dependency with known latency): "
                "more independent instructions between them hide it", "04"),
    StallReason("lg_throttle", "global-memory queue full",
                "too many global-memory instructions in flight: wider (16-byte) or asynchronous copies issue "
                "fewer of them", "02 (vectorised copies), 05"),
    StallReason("sleeping", "sleeping",
                "warps suspended on purpose (nanosleep, or an mbarrier wait that suspends the warp)", "07"),
    StallReason("membar", "memory fence",
                "a warp waits for a memory fence (fence.proxy, __threadfence) to complete", "07"),
    StallReason("dispatch_stall", "dispatch stall",
                "the dispatcher could not hand the instruction to its pipe this cycle", "04"),
    StallReason("branch_resolving", "resolving a branch",
                "a warp waits for a branch target to be computed: divergent or data-dependent control flow",
                "05"),
    StallReason("no_instruction", "no instruction",
                "the next instruction was not fetched yet: a long unrolled body missing the instruction cache, "
                "or right after a branch", "06"),
    StallReason("imc_miss", "constant-cache miss", "a warp waits for a constant (kernel parameter) to be fetched",
                "05"),
    StallReason("drain", "draining stores", "the warp has exited and waits for its memory writes to drain", "05"),
    StallReason("tex_throttle", "texture queue full", "the texture unit's queue is full", "—"),
    StallReason("misc", "other", "a stall reason Nsight Compute files under 'misc'", "—"),
    StallReason("not_selected", "ready, not picked",
                "the warp could issue but another warp issued instead: enough warps to hide latency", "06"),
    StallReason("selected", "issuing", "the warp issued an instruction: not a stall, the work itself", "—"),
)
STALL_METRIC = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def stall_metric(reason: StallReason) -> str:
    return STALL_METRIC.format(reason.key)


def all_metrics() -> list[str]:
    """Every metric the readout asks ncu for, each once, in a stable order."""
    names: list[str] = []
    for candidates in SPEED_OF_LIGHT.values():
        names += candidates
    for kinds in SHARED.values():
        for candidates in kinds.values():
            names += candidates
    names += OCCUPANCY.values()
    names += OCCUPANCY_LIMITS.values()
    names += CLOCKS.values()
    names += [stall_metric(r) for r in STALLS]
    return list(dict.fromkeys(names))


__all__ = ["CLOCKS", "LIMIT_ADVICE", "OCCUPANCY", "OCCUPANCY_LIMITS", "SHARED", "SHARED_LABELS", "SHARED_OPS",
           "SPEED_OF_LIGHT",
           "SPEED_OF_LIGHT_NOTES", "STALLS", "STALL_METRIC", "StallReason", "all_metrics", "stall_metric"]
