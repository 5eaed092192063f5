"""Autograde one assignment: which hand-ins need grading, grading them where the instructor
chose (local workers or Ray), recording every result, and the summary of how it went.

A hand-in whose attempt (a digest of its notebooks) already has a result is not graded again
unless forced; its recorded result is written again instead, which changes nothing.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from . import schedule
from .course import Course
from .records import GradeJob, Limits, SubmissionResult, writable


@dataclass(frozen=True)
class Workers:
    """Where jobs run: locally, one worker per GPU in ``gpus`` (without GPUs, ``cpu_workers``
    workers), or on Ray (``ray``: "auto" for a running cluster, an address, or "local" to start one
    here with these GPUs and CPU workers)."""

    gpus: tuple[str, ...] = ()
    cpu_workers: int | None = None
    ray: str | None = None

    def local_slots(self) -> list[str | None]:
        """One entry per local worker: its GPU index, or None for a worker without one."""
        return list(self.gpus) or [None] * (self.cpu_workers or 1)

    def ray_init(self) -> dict:
        """``ray.init`` arguments for a cluster started here ({} when joining one)."""
        if self.ray != "local":
            return {}
        return {"num_cpus": self.cpu_workers or os.cpu_count(), "num_gpus": len(self.gpus) or self.cpu_workers or 1}


def local_gpus(indices: str | None = None) -> tuple[str, ...]:
    """The GPU indices to grade on: ``indices`` ("0,1"; repeat one to run several workers on it),
    else every GPU torch sees here (none without torch or a GPU)."""
    if indices:
        return tuple(g for g in indices.split(",") if g)
    try:
        import torch
    except ImportError:
        return ()
    return tuple(str(i) for i in range(torch.cuda.device_count()))


@dataclass(frozen=True)
class Plan:
    """What grading an assignment will do: the jobs to run and the recorded results reused."""

    assignment: str
    students: tuple[str, ...]
    jobs: tuple[GradeJob, ...]
    reused: tuple[SubmissionResult, ...]
    failed: tuple[tuple[str, str], ...] = ()      #: (student, why) whose hand-in could not even be planned


@dataclass
class Outcome:
    """Results by student (graded now or reused) and why the others could not be graded."""

    plan: Plan
    results: dict[str, SubmissionResult] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Whether every student has a result and every result graded the whole hand-in."""
        return not self.not_graded()

    def not_graded(self) -> dict[str, list[str]]:
        """Student -> what of their hand-in was not graded, and why (absent: all of it was graded)."""
        out: dict[str, list[str]] = {}
        for s in self.plan.students:
            r = self.results.get(s)
            if r is None:
                out[s] = [f"no result: {self.errors.get(s, 'the grader never reported back')}"]
            elif r.not_graded:
                out[s] = list(r.not_graded)
        return out

    def rows(self) -> list[list[str]]:
        """One row per student: student, score, max, seconds, notes."""
        rows = []
        for s in self.plan.students:
            r = self.results.get(s)
            if r is None:
                rows.append([s, "-", "-", "-", f"NOT GRADED: {self.errors.get(s, 'no result')}"[:70]])
                continue
            notes = [f"NOT ALL GRADED ({len(r.not_graded)})"] if r.not_graded else []
            notes += [f"{len(r.events)} events"] if r.events else []
            notes += [f"{len(r.flags)} flags"] if r.flags else []
            rows.append([s, f"{r.score:g}", f"{r.max_score:g}", f"{r.seconds:.0f}", ", ".join(notes) or "ok"])
        return rows

    def summary(self) -> str:
        """How many were graded, reused, the grading time and the mean score, then one line per
        student for what was not graded and why ('' when there were no students)."""
        if not self.plan.students:
            return ""
        graded = list(self.results.values())
        reused = {r.student for r in self.plan.reused}
        seconds = sum(r.seconds for r in graded if r.student not in reused)
        mean = f"; mean score {sum(r.score for r in graded) / len(graded):.2f}" if graded else ""
        lines = [f"{len(graded)} of {len(self.plan.students)} graded ({len(reused)} unchanged attempts reused); "
                 f"{seconds:.0f} s of grading{mean}"]
        missing = self.not_graded()
        if missing:
            lines.append(f"NOT GRADED, in part or whole, for {len(missing)} student(s):")
            lines += [f"  {s}: {why}" for s, whys in missing.items() for why in whys]
        return "\n".join(lines)


def plan(course: Course, assignment: str, students: list[str], limits: Limits, sandbox: bool,
         force: bool = False) -> Plan:
    """A job for every student whose current hand-in has no result yet (every student if ``force``)."""
    jobs, reused, failed = [], [], []
    for s in students:
        try:
            job = course.job(assignment, s, limits, sandbox)
            old = None if force else course.results.get(assignment, s, job.attempt)
        except Exception as exc:  # noqa: BLE001 - one hand-in that cannot be read never stops the class
            failed.append((s, f"the hand-in could not be read ({type(exc).__name__}: {str(exc)[:300]})"))
            continue
        if old is None:
            jobs.append(job)
        else:
            reused.append(old)
    return Plan(assignment, tuple(students), tuple(jobs), tuple(reused), tuple(failed))


def run(course: Course, plan: Plan, workers: Workers,
        on_step: Callable[[str], None] = lambda last: None) -> Outcome:
    """Record the reused results, grade the jobs and record each result as it lands; ``on_step``
    hears of every job done ("student score/max" or "student NOT GRADED")."""
    outcome = Outcome(plan)
    outcome.errors.update(writable(dict(plan.failed)))
    for old in plan.reused:
        try:
            course.record(old)
        except Exception as exc:  # noqa: BLE001 - an earlier record that cannot be written again never ends the run
            outcome.errors[old.student] = writable(f"its earlier result could not be recorded again "
                                                   f"({type(exc).__name__}: {str(exc)[:300]}); grade it again with --force")
            continue
        outcome.results[old.student] = old

    def on_result(result: SubmissionResult) -> None:
        try:
            course.record(result)
        except Exception as exc:  # noqa: BLE001 - one unrecordable result must not end the run
            outcome.errors[result.student] = writable(f"its result could not be recorded ({type(exc).__name__}: "
                                                      f"{str(exc)[:300]})")
            on_step(f"{result.student} NOT RECORDED")
            return
        outcome.results[result.student] = result
        on_step(f"{result.student} {result.score:g}/{result.max_score:g}" + (" (not all graded)" if result.not_graded
                                                                           else ""))

    def on_error(job: GradeJob, why: str) -> None:
        outcome.errors[job.student] = writable(why)
        on_step(f"{job.student} NOT GRADED")

    jobs = list(plan.jobs)
    if workers.ray is not None:
        schedule.grade_ray(jobs, on_result, address=None if workers.ray == "local" else workers.ray,
                           init_kwargs=workers.ray_init(), on_error=on_error)
    else:
        schedule.grade_local(jobs, workers.local_slots(), on_result, on_error=on_error)
    return outcome
