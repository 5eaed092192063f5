"""How fast does the grader grade, and does it stay right under fire?

Prints three tables (run on a GPU machine with bubblewrap on PATH):

1. one complete submission (every assignment, the solutions handed in) graded on one GPU;
2. throughput: N complete submissions (one in five hostile) on 1 GPU, then on 2, through the local
   workers and through a local Ray cluster: the speed-up, whether every grade equals the 1-GPU run's,
   what held the speed-up down (worker-seconds that grew, workers idle at the end, one core's pace
   before each run), and the capstone's graded timings against the noise of the capstone graded alone
   before and after (pooled);
3. 50 submissions, one in five hostile (hangs, os._exit, endless output, edited tests, torch.matmul
   instead of the kernel, a malformed cell, and the cheats that used to work in the student's kernel:
   an always-equal answer, a redefined helper, patched builtins and comparisons, a trace hook, an
   IPython startup file, dropped error replies): every grade recorded, each honest hand-in's grade
   equal to a clean re-grade of it alone, and no hostile one above it.

    python benchmarks/grading.py                          # all three
    python benchmarks/grading.py --only one --assignments 00_gpu_and_roofline
    python benchmarks/grading.py --only one --workers-per-gpu 10 --profile   # and the slowest cells, per kernel
    python benchmarks/grading.py --only scale --students 5 --gpus 0,1 --workers-per-gpu 4 --mode both
    python benchmarks/grading.py --only hostile --students 50
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from gemmlab.timing.bench import BenchResult

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from autograder import schedule  # noqa: E402
from autograder.cell_metadata import grade_id, is_answer, is_graded  # noqa: E402
from autograder.console import table  # noqa: E402
from autograder.course import Course  # noqa: E402
from autograder.reports.store import gradebook_scores  # noqa: E402
from autograder.records import GradeJob, Limits, SubmissionResult  # noqa: E402
from gemmlab.errors import GemmlabError  # noqa: E402
from gemmlab.running.isolate import folder_until_exit  # noqa: E402
from gemmlab.timing.spread import LEVEL  # noqa: E402
from usage import UsageSampler, cpu_pace  # noqa: E402


def _course(assignments: list[str], source: Path = ROOT) -> Course:
    """A fresh course folder with these assignments of ``source`` (its solutions/ and course/)."""
    root = folder_until_exit("gemmlab-gradebench-")    # graded copies of the course: not kept
    for a in assignments:
        shutil.copytree(source / "solutions" / a, root / "solutions" / a)
        if (source / "course" / a).is_dir():    # else the release nbgrader generates
            shutil.copytree(source / "course" / a, root / "course" / a)
    c = Course(root)
    for a in assignments:
        c.ensure_gradebook(a)
    return c


#: Appended to the first answer cell of a hostile hand-in, by kind.
HOSTILE_LINES = {
    "loop": "while True:\n    pass\n",
    "exit": "import os\nos._exit(1)\n",
    "print_forever": "while True:\n    print('x' * 10000)\n",
    "matmul": "import torch\n_mm = torch.matmul\n",
    "always_equal": "class _Eq:\n    def __eq__(self, other): return True\n    def __hash__(self): return 0\n"
                    "for _n, _v in list(globals().items()):\n"
                    "    if callable(_v) and getattr(_v, '__module__', '') == '__main__' and not _n.startswith('_'):\n"
                    "        globals()[_n] = lambda *a, **k: _Eq()\n",
    "helpers_redefined": "import builtins, math, random, sys\nmath.isclose = lambda *a, **k: True\n"
                         "builtins.sorted = lambda x, *a, **k: list(x)\nrandom.choice = lambda seq: seq[0]\n"
                         "sys.settrace(lambda *a: None)\n",
    "startup_and_replies": "import os, pathlib\n_d = pathlib.Path(os.environ.get('IPYTHONDIR', pathlib.Path.home() / "
                           "'.ipython')) / 'profile_default' / 'startup'\n_d.mkdir(parents=True, exist_ok=True)\n"
                           "(_d / '00.py').write_text('import math\\nmath.isclose = lambda *a, **k: True\\n')\n"
                           "_ip = get_ipython()\n_send = _ip.kernel.session.send\n"
                           "_ip.kernel.session.send = lambda s, m, *a, **k: None if isinstance(m, dict) and "
                           "m.get('content', {}).get('status') == 'error' else _send(s, m, *a, **k)\n",
}
#: Hostile kinds that change the notebook itself rather than an answer.
SHAPE_KINDS = ("edit_tests", "number_source")


def _hostile(nb: dict, kind: str) -> dict:
    """A hostile variant of a solutions notebook (first answer cell or the test cells changed)."""
    nb = copy.deepcopy(nb)
    cells = nb["cells"]
    answers = [c for c in cells if is_answer(c) and c["cell_type"] == "code"]
    tests = [c for c in cells if is_graded(c) and not is_answer(c)]
    src = lambda c: "".join(c["source"]) if isinstance(c["source"], list) else c["source"]  # noqa: E731
    if kind == "edit_tests":
        for c in tests:
            c["source"] = "pass"
    elif kind == "number_source":
        cells.insert(0, {"cell_type": "code", "source": 5, "metadata": {}, "outputs": []})
    elif answers:
        first = answers[0]
        first["source"] = src(first) + "\n" + HOSTILE_LINES[kind]
    return nb


def _handed_in(c: Course, a: str, name: str) -> dict:
    """The student release with the solutions' answers filled in: what a perfect student hands in."""
    answers = {grade_id(cell): cell["source"] for cell in json.loads((c.source / a / name).read_text())["cells"]
               if is_answer(cell) and grade_id(cell)}
    nb = json.loads(c.release_notebook(a, name).read_text())
    for cell in nb["cells"]:
        if grade_id(cell) in answers:
            cell["source"] = answers[grade_id(cell)]
    return nb


def _jobs(c: Course, assignments: list[str], students: list[str], limits: Limits, sandbox: bool,
          hostile_every: int = 0) -> list[GradeJob]:
    kinds = [*HOSTILE_LINES, *SHAPE_KINDS]
    jobs = []
    for i, s in enumerate(students):
        for j, a in enumerate(assignments):
            for name in c.notebooks(a):
                nb = _handed_in(c, a, name)
                if hostile_every and i % hostile_every == hostile_every - 1:
                    # a hostile student tries another kind in each assignment, so few students cover them all
                    nb = _hostile(nb, kinds[(i // hostile_every + j) % len(kinds)])
                folder = c.submitted / s / a
                folder.mkdir(parents=True, exist_ok=True)
                (folder / name).write_text(json.dumps(nb))
            jobs.append(c.job(a, s, limits, sandbox))
    return jobs


def _recorder(c: Course) -> tuple[dict[tuple[str, str], SubmissionResult], Callable[[SubmissionResult], None]]:
    """``(results, on_result)``: records each result in the gradebook and prints it as it lands, so a run
    cut short still says how far it got and how long each took."""
    results: dict[tuple[str, str], SubmissionResult] = {}
    t0 = time.monotonic()

    def on_result(r: SubmissionResult) -> None:
        c.record(r)
        results[(r.student, r.assignment)] = r
        print(f"  graded {r.student}/{r.assignment}: {r.score:g}/{r.max_score:g} in {r.seconds:.1f} s "
              f"on {r.worker} ({time.monotonic() - t0:.0f} s so far)", flush=True)

    return results, on_result


def _grade(c: Course, jobs: list[GradeJob],
           gpus: list[str | None]) -> tuple[float, dict[tuple[str, str], SubmissionResult]]:
    """Grade through the local workers, one per entry of ``gpus``: (seconds, results)."""
    results, on_result = _recorder(c)
    t0 = time.monotonic()
    schedule.grade_local(jobs, gpus, on_result)
    return time.monotonic() - t0, results


def _where() -> str:
    """Which machine the workers ran on: one GPU each, or CPU workers where there is no GPU."""
    from gemmlab.running.gpu import device_name, has_gpu

    return f"one {device_name()} each" if has_gpu() else "no GPU: CPU workers, GPU cells only compile"


#: A capstone whose "kernel" is torch elementwise work (a broadcast multiply and sum): no library GEMM, no kernel.
ELEMENTWISE_CAPSTONE = ("\ndef capstone_gemm(A, B, D):\n"
                        "    for i in range(0, A.shape[0], 256):\n"
                        "        D[i:i + 256] = (A[i:i + 256, None, :].float() * B[None, :, :].float()).sum(-1).to(D.dtype)\n")


def bench_one(args, limits) -> None:
    """One complete honest submission (the target), the untouched release (must score 0) and, where the
    capstone is graded, a capstone computed by torch elementwise work (must lose its correctness and speed points)."""
    c = _course(args.assignments, args.course_root)
    jobs = _jobs(c, args.assignments, ["one"], limits, not args.no_sandbox)
    took, results = _grade(c, jobs, args.gpus[:args.workers_per_gpu])   # the first GPU's workers
    rows = [["honest", a, f"{results[('one', a)].score:g}/{results[('one', a)].max_score:g}",
             f"{results[('one', a)].seconds:.1f}", _not_passed(results[("one", a)]), _in_student(results[("one", a)])]
            for a in args.assignments]
    for a in args.assignments:
        for name in c.notebooks(a):
            folder = c.submitted / "untouched" / a
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(c.release_notebook(a, name).read_text())
    _, untouched = _grade(c, [c.job(a, "untouched", limits, not args.no_sandbox) for a in args.assignments],
                          args.gpus[:args.workers_per_gpu])
    rows += [["untouched release", a, f"{r.score:g}/{r.max_score:g}", f"{r.seconds:.1f}", "", ""]
             for (_, a), r in sorted(untouched.items())]
    if "09_capstone" in args.assignments:
        a = "09_capstone"
        for name in c.notebooks(a):
            nb = _handed_in(c, a, name)
            for cell in nb["cells"]:
                if grade_id(cell) == "capstone":
                    src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                    cell["source"] = src + ELEMENTWISE_CAPSTONE
            folder = c.submitted / "elementwise" / a
            folder.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(json.dumps(nb))
        _, ew = _grade(c, [c.job(a, "elementwise", limits, not args.no_sandbox)], args.gpus[:1])
        r = ew[("elementwise", a)]
        rows.append(["torch elementwise capstone", a, f"{r.score:g}/{r.max_score:g}", f"{r.seconds:.1f}",
                     _not_passed(r), _in_student(r)])
        for cell in r.cells:
            if cell.status != "passed":
                print(f"elementwise capstone, {cell.grade_id}: {cell.message[:300]}")
    print(table(rows, ["hand-in", "assignment", "score", "seconds", "tests not passed", "tests run in the student's process"]))
    _print_slowest_cells(results)
    from gemmlab.running.gpu import device_name, has_gpu

    where = f"on one {device_name()}" if has_gpu() else "without a GPU (GPU cells only compile; the target is for an H100)"
    workers = f", {args.workers_per_gpu} notebooks at a time" if args.workers_per_gpu > 1 else ""
    print(f"one complete submission: {took:.1f} s {where}{workers} (target ≤ 180 s on one H100)\n")


def _print_slowest_cells(results: dict[tuple[str, str], SubmissionResult], top: int = 15) -> None:
    """With GEMMLAB_GRADE_PROFILE set (``--profile``): the cells that took longest, in either kernel."""
    from autograder.harness.runner import PROFILE_ENV

    if not os.environ.get(PROFILE_ENV):
        return
    took = []
    for r in results.values():
        for event in r.events:
            where, _, said = event.partition(": took ")
            if said:
                seconds = [float(part.split(" s in the ")[0]) for part in said.split(", ")]
                took.append((max(seconds), where, said))
    rows = [[where, said] for _, where, said in sorted(took, reverse=True)[:top]]
    print(table(rows, ["cell", "time"]))


def _in_student(r: SubmissionResult) -> str:
    """Graded tests whose verdict came from the student's kernel (CuTe DSL tests that read PTX or resources)."""
    return ", ".join(c.grade_id for c in r.cells if not c.judged and c.status != "manual")[:120]


def _not_passed(r: SubmissionResult) -> str:
    return ", ".join(f"{c.grade_id} ({c.status})" for c in r.cells if c.status != "passed")[:120]


CAPSTONE, SPEED_TEST = "09_capstone", "test_capstone_speed_slow"


def _timings(r: SubmissionResult) -> dict[tuple, "BenchResult"]:
    """The capstone speed test's graded timings (bench_gemm results it published), by (shape, dtype)."""
    from gemmlab.timing.bench import BenchResult

    return {(tuple(b.shape), b.dtype): b for cell in r.cells if cell.grade_id == SPEED_TEST
            for b in (BenchResult.from_dict(p.data) for p in cell.results if p.kind == "bench")}


def _grade_ray(c: Course, jobs: list[GradeJob], gpus: list[str], workers_per_gpu: int
               ) -> tuple[float, dict[tuple[str, str], SubmissionResult]]:
    """Grade on a Ray cluster started here for the run: ``len(gpus)`` GPUs, ``workers_per_gpu`` tasks
    on each (a fractional GPU per task), as many CPU slots as the local workers would have."""
    import os

    import ray

    results, on_result = _recorder(c)
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)   # the cluster sees these GPUs and no others
    t0 = time.monotonic()
    try:   # on a machine without GPUs the cluster counts these as GPUs, and their tests are "needs a GPU"
        schedule.grade_ray(jobs, on_result, gpus_per_task=1 / workers_per_gpu,
                           init_kwargs={"num_cpus": len(gpus) * workers_per_gpu, "num_gpus": len(gpus)})
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
    return time.monotonic() - t0, results


def _honest_timings(runs: dict[tuple[str, str], SubmissionResult], hostile: set[str]
                    ) -> dict[str, dict[tuple, "BenchResult"]]:
    """Each honest student's graded capstone timings, by student."""
    return {student: _timings(r) for (student, a), r in sorted(runs.items()) if a == CAPSTONE and student not in hostile}


def noise_rows(label: str, timings: dict[str, dict[tuple, "BenchResult"]], solo: dict[tuple, "BenchResult"],
                level: float) -> tuple[list[list[str]], int, int]:
    """Each student's timings against the solo reference's: rows, how many comparisons, how many
    beyond the noise."""
    rows, n, beyond = [], 0, 0
    for student, theirs in sorted(timings.items()):
        for key, b in sorted(theirs.items()):
            if key not in solo:
                continue
            try:
                cmp = b.compare(solo[key], level=level)
            except GemmlabError as exc:      # e.g. a run without rounds: say so, never drop the row
                rows.append([label, student, f"{key[0][0]}³ {key[1]}", f"{b.ratio:.3f}", f"{solo[key].ratio:.3f}",
                             "", f"not comparable: {exc}"[:80]])
                continue
            n += 1
            beyond += not cmp.within_noise
            rows.append([label, student, f"{key[0][0]}³ {key[1]}", f"{b.ratio:.3f}", f"{solo[key].ratio:.3f}",
                         f"{cmp.ratio:.3f} ({cmp.low:.3f}–{cmp.high:.3f})", cmp.verdict])
    return rows, n, beyond


def _solo_timings(args, limits, name: str) -> dict[tuple, "BenchResult"]:
    """The capstone graded alone (one worker on the first GPU, nothing else running): its graded timings."""
    c = _course([CAPSTONE], args.course_root)
    jobs = _jobs(c, [CAPSTONE], [name], limits, not args.no_sandbox)
    _, alone = _grade(c, jobs, args.gpu_ids[:1])
    timings = _timings(alone[(name, CAPSTONE)])
    print(f"{name} capstone timings: {len(timings)} on GPU {args.gpu_ids[0]}", flush=True)
    return timings


def pooled_timings(first: dict[tuple, "BenchResult"], second: dict[tuple, "BenchResult"]
                   ) -> dict[tuple, "BenchResult"]:
    """Per problem, both solo runs' rounds as one reference: its spread holds the drift between runs
    (clocks, temperature) as well as the spread within one, which a single run's interval leaves out."""
    import dataclasses
    import statistics

    from gemmlab.timing.spread import median_interval

    out = {}
    for key in first.keys() & second.keys():
        a, b = first[key], second[key]
        rounds = a.round_ratios + b.round_ratios
        if len(rounds) < 2:      # runs without rounds: nothing to pool; the comparison will say so
            out[key] = a
            continue
        low, high, coverage = median_interval(rounds)
        out[key] = dataclasses.replace(a, label="solo runs, pooled", round_ratios=rounds, rounds=len(rounds),
                                       ratio=statistics.median(rounds), ratio_low=low, ratio_high=high,
                                       coverage=coverage)
    return out


def _seconds(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.2f} s"


def packing(worker_seconds: float, workers: int, took: float) -> tuple[float, float]:
    """``(bound, efficiency)`` of one run: the wall time perfect packing would take (every worker busy
    until the end, ``worker_seconds / workers``) and how much of the run's wall time that is. Why: a
    speed-up below the target is either work that grew when more workers ran at once (the bound grows)
    or workers left idle at the end of the run (efficiency drops); only the second is the scheduler's."""
    bound = worker_seconds / max(1, workers)
    return bound, (bound / took if took > 0 else 0.0)


def bench_scale(args, limits) -> None:
    """N complete submissions, one in five hostile, graded on one GPU and then on two, through the local
    workers (``--gpus``) and through a local Ray cluster (``--ray local``): wall time, speed-up, whether
    every grade equals the first 1-GPU run's, and whether the capstone's graded timings stay within the
    noise of a solo run (two workers timing at once on one host must not change each other's numbers).
    The capstone is graded alone before and after the runs; the two solo runs compared with each other
    show the run-to-run spread, and the graded timings are compared with both runs' rounds pooled."""
    students = [f"s{i:03d}" for i in range(args.students)]
    every = args.hostile_every
    hostile = {s for i, s in enumerate(students) if i % every == every - 1}
    modes = ["gpus", "ray"] if args.mode == "both" else [args.mode]
    ids = args.gpu_ids
    timed_solo = CAPSTONE in args.assignments and ids[0] is not None
    before = _solo_timings(args, limits, "solo") if timed_solo else {}
    rows, times, grades, noise, work, pace = [], {}, {}, [], {}, {}
    for mode in modes:
        for n_gpu in (1, 2):
            gpus = [g for g in ids[:n_gpu] if g is not None]
            if len(gpus) < n_gpu:
                print(f"{mode}: {n_gpu} GPUs asked for, {len(ids)} here; skipped")
                continue
            c = _course(args.assignments, args.course_root)
            jobs = _jobs(c, args.assignments, students, limits, not args.no_sandbox, hostile_every=every)
            pace[(mode, n_gpu)] = cpu_pace(args.pace_iterations) if args.pace_iterations > 0 else None
            print(f"{mode}, {n_gpu} GPU(s), {args.workers_per_gpu} worker(s) each: {len(jobs)} jobs; one core's "
                  f"pace before it: {_seconds(pace[(mode, n_gpu)])} for a fixed loop", flush=True)
            with UsageSampler() as sampler:
                if mode == "ray":
                    took, results = _grade_ray(c, jobs, gpus, args.workers_per_gpu)
                else:
                    took, results = _grade(c, jobs, [g for g in gpus for _ in range(args.workers_per_gpu)])
            print(f"{mode}, {n_gpu} GPU(s): {sampler.usage.summary()}", flush=True)
            times[(mode, n_gpu)] = took
            grades[(mode, n_gpu)] = {k: r.score for k, r in results.items()}
            worker_seconds = sum(r.seconds for r in results.values())
            work[(mode, n_gpu)] = (worker_seconds, n_gpu * args.workers_per_gpu)
            bound, efficiency = packing(worker_seconds, n_gpu * args.workers_per_gpu, took)
            rows.append([mode, str(n_gpu), str(len(students)), str(len(hostile)), f"{took:.1f}",
                         f"{len(students) / took * 60:.2f}", f"{worker_seconds:.0f}", f"{bound:.1f}",
                         f"{efficiency:.0%}"])
            noise.append((f"{mode}, {n_gpu} GPU(s)", results))
    print(table(rows, ["scheduler", "GPUs", "submissions", "hostile", "seconds", "submissions/min",
                       "worker-seconds", "perfectly packed (s)", "packing"]))
    first = next(iter(grades), None)
    for mode in modes:
        if (mode, 1) in times and (mode, 2) in times:
            print(f"{mode}: speed-up 1 → 2 GPUs {times[(mode, 1)] / times[(mode, 2)]:.2f}× (target ≥ 1.8×)")
            (w1, n1), (w2, n2) = work[(mode, 1)], work[(mode, 2)]
            if w1 > 0 and w2 > 0:
                print(f"{mode}: worker-seconds {w1:.0f} → {w2:.0f} ({w2 / w1 - 1:+.0%}) with twice the workers; "
                      f"perfectly packed, the speed-up would be {(w1 / n1) / (w2 / n2):.2f}×")
            p1, p2 = pace.get((mode, 1)), pace.get((mode, 2))
            if p1 and p2:
                print(f"{mode}: one core's pace before the runs {p1:.2f} s and {p2:.2f} s ({p2 / p1 - 1:+.0%}): "
                      "the host's own drift, which moves the speed-up by about as much")
    for key, got in grades.items():
        if key == first:
            continue
        base = grades[first]
        differ = sorted((k, base.get(k), got.get(k)) for k in set(base) | set(got) if base.get(k) != got.get(k))
        print(f"grades of {key[0]}, {key[1]} GPU(s) equal to {first[0]}, {first[1]} GPU's: "
              f"{'yes, all ' + str(len(got)) if not differ else f'no: {differ[:10]}'}")
    if timed_solo:
        after = _solo_timings(args, limits, "solo_after")
        control, n_control, beyond_control = noise_rows("solo after", {"solo": after}, before, LEVEL)
        print(table(control, ["run", "student", "problem", "ratio after", "ratio before", "after / before (interval)",
                              "verdict"]))
        print(f"the two solo runs differ beyond their noise in {beyond_control} of {n_control} timings: "
              "the run-to-run spread that one run's interval leaves out\n")
        solo = pooled_timings(before, after)
        graded = [(label, _honest_timings(runs, hostile)) for label, runs in noise]
        comparisons = sum(len(t) for _, by_student in graded for t in by_student.values()) or 1
        level = 1 - (1 - LEVEL) / comparisons       # family-wise: every comparison at once at LEVEL
        out, n, beyond = [], 0, 0
        for label, by_student in graded:
            r_, n_, b_ = noise_rows(label, by_student, solo, level)
            out, n, beyond = out + r_, n + n_, beyond + b_
        print(table(out, ["run", "student", "problem", "ratio graded", "ratio solo", "graded / solo (interval)",
                          "verdict"]))
        print(f"capstone timings beyond the noise of the solo run: {beyond} of {n} "
              f"(against both solo runs' rounds pooled; each interval at {level:.4f}, so all {n} together at "
              f"{LEVEL:.0%})\n")


def bench_hostile(args, limits) -> None:
    c = _course(args.assignments, args.course_root)
    students = [f"h{i:03d}" for i in range(args.students)]
    jobs = _jobs(c, args.assignments, students, limits, not args.no_sandbox, hostile_every=5)
    took, first = _grade(c, jobs, args.gpus)
    scores = {a: gradebook_scores(c.db_url, a) for a in args.assignments}
    missing = [(s, a) for s in students for a in args.assignments if s not in scores[a]]
    honest = [j for j in jobs if int(j.student[1:]) % 5 != 4]
    _, again = _grade(c, honest, args.gpus)   # the honest hand-ins alone, graded from scratch
    differ = [(k, first[k].score, again[k].score) for k in again if k in first
              and first[k].score != again[k].score]
    best_honest = {a: min(again[k].score for k in again if k[1] == a) for a in args.assignments
                   if any(k[1] == a for k in again)}
    above = [(k, first[k].score) for k in first if int(k[0][1:]) % 5 == 4 and k[1] in best_honest
             and first[k].score > best_honest[k[1]]]
    print(f"{len(students)} submissions ({len(students) // 5} hostile) × {len(args.assignments)} assignments in "
          f"{took:.1f} s with {len(args.gpus)} worker(s) ({_where()})")
    print(f"grades recorded: {sum(len(v) for v in scores.values())} of {len(students) * len(args.assignments)}; "
          f"missing: {missing or 'none'}")
    print(f"honest grades that differ from a clean re-grade of the honest hand-ins alone: {differ or 'none'}")
    print(f"hostile hand-ins graded above the honest ones: {above or 'none'}")
    hostile = [k for k in first if int(k[0][1:]) % 5 == 4]
    rows = [[s, a, f"{first[(s, a)].score:g}/{first[(s, a)].max_score:g}",
             "; ".join(first[(s, a)].events)[:90]] for s, a in sorted(hostile)[:20]]
    print(table(rows, ["student", "assignment", "score", "what happened"]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=["one", "scale", "hostile"])
    p.add_argument("--assignments", nargs="*", default=None, help="default: every assignment under solutions/")
    p.add_argument("--students", type=int, default=None, help="scale: 10, hostile: 50")
    p.add_argument("--gpus", default=None, help="GPU indices (default: every GPU)")
    p.add_argument("--workers-per-gpu", type=int, default=1,
                   help="grading workers sharing each GPU (compiles run on the CPU meanwhile; default 1)")
    p.add_argument("--mode", choices=["gpus", "ray", "both"], default="both",
                   help="scale: grade through the local workers (--gpus), a local Ray cluster, or both (default)")
    p.add_argument("--course-root", type=Path, default=ROOT,
                   help="the course to grade (its solutions/ and course/ folders; default: this repository's)")
    p.add_argument("--no-sandbox", action="store_true")
    p.add_argument("--cell-timeout", type=float, default=Limits.cell_s, help="seconds per instructor cell")
    p.add_argument("--answer-cell-timeout", type=float, default=Limits.answer_cell_s,
                   help="seconds per cell of the student's own code, where a hostile hand-in's endless loop runs")
    p.add_argument("--profile", action="store_true", help="one: list the cells that took longest, in either kernel")
    p.add_argument("--hostile-every", type=int, default=5,
                   help="scale: every Nth submission is hostile (default 5: one in five)")
    p.add_argument("--pace-iterations", type=int, default=10_000_000,
                   help="scale: the fixed loop that measures one core's pace before each run (0: skip)")
    args = p.parse_args()
    if args.profile:
        from autograder.harness.runner import PROFILE_ENV

        os.environ[PROFILE_ENV] = "1"          # the workers inherit it
    args.assignments = args.assignments or sorted(d.name for d in (args.course_root / "solutions").iterdir()
                                                  if d.is_dir() and any(d.glob("*.ipynb")))
    if args.gpus:
        args.gpus = args.gpus.split(",")
    else:
        try:
            import torch

            args.gpus = [str(i) for i in range(torch.cuda.device_count())] or [None]
        except ImportError:
            args.gpus = [None]
    args.workers_per_gpu = max(1, args.workers_per_gpu)
    args.gpu_ids = list(args.gpus)          # each GPU once (the scale runs take the first one, then two)
    args.gpus = [g for g in args.gpus for _ in range(args.workers_per_gpu)]
    limits = Limits(cell_s=args.cell_timeout, answer_cell_s=args.answer_cell_timeout)
    students = args.students
    if args.only in (None, "one"):
        bench_one(args, limits)
    if args.only in (None, "scale"):
        args.students = students or 10
        bench_scale(args, limits)
    if args.only in (None, "hostile"):
        args.students = students or 50
        bench_hostile(args, limits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
