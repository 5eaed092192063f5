"""Notebook 04's SIMT tile kernels (Exercise 1(c)): the C++ solution compiles to exactly the
256 scalar FMAs per thread the text promises and no tensor-core instruction (CPU, slow), and both
solutions are correct on a GPU, where each thread writes 4 rows of 4 neighbouring columns by the
notebook's own check, and the same kernels with the integer tile (64, 64, 1) compute the right D
but fail it.

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
from tests.support.graded_cells import cells_by_grade_id  # noqa: E402
from tests.support.kernel_resources import assert_no_spills  # noqa: E402

sys.path.insert(0, str(ROOT / "tools"))
from solution_cells import cell_source, load_namespace  # noqa: E402

OPCODES = re.compile(r"^\s*(?:@!?%\w+\s+)?((?:wg)?mma\.|fma\.rn\.f32\b)", re.M)


def _ops(ptx: str | bytes) -> dict[str, int]:
    found = OPCODES.findall(ptx if isinstance(ptx, str) else ptx.decode())
    return {"fma": found.count("fma.rn.f32"), "mma": len(found) - found.count("fma.rn.f32")}


def _cpp_source() -> str:
    return load_namespace("04_mma", ["kernel:mma04_simt_cpp"])["SIMT_CPP"]


def _dsl_function(tmp: Path, source: str | None = None):
    source = source or cell_source("04_mma", "kernel:mma04_simt_dsl")
    path = tmp / "simt04_dsl.py"
    path.write_text(source)
    ns: dict = {"__name__": "simt04_dsl"}
    exec(compile(source, str(path), "exec"), ns)
    return ns["simt_tile_dsl"]


def _example(device: str):
    import torch

    half = dict(dtype=torch.float16, device=device)
    D = torch.empty(64, 64, dtype=torch.float32, device=device)
    return torch.empty(64, 16, **half), torch.empty(64, 16, **half), D, 256


@pytest.mark.slow
def test_cpp_simt_solution_is_256_fmas_per_thread() -> None:
    k = gemmlab.compile(_cpp_source(), "simt_tile", arch="sm_90a")
    assert _ops(k.ptx) == {"fma": 256, "mma": 0}
    assert_no_spills(k.resources, "simt_tile")


def test_dsl_simt_solution_is_256_fmas_per_thread(tmp_path: Path) -> None:
    k = gemmlab.dsl.compile(_dsl_function(tmp_path), *_example("cpu"), arch="sm_90a")
    assert _ops(k.ptx) == {"fma": 256, "mma": 0}


#: The solutions' permutation and the integer tile that computes the same D (C++ spelling, DSL spelling).
LAYOUT = ("Tile<_64, Layout<Shape<_16, _4>, Stride<_4, _1>>, _1>{}", "permutation_mnk=(64, perm_n, 1)")
INTEGER = ("Tile<_64, _64, _1>{}", "permutation_mnk=(64, 64, 1)")


def _launcher(kind: str, tmp_path: Path, integer: bool = False):
    """fn(A, B, D, threads=256) for the C++ or DSL solution, or its integer-tile variant."""
    if kind == "C++":
        source = _cpp_source()
        assert LAYOUT[0] in source
        kernel = gemmlab.compile(source.replace(LAYOUT[0], INTEGER[0]) if integer else source, "simt_tile")
        return lambda A, B, D, threads=256: kernel(A, B, D, grid=1, block=threads)
    source = cell_source("04_mma", "kernel:mma04_simt_dsl")
    assert LAYOUT[1] in source
    kernel = gemmlab.dsl.compile(_dsl_function(tmp_path, source.replace(LAYOUT[1], INTEGER[1]) if integer else source),
                                 *_example("cuda"))
    return lambda A, B, D, threads=256: kernel(A, B, D, threads)


def _check_simt_shares():
    """The notebook's own check_simt_shares, run from its cell."""
    ns: dict = {}
    exec("import numpy as np\nfrom gemmlab.checking.thread_shares import thread_shares", ns)
    exec(cells_by_grade_id("04_mma")["simt_shares"], ns)
    return ns["check_simt_shares"]


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["C++", "DSL"])
def test_simt_tile_is_correct_and_each_thread_writes_runs_of_four(kind: str, tmp_path: Path) -> None:
    import torch

    fn = _launcher(kind, tmp_path)
    for _ in range(3):  # fresh random inputs each time
        res = gemmlab.check_gemm(fn, shapes=[(64, 64, 16)], out_dtype=torch.float32, tile=(16, 16))
        assert res.passed, str(res)
    _check_simt_shares()(kind, fn, [0, 17, 200, 255])


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["C++", "DSL"])
def test_the_integer_tile_is_correct_but_fails_the_share_check(kind: str, tmp_path: Path) -> None:
    import torch

    fn = _launcher(kind, tmp_path, integer=True)
    res = gemmlab.check_gemm(fn, shapes=[(64, 64, 16)], out_dtype=torch.float32, tile=(16, 16))
    assert res.passed, "the integer tile computes the right D: " + str(res)
    with pytest.raises(AssertionError, match="16 apart"):
        _check_simt_shares()(kind, fn, [0, 17])
