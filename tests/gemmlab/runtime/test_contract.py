"""gemmlab.running.contract: a launch survives the trip through JSON unchanged."""
from __future__ import annotations

import json

import pytest

from gemmlab.errors import LaunchError
from gemmlab.running.contract import LaunchContract
from gemmlab.compiling.signature import Param


def _contract() -> LaunchContract:
    params = (Param("A", "pointer", "const half*", True, "float16", 8),
              Param("D", "pointer", "float*", False, "float32", 8),
              Param("M", "scalar", "int", False, "int32", 4),
              Param("tmap", "struct", "CUtensorMap", True, None, 128))
    return LaunchContract("gemm", "_Z4gemmPK6__halfPfi", "sm_90a", params, (8, 4, 1), (128, 1, 1), 49152)


def test_contract_round_trips_through_json() -> None:
    contract = _contract()
    data = json.loads(json.dumps(contract.to_dict()))
    assert LaunchContract.from_dict(data) == contract
    assert data["grid"] == [8, 4, 1] and data["params"][3]["dtype"] is None


def test_a_malformed_contract_says_what_is_missing() -> None:
    data = _contract().to_dict()
    del data["symbol"]
    with pytest.raises(LaunchError, match="symbol"):
        LaunchContract.from_dict(data)
    data = _contract().to_dict()
    data["block"] = [128, 1]
    with pytest.raises(LaunchError, match="three dimensions"):
        LaunchContract.from_dict(data)
