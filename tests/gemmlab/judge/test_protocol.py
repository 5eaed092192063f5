"""The judge's JSON request and report: round trips, and hostile requests refused with reasons."""
from __future__ import annotations

import json

import pytest

from gemmlab.results import MAX_PAD
from gemmlab.judge import JudgeError, JudgeLimits, JudgeReport, JudgeRequest
from gemmlab.judge.protocol import MAX_COMPILE_S, MAX_DIMENSION, MAX_REQUEST_BYTES, MAX_SHAPES

from .cases import naive_spec


def request_dict(**changes: object) -> dict:
    data = JudgeRequest(naive_spec(), shapes=[(128, 128, 64)]).to_dict()
    data.update(changes)
    return data


def test_request_round_trips_through_json() -> None:
    request = JudgeRequest(naive_spec(), "bench", "bfloat16", "float32", shape=(512, 256, 128),
                           limits=JudgeLimits(30, 5))
    assert JudgeRequest.from_json(request.to_json()) == request
    check = JudgeRequest(naive_spec(), shapes=[[16, 16, 16], (3, 5, 7)])
    assert check.shapes == ((16, 16, 16), (3, 5, 7))
    assert JudgeRequest.from_json(check.to_json()) == check
    assert JudgeRequest.from_json(JudgeRequest(naive_spec(), shapes="odd").to_json()).shapes == "odd"


@pytest.mark.parametrize("raw, message", [
    (b"{not json", "not JSON"),
    (b"[1, 2, 3]", "JSON object, not list"),
    (b"5", "JSON object, not int"),
    (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    (b" " * (MAX_REQUEST_BYTES + 1), "larger than"),
    (b"\xff\xfe\x00", "not JSON"),
])
def test_malformed_and_oversized_requests_are_refused(raw: bytes, message: str) -> None:
    with pytest.raises(JudgeError, match=message):
        JudgeRequest.from_json(raw)


@pytest.mark.parametrize("changes, message", [
    (dict(seed=1234), "unknown request field.*seed.*draws its own seed"),
    (dict(inputs=[[1.0]]), "unknown request field"),
    (dict(action="run"), "action"),
    (dict(action=["check"]), "action"),
    (dict(dtype="float64"), "dtype"),
    (dict(dtype={"x": 1}), "dtype|type"),
    (dict(out_dtype="int8"), "out_dtype"),
    (dict(shapes="everything"), "suite"),
    (dict(shapes=[]), f"1 to {MAX_SHAPES}"),
    (dict(shapes=[[16, 16, 16]] * (MAX_SHAPES + 1)), f"1 to {MAX_SHAPES}"),
    (dict(shapes=[[16, 16]]), r"\[M, N, K\]"),
    (dict(shapes=[[0, 16, 16]]), "M in a shape"),
    (dict(shapes=[[16, -1, 16]]), "N in a shape"),
    (dict(shapes=[[16, 16, 1.5]]), "K in a shape"),
    (dict(shapes=[[16, 16, True]]), "K in a shape"),
    (dict(shapes=[[MAX_DIMENSION + 1, 16, 16]]), "M in a shape"),
    (dict(shapes=[[16384, 16384, 16384]]), "too large"),
    (dict(shape=[16384, 16384, 16384]), "too large"),
    (dict(limits={"compile_s": MAX_COMPILE_S + 1, "kernel_s": 5}), "compile_s"),
    (dict(limits={"compile_s": 10, "kernel_s": 0}), "kernel_s"),
    (dict(limits={"compile_s": "10"}), "compile_s"),
    (dict(limits={"memory": 10}), "limits are an object"),
    (dict(spec="__global__ void k() {}"), "kernel spec is a JSON object"),
    (dict(pad=-1), "pad is a whole number"),
    (dict(pad=MAX_PAD + 1), "pad is a whole number"),
    (dict(pad=True), "pad is a whole number"),
    (dict(pad=2.5), "pad is a whole number"),
    (dict(pad="8"), "pad is a whole number"),
    (dict(pad=8, action="bench"), "pad applies to checks only"),
    (dict(offset=-1), "offset is a whole number"),
    (dict(offset=65), "offset is a whole number"),
    (dict(offset=True), "offset is a whole number"),
    (dict(offset=3, action="bench"), "offset applies to checks only"),
])
def test_hostile_fields_are_refused_with_the_reason(changes: dict, message: str) -> None:
    with pytest.raises(JudgeError, match=message):
        JudgeRequest.from_json(json.dumps(request_dict(**changes)))


def test_a_request_needs_a_spec() -> None:
    data = request_dict()
    del data["spec"]
    with pytest.raises(JudgeError, match="needs a spec"):
        JudgeRequest.from_dict(data)


def test_report_round_trips_and_rejects_anything_else() -> None:
    report = JudgeReport("failed", "check", check={"rows": []}, device="H100", error="")
    assert JudgeReport.from_json(report.to_json()) == report
    assert not report.passed and JudgeReport("passed").passed
    with pytest.raises(JudgeError, match="verdict"):
        JudgeReport("great")
    for raw in (b"", b"hello", b"[]", json.dumps({**report.to_dict(), "extra": 1}).encode(),
                json.dumps({**report.to_dict(), "check": [1]}).encode(),
                json.dumps({**report.to_dict(), "error": 5}).encode()):
        with pytest.raises(JudgeError):
            JudgeReport.from_json(raw)


def test_a_checks_padding_crosses_and_is_left_out_when_unset() -> None:
    padded = JudgeRequest.from_json(json.dumps(request_dict(pad=8)))
    assert padded.pad == 8 and json.loads(padded.to_json())["pad"] == 8
    assert "pad" not in json.loads(JudgeRequest.from_json(json.dumps(request_dict())).to_json())
