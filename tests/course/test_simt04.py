"""Notebook 04's SIMT tile kernels (Exercise 1(c)): the C++ solution compiles to exactly the
256 scalar FMAs per thread the text promises and no tensor-core instruction (CPU, slow), and both
solutions are correct on a GPU.

    pytest -m gpu tests/course/test_simt04.py
"""
from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")

import gemmlab  # noqa: E402

from tests.support import ROOT  # noqa: E402
from tests.support.kernel_resources import assert_no_spills  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from solution_cells import cell_source, load_namespace  # noqa: E402

OPCODES = re.compile(r"^\s*(?:@!?%\w+\s+)?((?:wg)?mma\.|fma\.rn\.f32\b)", re.M)


def _ops(ptx: str | bytes) -> dict[str, int]:
    found = OPCODES.findall(ptx if isinstance(ptx, str) else ptx.decode())
    return {"fma": found.count("fma.rn.f32"), "mma": len(found) - found.count("fma.rn.f32")}


def _cpp_source() -> str:
    return load_namespace("04_mma", ["kernel:mma04_simt_cpp"])["SIMT_CPP"]


def _dsl_function(tmp: Path):
    source = cell_source("04_mma", "kernel:mma04_simt_dsl")
    path = tmp / "simt04_dsl.py"
    path.write_text(source)
    ns: dict = {"__name__": "simt04_dsl"}
    exec(compile(source, str(path), "exec"), ns)
    return ns["simt_tile_dsl"]


def _example(device: str):
    import torch

    return (torch.empty(64, 16, dtype=torch.float16, device=device), torch.empty(64, 16, dtype=torch.float16, device=device),
            torch.empty(64, 64, dtype=torch.float32, device=device))


@pytest.mark.slow
def test_cpp_simt_solution_is_256_fmas_per_thread() -> None:
    k = gemmlab.compile(_cpp_source(), "simt_tile", arch="sm_90a")
    assert _ops(k.ptx) == {"fma": 256, "mma": 0}
    assert_no_spills(k.resources, "simt_tile")


def test_dsl_simt_solution_is_256_fmas_per_thread(tmp_path: Path) -> None:
    k = gemmlab.dsl.compile(_dsl_function(tmp_path), *_example("cpu"), arch="sm_90a")
    assert _ops(k.ptx) == {"fma": 256, "mma": 0}


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["C++", "DSL"])
def test_simt_tile_is_correct(kind: str, tmp_path: Path) -> None:
    import torch

    if kind == "C++":
        kernel = gemmlab.compile(_cpp_source(), "simt_tile")
        fn = lambda A, B, D: kernel(A, B, D, grid=1, block=256)  # noqa: E731
    else:
        fn = gemmlab.dsl.compile(_dsl_function(tmp_path), *_example("cuda"))
    for _ in range(3):  # fresh random inputs each time
        res = gemmlab.check_gemm(fn, shapes=[(64, 64, 16)], out_dtype=torch.float32, tile=(16, 16))
        assert res.passed, str(res)
