"""Technique checks: does a kernel use the technique its exercise teaches? Read from its machine code.

A test cell states what the kernel must contain, and where, in the course's words::

    from gemmlab import techniques as T

    T.require(kernel, [
        T.copies("global", "shared", by="cp.async", bytes=16, where="main_loop"),
        T.commits_per_stage(),
        T.waits_in_main_loop(pending=STAGES - 2),
        T.pipelined(in_flight=STAGES - 1),
        T.fragments_by("ldmatrix", operands="AB", x=4),
        T.no_global_loads_outside_copies(),
        T.stores("global", bytes=16, where="epilogue"),
        T.mma("m16n8k16"),
    ], what="your pipelined kernel")

``require`` reads the SASS of the kernel's cubin (``nvdisasm``, no GPU needed), finds its main loop from the
control flow, answers every check and raises :class:`TechniqueError` naming each missing technique in a
sentence; ``check`` returns the :class:`TechniqueReport` instead. ``kernel`` is a compiled kernel
(``gemmlab.compile``, ``gemmlab.dsl.compile``), a launcher with ``build()``, or a function that launches DSL
kernels together with ``example=`` tensors (one call is recorded, not run). In the grader's judge the same
call reads the image the judge itself runs: a C++ kernel it compiled, a DSL kernel's module image, to which
every later launch of that kernel is then held (:mod:`.guards`). docs/TECHNIQUES.md lists the vocabulary,
what each check reads in SASS and what it cannot see.
"""
from __future__ import annotations

from typing import Any, Sequence

from .check import Check, Finding
from .datapath import coalesced, copies, fragments_by, loads, no_global_loads_outside_copies, no_local_memory, stores
from .images import MachineCode, TargetError, machine_code, program
from .instructions import instruction_counts, instructions, mma
from .pipeline import (arrives_once_per_warp, commits_per_stage, copies_land_before_reads, pipelined, refills_after_barrier,
                       releases_after_wgmma_wait, waits_in_main_loop)
from .probe import TileOrder, probe_tile_order
from .program import Program
from .report import TechniqueError, TechniqueReport
from .rows import stores_per_row
from .tcgen05 import (accumulates_after_first, commits_once_per_warp, mma_per_k_block, ring_waits, tmem_allocated,
                      tmem_read_out)
from .trace import Trace


def check(target: Any, checks: Sequence[Check], example: Sequence[Any] | None = None,
          what: str | None = None) -> TechniqueReport:
    """Answer ``checks`` for every kernel ``target`` stands for (see the module's docstring); nothing is raised
    for a missing technique: the report says it."""
    if isinstance(checks, Check):
        checks = [checks]
    if not checks or not all(isinstance(c, Check) for c in checks):
        raise TypeError("checks must be a list of technique checks (gemmlab.techniques.copies(...), ...)")
    codes = machine_code(target, example)
    label = what or f"your kernel {getattr(target, '__name__', '') or codes[0].label}".strip()
    report = TechniqueReport(label)
    for code in codes:
        p = program(code)
        report.findings += [(code.label, c(p)) for c in checks]
    from .guards import bind_checks_to_launches, in_judge_answer

    if in_judge_answer(target) and report.passed:
        bind_checks_to_launches(target, list(checks), codes, label)
    return report


def require(target: Any, checks: Sequence[Check], example: Sequence[Any] | None = None,
            what: str | None = None) -> TechniqueReport:
    """:func:`check`, then raise :class:`TechniqueError` (an AssertionError) naming every missing technique."""
    return check(target, checks, example, what).raise_if_failed()


def programs(target: Any, example: Sequence[Any] | None = None) -> list[Program]:
    """The analysable machine code of every kernel ``target`` stands for."""
    return [program(c) for c in machine_code(target, example)]


def events(target: Any, example: Sequence[Any] | None = None) -> Trace:
    """The mbarrier, TMA and tcgen05 events of ``target``'s (first) kernel in program order, operands resolved."""
    return Trace(programs(target, example)[0])


__all__ = ["Check", "Finding", "MachineCode", "Program", "TargetError", "TechniqueError", "TechniqueReport", "TileOrder",
           "Trace",
           "accumulates_after_first", "arrives_once_per_warp", "check", "coalesced", "commits_once_per_warp",
           "commits_per_stage", "copies",
           "copies_land_before_reads", "events", "fragments_by", "instruction_counts", "instructions", "loads", "machine_code", "mma",
           "mma_per_k_block", "no_global_loads_outside_copies", "no_local_memory", "pipelined", "probe_tile_order", "programs",
           "refills_after_barrier", "releases_after_wgmma_wait", "require", "ring_waits", "stores", "stores_per_row", "tmem_allocated", "tmem_read_out",
           "waits_in_main_loop"]
