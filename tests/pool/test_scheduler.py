"""Fair queueing over the GPUs: round-robin per student, slots per GPU, one timing per GPU at a time."""
from __future__ import annotations

from pool.scheduler import FairScheduler

from .helpers import ScriptedExecutor, request


def test_one_students_burst_does_not_starve_a_classmate() -> None:
    executor = ScriptedExecutor(delay_s=0.05)
    scheduler = FairScheduler(executor, slots_per_gpu=1)
    a_jobs = [scheduler.submit("alice", request(f"gemm_a{i}")) for i in range(10)]
    b_job = scheduler.submit("bob", request("gemm_b0"))
    for job in a_jobs + [b_job]:
        assert job.future.result(timeout=30).report.passed
    scheduler.close()
    # alice's first job was already running; bob's is next, before alice's other nine.
    assert executor.started[:3] == ["gemm_a0", "gemm_b0", "gemm_a1"]
    assert b_job.future.result().queue_wait_s < a_jobs[2].future.result().queue_wait_s


def test_turns_alternate_between_students_with_queued_jobs() -> None:
    executor = ScriptedExecutor(delay_s=0.02)
    scheduler = FairScheduler(executor, slots_per_gpu=1)
    jobs = [scheduler.submit(s, request(f"gemm_{s[0]}{i}")) for s in ("alice", "bob") for i in range(3)]
    for job in jobs:
        job.future.result(timeout=30)
    scheduler.close()
    assert executor.started == ["gemm_a0", "gemm_b0", "gemm_a1", "gemm_b1", "gemm_a2", "gemm_b2"]


def test_at_most_one_timing_per_gpu_while_checks_share_it() -> None:
    executor = ScriptedExecutor(gpus=["gpu 0", "gpu 1"], delay_s=0.1)
    scheduler = FairScheduler(executor, slots_per_gpu=4)
    jobs = [scheduler.submit(f"s{i}", request(f"gemm_t{i}", "bench")) for i in range(4)]
    jobs += [scheduler.submit(f"c{i}", request(f"gemm_c{i}")) for i in range(6)]
    results = [job.future.result(timeout=30) for job in jobs]
    scheduler.close()
    assert all(r.report.passed for r in results)
    assert executor.most["bench"] == 2      # one per GPU, never two on one
    assert executor.most["check"] >= 4      # checks ran beside the timings
    for label in ("gpu 0", "gpu 1"):
        assert sum(r.gpu == label and r.report.action == "bench" for r in results) == 2


def test_a_failing_worker_is_that_jobs_error_and_the_queue_goes_on() -> None:
    scheduler = FairScheduler(ScriptedExecutor(), slots_per_gpu=1)
    broken = scheduler.submit("alice", request("gemm_broken"))
    fine = scheduler.submit("bob", request("gemm_fine"))
    report = broken.future.result(timeout=30).report
    assert report.verdict == "crashed" and "host went away" in report.error
    assert fine.future.result(timeout=30).report.passed
    scheduler.close()


def test_a_queued_job_can_be_withdrawn() -> None:
    scheduler = FairScheduler(ScriptedExecutor(delay_s=0.2), slots_per_gpu=1)
    running = scheduler.submit("alice", request("gemm_a0"))
    queued = scheduler.submit("bob", request("gemm_b0"))
    assert scheduler.stats() == {"queued": 1, "running": 1}
    assert scheduler.cancel(queued) and queued.future.cancelled()
    assert not scheduler.cancel(running)
    assert running.future.result(timeout=30).report.passed
    scheduler.close()


def test_profiles_hold_their_gpu_alone_like_timings() -> None:
    """A profile (ncu) or a trace and a timing never run at once on one GPU; checks go on beside either."""
    executor = ScriptedExecutor(gpus=["gpu 0"], delay_s=0.05)
    scheduler = FairScheduler(executor, slots_per_gpu=4)
    kinds = ["profile", "bench", "trace", "profile", "bench"]
    jobs = [scheduler.submit(f"s{i}", request(f"gemm_x{i}", kind)) for i, kind in enumerate(kinds)]
    jobs += [scheduler.submit(f"c{i}", request(f"gemm_c{i}")) for i in range(6)]
    results = [job.future.result(timeout=30) for job in jobs]
    scheduler.close()
    assert all(r.report.passed for r in results)
    assert executor.most_exclusive == {0: 1} and executor.most["check"] >= 2
    assert [r.report.action for r in results[:5]] == kinds and results[0].report.profile is not None
