"""The judge's side of recorded launches: KernelSpec.launches, request fields, binding by position."""
from __future__ import annotations

import json

import pytest

from gemmlab.judge import JudgeError, JudgeRequest, KernelSpec
from gemmlab.judge.backend import judge
from tests.support.fake_judge import FakeBackend
from gemmlab.judge.binding import check_positional, positional_arguments, Operands
from gemmlab.judge.spec import RecordedLaunch
from gemmlab.compiling.signature import Param

#: Parameter names outside the judge's name vocabulary: only a binding by position can launch it.
SOURCE = r"""
#include <cuda_fp16.h>
extern "C" __global__ void gemm_pos(const half* a_ptr, const half* b_ptr, half* d_ptr, int rows, int cols, int depth)
{ }
"""


def launch(shape=(64, 32, 16), args=("A", "B", "out", 64, 32, 16), **changes: object) -> RecordedLaunch:
    fields = dict(shape=shape, grid=(2, 4, 1), block=(16, 16, 1), smem=0, args=args)
    fields.update(changes)
    return RecordedLaunch(**fields)  # type: ignore[arg-type]


def spec(*launches: RecordedLaunch) -> KernelSpec:
    return KernelSpec(SOURCE, "gemm_pos", "tn", arch="sm_90a", launches=launches or (launch(),))


def test_recorded_launches_round_trip_and_give_the_geometry_per_shape() -> None:
    s = spec(launch(), launch((3, 5, 7), ("A", "B", "out", 3, 5, 7), grid=(1, 1, 1), smem=1024))
    assert KernelSpec.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert s.geometry(3, 5, 7) == ((1, 1, 1), (16, 16, 1), 1024)
    with pytest.raises(JudgeError, match="no launch was recorded for M×N×K = 1×1×1; recorded: 64×32×16, 3×5×7"):
        s.geometry(1, 1, 1)


def test_specs_and_requests_without_the_new_fields_are_written_as_before() -> None:
    plain = KernelSpec(SOURCE, "gemm_pos")
    assert "launches" not in plain.to_dict()
    assert set(JudgeRequest(plain).to_dict()) == {"spec", "action", "dtype", "out_dtype", "shapes", "shape", "limits"}
    request = JudgeRequest(spec(), shapes=[(64, 32, 16)], alpha=0.5, beta=2, tile=[64, 64])
    assert JudgeRequest.from_json(request.to_json()) == request and request.tile == (64, 64) and request.beta == 2.0


@pytest.mark.parametrize("fields, message", [
    (dict(shapes=[(64, 32, 16), (1, 1, 1)]), "no launch was recorded for M×N×K = 1×1×1"),
    (dict(shapes="odd"), "no launch was recorded for M×N×K = 1×1×1"),
    (dict(action="bench", shape=(4096, 4096, 4096)), "4096×4096×4096"),
    (dict(shapes=[(64, 32, 16)], alpha=float("nan")), "alpha must be a finite number"),
    (dict(shapes=[(64, 32, 16)], beta=True), "beta must be a finite number"),
    (dict(shapes=[(64, 32, 16)], tile=(0, 128)), "tile is"),
])
def test_a_request_must_have_a_launch_for_every_shape_it_runs(fields: dict, message: str) -> None:
    with pytest.raises(JudgeError, match=message):
        JudgeRequest(spec(), **fields)


@pytest.mark.parametrize("changes, message", [
    (dict(args=("A", "B", "C", 1, 2, 3)), "'C'; an operand argument is one of A, B, out"),
    (dict(args=("A", "B", "out", True)), "argument 3 is True"),
    (dict(args=("A", "B", "out", float("inf"))), "argument 3 is inf"),
    (dict(args=("A", "B", "out", [1])), "argument 3 is \\[1\\]"),
    (dict(grid=(0, 1, 1)), "grid is 3 integers from 1"),
    (dict(block=(16, 16)), "block is 3 integers"),
    (dict(smem=-1), "smem is a number of bytes"),
    (dict(shape=(1, 2)), "shape"),
])
def test_a_malformed_launch_is_refused(changes: dict, message: str) -> None:
    with pytest.raises(JudgeError, match=message):
        launch(**changes)


def test_malformed_launch_tables_are_refused() -> None:
    with pytest.raises(JudgeError, match="one launch per problem size"):
        spec(launch(), launch())
    data = spec().to_dict()
    data["launches"][0]["stream"] = 7
    with pytest.raises(JudgeError, match="a recorded launch is an object"):
        KernelSpec.from_dict(data)
    with pytest.raises(JudgeError, match="list of recorded launches"):
        KernelSpec.from_dict({**spec().to_dict(), "launches": {"shape": [1, 1, 1]}})


def _param(name: str, kind: str) -> Param:
    pointer = kind == "pointer"
    return Param(name, kind, "half*" if pointer else "int", False, "float16" if pointer else "int32",
                 4 if kind == "scalar" else 8)


def test_binding_by_position_checks_each_argument_against_its_parameter() -> None:
    params = [_param("a", "pointer"), _param("b", "pointer"), _param("d", "pointer"), _param("m", "scalar")]
    check_positional(params, ["A", "B", "out", 5])
    for args, message in ((["A", "B", "out"], "takes 4 arguments but the launch passed 3"),
                          (["A", "B", 0, 5], "pointer parameter 'd' got the number 0"),
                          (["A", "B", "out", "A"], "is a scalar but got the tensor A"),
                          (["A", "B", "B", 5], "not given the output")):
        with pytest.raises(JudgeError, match=message):
            check_positional(params, args)
    with pytest.raises(JudgeError, match="is a struct"):
        check_positional([*params[:3], _param("map", "struct")], ["A", "B", "out", 1])
    assert positional_arguments(["out", 3, "A", 0.5], Operands("a", "b", "d", 1, 2, 3)) == ["d", 3, "a", 0.5]


def test_the_judge_binds_a_recorded_launch_by_position_whatever_the_parameter_names() -> None:
    assert judge(JudgeRequest(spec(), shapes=[(64, 32, 16)]), FakeBackend()).verdict == "passed"
    by_name = JudgeRequest(KernelSpec(SOURCE, "gemm_pos", "tn"), shapes=[(64, 32, 16)])
    refused = judge(by_name, FakeBackend())
    assert refused.verdict == "refused" and "a_ptr" in refused.error
    wrong_count = spec(launch(args=("A", "B", "out", 64, 32)))
    report = judge(JudgeRequest(wrong_count, shapes=[(64, 32, 16)]), FakeBackend())
    assert report.verdict == "refused" and "takes 6 arguments but the launch passed 5" in report.error
