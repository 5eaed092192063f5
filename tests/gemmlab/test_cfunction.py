"""gemmlab.checking.cfunction runs a straight-line int C function as C would, and refuses what it cannot read."""
from __future__ import annotations

import numpy as np
import pytest

from gemmlab.checking import cfunction

TILE_OF = """
// grouped order
__device__ void tile_of(int pid, int tiles_m, int tiles_n, int group, int& m_tile, int& n_tile)
{
    int per_group = group * tiles_n;                  /* CTAs in one band */
    const int first_m = (pid / per_group) * group, rows = min(tiles_m - first_m, group);
    m_tile = first_m + (pid % per_group) % rows;
    n_tile = (pid % per_group) / rows;
}
"""


def _grouped(pid, tiles_m, tiles_n, group):
    per_group = group * tiles_n
    first_m = pid // per_group * group
    rows = min(tiles_m - first_m, group)
    return first_m + pid % per_group % rows, pid % per_group // rows


@pytest.mark.parametrize("tiles_m, tiles_n, group", [(5, 7, 3), (8, 6, 8), (1, 9, 4), (13, 2, 1)])
def test_every_pid_at_once_matches_the_python_twin(tiles_m: int, tiles_n: int, group: int) -> None:
    pid = np.arange(tiles_m * tiles_n)
    out = cfunction.run(TILE_OF, "tile_of", pid=pid, tiles_m=tiles_m, tiles_n=tiles_n, group=group)
    want = np.array([_grouped(p, tiles_m, tiles_n, group) for p in pid])
    assert np.array_equal(out["m_tile"], want[:, 0]) and np.array_equal(out["n_tile"], want[:, 1])


def test_c_division_truncates_and_compound_assignments_read_the_old_value() -> None:
    src = "void f(int a, int& q, int& r) { q = a / 4; r = a % 4; r *= 2; q -= std::max(r, 1); }"
    out = cfunction.run(src, "f", a=np.array([-7, 7]))
    assert out["q"].tolist() == [-1 - 1, 1 - 6] and out["r"].tolist() == [-6, 6]


def test_the_definition_is_read_with_its_inputs_and_outputs() -> None:
    d = cfunction.definition(TILE_OF, "tile_of")
    assert d.inputs == ("pid", "tiles_m", "tiles_n", "group") and d.outputs == ("m_tile", "n_tile")


@pytest.mark.parametrize("source, match", [
    ("void f(int a, int& b) { if (a > 0) b = 1; else b = 2; }", "straight-line"),
    ("void f(int a, int& b) { b = a > 0 ? 1 : 2; }", "straight-line"),
    ("void f(int a, int& b) { for (int i = 0; i < 2; ++i) b = i; }", "straight-line"),
    ("void f(int a, int& b) { b = abs(a); }", "not allowed"),
    ("void f(int a, int& b) { int c = a; }", "never assigns b"),
    ("void f(int a, int& b) { c = a; b = c; }", "not declared before"),
    ("void f(int a, int& b) { int c = a; int c = 2; b = c; }", "declared twice"),
    ("void f(int a, int& b) { b = a * 65536 * 65536; }", "overflows"),
    ("void f(int a, int& b) { b = a / 0; }", "division by zero"),
    ("void f(unsigned a, int& b) { b = a; }", "neither"),
    ("int f(int a, int& b) { b = a; return 0; }", "void f"),
    ("void f(int a, int& b) { b = a; }\nvoid f(long a, int& b) { b = 0; }", "exactly once"),
    ("#define f g\nvoid g(int a, int& b) { b = a; }", "preprocessor"),
    ("void g(int a, int& b) { b = a; }", "exactly once"),
    ("void f(int a, int& b) { b = a }", "does not end"),
])
def test_what_it_cannot_read_is_refused_with_a_reason(source: str, match: str) -> None:
    with pytest.raises(cfunction.CFunctionError, match=match):
        cfunction.run(source, "f", a=np.arange(3))


def test_a_pragma_is_no_preprocessor_trick_but_a_missing_input_is_refused() -> None:
    src = "#pragma once\nvoid f(int a, int& b) { b = cute::min(a, 3); }"
    assert cfunction.run(src, "f", a=np.arange(5))["b"].tolist() == [0, 1, 2, 3, 3]
    with pytest.raises(cfunction.CFunctionError, match="takes a"):
        cfunction.run(src, "f", x=1)
