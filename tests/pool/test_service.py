"""The HTTP service on a free port, with real judge processes of the fake backend (no GPU) unless said otherwise.

Covers what a student can send: good and bad tokens, requests over a limit, malformed,
oversized and hostile requests, kernels that hang or kill their judge, and a burst of one
student's requests beside a classmate's one.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from gemmlab.judge import JudgeReport
from gemmlab.judge.protocol import MAX_REQUEST_BYTES

from .helpers import Klass, ScriptedExecutor, call, request


def test_health_and_me(start, klass: Klass) -> None:
    service = start(concurrent_jobs=3)
    status, body, _ = call(service.url, "/v1/health")
    assert status == 200 and body["gpus"] and body["queued"] == 0 and "backend" not in body
    status, body, headers = call(service.url, "/v1/me", token=klass.tokens["alice"])
    assert status == 200 and body["student"] == "alice"
    assert body["limits"]["concurrent_jobs"] == 3 and body["usage"] == {"in_flight": 0, "gpu_seconds_last_hour": 0,
                                                                     "profiles_last_hour": 0}
    assert headers["Content-Type"].startswith("application/json")


def test_a_check_comes_back_with_its_gpu_and_times(start, klass: Klass) -> None:
    service = start()
    status, body, _ = call(service.url, "/v1/judge", request().to_json(), klass.tokens["alice"])
    assert status == 200, body
    report = JudgeReport.from_dict(body["report"])
    assert report.verdict == "passed" and report.device.startswith("fake GPU")
    assert body["gpu"].endswith("gpu 0") and body["queue_wait_s"] >= 0 and body["run_s"] > 0
    status, body, _ = call(service.url, "/v1/judge", request("gemm_wrong").to_json(), klass.tokens["alice"])
    assert status == 200 and body["report"]["verdict"] == "failed" and body["report"]["check"]["rows"]
    _, me, _ = call(service.url, "/v1/me", token=klass.tokens["alice"])
    assert me["usage"]["in_flight"] == 0 and me["usage"]["gpu_seconds_last_hour"] > 0


@pytest.mark.parametrize("case, words", [
    ("none", "no token"),
    ("malformed", "malformed"),
    ("unknown", "unknown"),
    ("expired", "expired on"),
])
def test_bad_tokens_get_401_with_the_reason(start, klass: Klass, case: str, words: str) -> None:
    service = start()
    token = {"none": None, "malformed": "let-me-in", "unknown": klass.tokens["alice"][:-4] + "0000",
             "expired": klass.expired}[case]
    for path, body in (("/v1/judge", request().to_json()), ("/v1/me", None)):
        status, answer, headers = call(service.url, path, body, token)
        assert status == 401 and words in answer["error"], answer
        assert headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("body, status, words", [
    ("{not json", 400, "not JSON"),
    ("[1, 2, 3]", 400, "JSON object"),
    ('{"spec": {"source": "x", "name": "k"}, "seed": 7}', 400, "seed"),
    ("[" * 100_000 + "]" * 100_000, 400, "not JSON"),
    (json.dumps({**request().to_dict(), "shapes": [[16384, 16384, 16384]]}), 400, "too large"),
    (json.dumps({**request().to_dict(), "limits": {"compile_s": 1e9, "kernel_s": 1}}), 400, "at most"),
    ("x" * (MAX_REQUEST_BYTES + 1), 413, "at most 1,048,576"),
])
def test_malformed_oversized_and_hostile_requests_get_a_clear_4xx(start, klass: Klass, body: str, status: int,
                                                                  words: str) -> None:
    service = start()
    got, answer, _ = call(service.url, "/v1/judge", body, klass.tokens["bob"])
    assert got == status and words in answer["error"], answer
    _, me, _ = call(service.url, "/v1/me", token=klass.tokens["bob"])
    assert me["usage"]["in_flight"] == 0  # a refused request holds nothing


def test_a_body_beyond_what_the_server_reads_is_cut_off_and_the_service_goes_on(start, klass: Klass) -> None:
    service = start()
    try:
        status, _, _ = call(service.url, "/v1/judge", b"x" * (8 << 20), klass.tokens["bob"])
        assert status == 400
    except OSError:  # the server closed the connection while the body was still being sent
        pass
    assert call(service.url, "/v1/health")[0] == 200


def test_unknown_endpoints_and_methods(start) -> None:
    service = start()
    status, body, _ = call(service.url, "/v1/secrets")
    assert status == 404 and "/v1/judge" in body["error"]
    assert call(service.url, "/v1/health", b"{}")[0] == 405


@pytest.mark.slow
def test_jobs_in_flight_over_the_limit_get_429_with_when_to_retry(start, klass: Klass) -> None:
    service = start(concurrent_jobs=1, job_timeout_s=4)
    with ThreadPoolExecutor(1) as threads:
        stalled = threads.submit(call, service.url, "/v1/judge", request("gemm_stall").to_json(), klass.tokens["alice"])
        while call(service.url, "/v1/health")[1]["running"] == 0:
            time.sleep(0.05)
        status, body, headers = call(service.url, "/v1/judge", request().to_json(), klass.tokens["alice"])
        assert status == 429 and "at once" in body["error"] and int(headers["Retry-After"]) >= 1
        status, body, _ = stalled.result(timeout=60)
    assert status == 200 and body["report"]["verdict"] == "timeout" and "within 4 s" in body["report"]["error"]
    assert call(service.url, "/v1/judge", request().to_json(), klass.tokens["alice"])[0] == 200


def test_gpu_seconds_over_the_hourly_limit_get_429(start, klass: Klass) -> None:
    service = start(gpu_seconds_per_hour=0.01)
    assert call(service.url, "/v1/judge", request().to_json(), klass.tokens["carol"])[0] == 200
    status, body, headers = call(service.url, "/v1/judge", request().to_json(), klass.tokens["carol"])
    assert status == 429 and "GPU-seconds" in body["error"] and body["retry_after_s"] > 3000
    assert int(headers["Retry-After"]) > 3000
    assert call(service.url, "/v1/judge", request().to_json(), klass.tokens["bob"])[0] == 200  # others unaffected


@pytest.mark.slow
def test_a_hanging_or_crashing_judge_costs_nobody_else_anything(start, klass: Klass) -> None:
    service = start(slots=2, job_timeout_s=5)
    done: dict[str, float] = {}

    def ask(name: str, who: str) -> dict:
        status, body, _ = call(service.url, "/v1/judge", request(name).to_json(), klass.tokens[who])
        done[name] = time.monotonic()
        assert status == 200
        return body["report"]

    with ThreadPoolExecutor(3) as threads:
        stall = threads.submit(ask, "gemm_stall", "alice")
        while call(service.url, "/v1/health")[1]["running"] == 0:
            time.sleep(0.05)
        crash = threads.submit(ask, "gemm_crash", "bob")
        assert crash.result(timeout=60)["verdict"] == "crashed"
        fine = threads.submit(ask, "gemm_naive", "carol")
        assert fine.result(timeout=60)["verdict"] == "passed"
        assert stall.result(timeout=60)["verdict"] == "timeout"
    assert done["gemm_naive"] < done["gemm_stall"]  # carol was served while alice's judge hung
    for name in ("gemm_hang", "gemm_oob", "gemm_flood"):
        report = ask(name, "carol")
        assert report["verdict"] == {"gemm_hang": "timeout", "gemm_oob": "context_lost", "gemm_flood": "passed"}[name]


def test_a_burst_of_one_student_does_not_starve_a_classmate_over_http(start, klass: Klass) -> None:
    executor = ScriptedExecutor(delay_s=0.1)
    service = start(executor, slots=1, concurrent_jobs=10)
    with ThreadPoolExecutor(11) as threads:
        burst = [threads.submit(call, service.url, "/v1/judge", request(f"gemm_a{i}").to_json(), klass.tokens["alice"])
                 for i in range(10)]
        while call(service.url, "/v1/health")[1]["queued"] < 9:
            time.sleep(0.01)
        single = threads.submit(call, service.url, "/v1/judge", request("gemm_b0").to_json(), klass.tokens["bob"])
        results = [f.result(timeout=60) for f in burst + [single]]
    assert all(status == 200 for status, _, _ in results)
    # Next after alice's running job (or after one more, if it ended while bob's request was on its way).
    assert executor.started.index("gemm_b0") <= 2
    waits = sorted(body["queue_wait_s"] for _, body, _ in results[:-1])
    assert results[-1][1]["queue_wait_s"] < waits[3]


def test_a_client_that_leaves_takes_its_queued_job_with_it(start, klass: Klass) -> None:
    executor = ScriptedExecutor(delay_s=1.0)
    service = start(executor, slots=1, concurrent_jobs=2)
    first = threading.Thread(target=call, args=(service.url, "/v1/judge", request("gemm_a0").to_json(),
                                                klass.tokens["alice"]))
    first.start()
    while call(service.url, "/v1/health")[1]["running"] == 0:
        time.sleep(0.01)
    with pytest.raises(OSError):
        call(service.url, "/v1/judge", request("gemm_a1").to_json(), klass.tokens["alice"], timeout=0.3)
    first.join(timeout=30)
    time.sleep(0.2)
    assert executor.started == ["gemm_a0"]
    assert call(service.url, "/v1/me", token=klass.tokens["alice"])[1]["usage"]["in_flight"] == 0


def test_a_profile_over_http_is_counted_and_a_second_at_once_waits(start, klass: Klass) -> None:
    """The readout comes back in the report (SYNTHETIC: the fake judge); a student's second profile while one is
    queued or running gets 429, and /v1/me counts the hour's profiles."""
    executor = ScriptedExecutor(delay_s=1.0)
    service = start(executor, slots=2, concurrent_jobs=3, profiles_per_hour=5)
    with ThreadPoolExecutor(1) as threads:
        first = threads.submit(call, service.url, "/v1/judge", request("gemm_p0", "profile").to_json(),
                               klass.tokens["alice"])
        while call(service.url, "/v1/health")[1]["running"] == 0:
            time.sleep(0.02)
        status, body, headers = call(service.url, "/v1/judge", request("gemm_p1", "trace").to_json(),
                                     klass.tokens["alice"])
        assert status == 429 and "already have a profile" in body["error"] and int(headers["Retry-After"]) >= 1
        assert call(service.url, "/v1/judge", request("gemm_c0").to_json(), klass.tokens["alice"])[0] == 200
        status, body, _ = first.result(timeout=60)
    assert status == 200 and body["report"]["verdict"] == "passed"
    assert body["report"]["profile"]["readout"]["source"] == "synthetic"
    _, me, _ = call(service.url, "/v1/me", token=klass.tokens["alice"])
    assert me["usage"]["profiles_last_hour"] == 1 and me["limits"]["profiles_per_hour"] == 5
