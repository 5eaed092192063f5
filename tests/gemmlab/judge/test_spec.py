"""KernelSpec: plain data, checked when made, round-tripping through JSON."""
from __future__ import annotations

import json

import pytest

from gemmlab.judge import JudgeError, KernelSpec
from gemmlab.judge.spec import MAX_SOURCE_CHARS

from .cases import naive_spec


def test_geometry_is_evaluated_per_problem_size() -> None:
    spec = naive_spec(smem="T * T * 2")
    assert spec.geometry(1000, 1001, 999) == ((63, 63, 1), (16, 16, 1), 512)
    assert spec.geometry(16, 16, 16) == ((1, 1, 1), (16, 16, 1), 512)


def test_missing_dimensions_are_one_and_ints_are_accepted() -> None:
    spec = naive_spec(grid="cdiv(N, T)", block=(256,))
    assert spec.grid == ("cdiv(N, T)", "1", "1") and spec.block == ("256", "1", "1")


def test_round_trips_through_json() -> None:
    spec = naive_spec(options=("-DFAST=1", "--use_fast_math"), arch="sm_90a")
    assert KernelSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


@pytest.mark.parametrize("changes, message", [
    (dict(grid=("cdiv(N, T)", "__import__('os')")), "__import__"),
    (dict(block=("T", "T.real")), "T.real"),
    (dict(smem="BYTES"), "unknown name 'BYTES'"),
    (dict(grid=("1", "1", "1", "1")), "up to three"),
    (dict(constants={"M": 4}), "taken"),
    (dict(constants={"cdiv": 4}), "taken"),
    (dict(constants={"T": 16, "bad name": 1}), "identifier"),
    (dict(constants={"T": 1.5}), "integer"),
    (dict(constants={"T": True}), "integer"),
    (dict(constants={"T": 2**70}), "2\\*\\*62"),
    (dict(constants=["T"]), "mapping"),
    (dict(convention="nt"), "convention"),
    (dict(arch="sm_90a; rm -rf"), "arch"),
    (dict(options=("-I/etc",)), "not one the judge passes on"),
    (dict(options=("--include-path=/root",)), "not one the judge passes on"),
    (dict(options=("-DX",) * 40), "at most"),
    (dict(name="gemm(); system"), "not a __global__ function name"),
    (dict(source="   "), "empty"),
    (dict(source="x" * (MAX_SOURCE_CHARS + 1)), "at most"),
])
def test_bad_specs_are_refused_when_made(changes: dict, message: str) -> None:
    with pytest.raises(JudgeError, match=message):
        naive_spec(**changes)


def test_from_dict_refuses_unknown_and_missing_fields() -> None:
    data = naive_spec().to_dict()
    with pytest.raises(JudgeError, match="unknown kernel spec field.*launcher"):
        KernelSpec.from_dict({**data, "launcher": "lambda A, B, D: None"})
    del data["name"]
    with pytest.raises(JudgeError, match="needs name"):
        KernelSpec.from_dict(data)
    with pytest.raises(JudgeError, match="JSON object"):
        KernelSpec.from_dict(["source", "name"])
