"""Mark the course's test cells that need a GPU, so the grader pays them out only on a GPU.

The grader reads ``metadata.gemmlab.needs_gpu = true`` from the instructor's source notebook
(``solutions/``), which no hand-in can change, and gives such a test its points only when the
worker that ran it has a GPU (``autograder.cell_metadata.needs_gpu``); elsewhere it is "not
graded: needs a GPU". Marking by list, not by reading the code: a test hides its kernel checks
inside ``if GPU:`` or falls back to compile-only checks, and would pass on a CPU grader.

Idempotent; touches only that metadata key; fails if a listed grade_id is missing (the notebook
changed: update the list). ``python tools/release.py`` carries the metadata to ``course/``.

    python tools/mark_gpu_cells.py            # mark solutions/*/*.ipynb
    python tools/mark_gpu_cells.py --check    # exit 1 if a notebook is not marked as listed
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:   # run as a script: tools/ is on the path, the repository is not
    sys.path.append(str(ROOT))

from autograder.cell_metadata import (DISPLAY_ONLY, GEMMLAB, JUDGE_ONLY, JUDGED, NEEDS_ARCH,  # noqa: E402
                                      NEEDS_GPU, grade_id, is_graded)

SOLUTIONS = ROOT / "solutions"

#: Per notebook, the graded cells whose points need the kernel to run on a GPU (correctness and speed).
#: Not listed: layout, index and machine-code-only tests, 07's sm_100a compile tests (test_bw_tile, test_bw_kloop,
#: test_bw_tmem) and 09's build test, which are graded the same with or without a GPU.
GPU_TESTS: dict[str, tuple[str, ...]] = {
    "00_gpu_and_roofline": (),
    "01_layouts_and_partitioning": ("test_copy_kernel_slow",),
    "02_tiled_copy": ("test_copy_kernel", "test_bandwidth"),
    "03_swizzle_and_banks": ("test_transpose",),
    "04_mma": ("test_simt_tile", "test_mma_tile"),
    "04b_tiled_mma": ("test_cta_kernel_slow",),
    "05_global_gemm": ("test_tile_order", "test_one_k_tile_slow", "test_gemm_correct_slow", "test_perf_bar_slow"),
    "06_pipelining": ("test_pipeline_kernel_slow", "test_performance_bar_slow"),
    "07_hopper": ("test_one_tile_slow", "test_pipelined_slow", "test_ws_slow", "test_ws_speed_slow"),
    "08_cuda_ladder": ("test_naive_slow", "test_smem_slow", "test_wmma_slow", "test_dbuf_slow", "test_swizzle_slow",
                       "test_swizzle_order", "test_any_slow", "test_any_speed_slow"),
    "09_capstone": ("test_capstone_correct_slow", "test_capstone_speed_slow"),
}


#: Per notebook, GPU tests that need a GPU family (a compute capability prefix, e.g. "sm_90" for
#: Hopper): on another GPU they are "not graded", like a GPU test on a worker without a GPU.
ARCH_TESTS: dict[str, dict[str, str]] = {
    "07_hopper": {"test_one_tile_slow": "sm_90", "test_pipelined_slow": "sm_90", "test_ws_slow": "sm_90",
                  "test_ws_speed_slow": "sm_90"},
}


#: Per notebook, tests of CuTe DSL kernels that the judge runs (GPU tests, and 09's build test): it records
#: each launch of the student's functions in the student's kernel and replays it on its own tensors
#: (gemmlab.answers); the instructor's cells that build DSL kernels run in the student's kernel, and
#: what they define (launchers, compiled kernels) reaches the judge as answers do (autograder/harness/runner.py). A compiled kernel reaches it
#: as a handle the student's kernel keeps (gemmlab.answers.stand_ins.CompiledAnswer): its module image is asked for
#: (the judge reads its machine code itself, gemmlab.techniques), its launches recorded.
JUDGED_TESTS: dict[str, tuple[str, ...]] = {
    "01_layouts_and_partitioning": ("test_copy_kernel_slow",),
    "02_tiled_copy": ("test_copy_kernel", "test_bandwidth"),
    "04_mma": ("test_simt_tile", "test_mma_tile"),
    "04b_tiled_mma": ("test_cta_kernel_slow",),
    "05_global_gemm": ("test_tile_order", "test_copies_and_mma_slow", "test_one_k_tile_slow", "test_gemm_correct_slow",
                       "test_perf_bar_slow"),
    "06_pipelining": ("test_pipeline_kernel_slow", "test_performance_bar_slow"),
    "07_hopper": ("test_one_tile_slow", "test_pipelined_slow", "test_ws_slow", "test_ws_speed_slow", "test_bw_tile",
                  "test_bw_grid", "test_bw_kloop", "test_bw_tmem"),
    "09_capstone": ("test_capstone_builds", "test_capstone_correct_slow", "test_capstone_speed_slow"),
}


#: Per notebook with judged tests, instructor cells that run in the judge alone when graded: nothing the student's
#: kernel runs after them reads what they define (tests/autograder/test_routing.py checks it), and they are costly
#: (05 compiles its C++ variants; the judge compiles them anyway to run them; 04's and 04b's C++ builds).
JUDGE_ONLY_CELLS: dict[str, tuple[str, ...]] = {
    "04_mma": ("build_simt_cpp", "build_tile_cpp"),
    "04b_tiled_mma": ("build_cta_cpp",),
    "05_global_gemm": ("build_cpp", "cpp_variants_slow"),
    "06_pipelining": ("build_cpp",),
}


#: Per notebook, instructor cells the grader runs in neither kernel: they only show something (timing tables, a
#: deadlock demo, self-checks that the tests repeat), define no public name and change nothing another cell reads
#: (tests/autograder/test_routing.py checks both, the second as a heuristic: an alias escapes it), and cost a
#: worker GPU and CPU time.
DISPLAY_ONLY_CELLS: dict[str, tuple[str, ...]] = {
    "03_swizzle_and_banks": ("profile_row_major_slow", "profile_yours_slow"),
    "04_mma": ("tile_check",),
    "04b_tiled_mma": ("cta_bench",),
    "05_global_gemm": ("coalescing_timing_slow", "faulty_run"),
    "06_pipelining": ("bench_more", "stall_readouts"),
    "07_hopper": ("deadlock_demo", "ws_sass_check", "bench_steps", "ws_timeline_recorded", "bw_many_ctas"),
    "08_cuda_ladder": ("seed_fault_run", "readouts"),
    "09_capstone": ("self_check", "self_speed", "self_score", "last_wave_timeline"),
}


class MarkError(RuntimeError):
    """The list and the notebook disagree; the message names the notebook and the grade_id."""


def marked(nb: dict, wanted: tuple[str, ...], where: str, arches: dict[str, str] | None = None,
           judged: tuple[str, ...] = (), judge_only: tuple[str, ...] = (), display_only: tuple[str, ...] = ()) -> dict:
    """``nb`` with ``needs_gpu`` set on exactly the graded cells in ``wanted``, ``needs_arch`` on those
    in ``arches`` and ``judged`` on those in ``judged``; ``judge_only`` and ``display_only`` on those ungraded
    cells (each removed elsewhere)."""
    arches = arches or {}
    if stray := [g for g in arches if g not in wanted]:
        raise MarkError(f"{where}: {', '.join(stray)} need an architecture but are not GPU tests: update tools/mark_gpu_cells.py")
    found = {grade_id(c): c for c in nb["cells"] if is_graded(c)}
    if stray := [g for g in judged if g not in found]:
        raise MarkError(f"{where}: no graded cell {', '.join(stray)} to judge: update JUDGED_TESTS in "
                        "tools/mark_gpu_cells.py")
    others = {grade_id(c): c for c in nb["cells"] if grade_id(c) and grade_id(c) not in found}
    if stray := [g for g in judge_only if g not in others]:
        raise MarkError(f"{where}: no ungraded instructor cell {', '.join(stray)} to run in the judge alone: update "
                        "JUDGE_ONLY_CELLS in tools/mark_gpu_cells.py")
    if stray := [g for g in display_only if g not in others or g in judge_only]:
        raise MarkError(f"{where}: no ungraded instructor cell {', '.join(stray)} to leave unrun when graded (or it is "
                        "also judge-only): update DISPLAY_ONLY_CELLS in tools/mark_gpu_cells.py")
    if missing := [g for g in wanted if g not in found]:
        raise MarkError(f"{where}: no graded cell {', '.join(missing)}: update GPU_TESTS in tools/mark_gpu_cells.py")
    for cell in nb["cells"]:
        meta = cell.setdefault("metadata", {})
        mine = found.get(grade_id(cell)) is cell
        other = others.get(grade_id(cell)) is cell
        for key, value, ours in ((NEEDS_GPU, True if grade_id(cell) in wanted else None, mine),
                                 (NEEDS_ARCH, arches.get(grade_id(cell)), mine),
                                 (JUDGED, True if grade_id(cell) in judged else None, mine),
                                 (JUDGE_ONLY, True if grade_id(cell) in judge_only else None, other),
                                 (DISPLAY_ONLY, True if grade_id(cell) in display_only else None, other)):
            if ours and value is not None:
                meta.setdefault(GEMMLAB, {})[key] = value
            elif key in meta.get(GEMMLAB, {}):
                del meta[GEMMLAB][key]
        if GEMMLAB in meta and not meta[GEMMLAB]:
            del meta[GEMMLAB]
    return nb


def mark_file(path: Path, wanted: tuple[str, ...], check: bool, arches: dict[str, str] | None = None,
              judged: tuple[str, ...] = (), judge_only: tuple[str, ...] = (), display_only: tuple[str, ...] = ()) -> bool:
    """Mark one notebook file (only if it changes); True when it was (or, with ``check``, would be) changed."""
    text = path.read_text()
    nb = marked(json.loads(text), wanted, str(path.relative_to(path.parents[2])), arches, judged, judge_only,
                display_only)
    new = json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"   # as nbformat writes
    if json.loads(new) == json.loads(text):
        return False
    if not check:
        path.write_text(new)
    return True


def main(argv: list[str] | None = None, solutions: Path = SOLUTIONS) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report notebooks that are not marked as listed")
    args = parser.parse_args(argv)
    changed = []
    for assignment, wanted in GPU_TESTS.items():
        for path in sorted((solutions / assignment).glob("*.ipynb")):
            try:
                if mark_file(path, wanted, args.check, ARCH_TESTS.get(assignment), JUDGED_TESTS.get(assignment, ()),
                             JUDGE_ONLY_CELLS.get(assignment, ()), DISPLAY_ONLY_CELLS.get(assignment, ())):
                    changed.append(path)
            except MarkError as err:
                print(err, file=sys.stderr)
                return 2
    for path in changed:
        print(f"{'not marked' if args.check else 'marked'}: {path.relative_to(solutions.parent)}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
