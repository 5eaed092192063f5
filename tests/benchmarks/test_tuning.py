"""The tuning tools: benchmarks/sweep.py's choice of a winner and tools/set_solution_config.py's
edits of the real solution cells (the GPU runs them; here the logic and the edits are checked)."""
from __future__ import annotations

import re

import pytest


import set_solution_config as ssc  # noqa: E402
import solution_cells  # noqa: E402
import sweep  # noqa: E402


@pytest.mark.parametrize("kernel, changes, expect", [
    ("gemm06_cpp", {"STAGES": 3, "GROUP_M": 8}, r"CPP_CONFIG = dict\(BM=\d+, BN=\d+, BK=\d+, STAGES=3, .*GROUP_M=8\)"),
    ("gemm06_dsl", {"BK": 32}, r"DSL_CONFIG = dict\(BM=\d+, BN=\d+, BK=32,"),
    ("ladder_any", {"PAD": 16}, r"ANY_CONFIG = dict\(SWIZZLE_CONFIG, .*PAD=16\)"),   # inherited: added
    ("hopper_ws", {"WS_STAGES": 4}, r"WS_BM, WS_BN, WS_BK, WS_STAGES = \d+, \d+, \d+, 4"),
    ("hopper_ws", {"WS_GROUP_M": 16}, r"WS_CLUSTER_M, WS_GROUP_M = \d+, 16"),
])
def test_settings_are_written_where_the_cell_assigns_them(kernel, changes, expect) -> None:
    source = solution_cells.cell_source(ssc.assignment_of(kernel), f"kernel:{kernel}")
    edited = ssc.set_in_source(source, changes)
    assert re.search(expect, edited), edited[:600]
    assert len(edited.splitlines()) == len(source.splitlines())
    changed = [(a, b) for a, b in zip(source.splitlines(), edited.splitlines()) if a != b]
    assert len(changed) == 1, changed


def test_unknown_settings_and_bad_input_are_refused() -> None:
    source = solution_cells.cell_source("06_pipelining", "kernel:gemm06_cpp")
    with pytest.raises(ssc.ConfigEditError, match="NOT_A_KEY"):
        ssc.set_in_source(source, {"NOT_A_KEY": 1})
    with pytest.raises(ssc.ConfigEditError, match="KEY=INTEGER"):
        ssc.parse_changes(["STAGES=three"])
    with pytest.raises(ssc.ConfigEditError, match="unknown solution kernel"):
        ssc.assignment_of("gemm99")


def _variant(label, changes, mean, correct=True):
    v = sweep.Variant(label, changes, correct=correct)
    v.ratios = {"4096 float16": mean}
    return v


def test_a_winner_must_beat_the_better_baseline_run_and_be_correct() -> None:
    base, again = _variant("base", {}, 0.60), _variant("base (again)", {}, 0.62)
    close = _variant("BK=64", {"BK": 64}, 0.63)
    assert sweep.best_of([base, close, again], 0.02) is None           # 0.63 < 0.62 * 1.02
    wrong = _variant("STAGES=5", {"STAGES": 5}, 0.90, correct=False)
    good = _variant("STAGES=3", {"STAGES": 3}, 0.70)
    assert sweep.best_of([base, wrong, good, close, again], 0.02) is good
    broken = sweep.Variant("WARPS_N=9", {"WARPS_N": 9}, error="does not compile")
    assert broken.mean is None and sweep.best_of([base, broken, again], 0.02) is None


def test_variant_specs_parse() -> None:
    assert sweep.parse_spec("BK=64, STAGES=3") == {"BK": 64, "STAGES": 3}
    assert sweep.label_of({}) == "base" and sweep.label_of({"BK": 64}) == "BK=64"
    with pytest.raises(SystemExit):
        sweep.parse_spec("BK")


def test_warming_passes_the_baseline_without_a_variant_argument(monkeypatch) -> None:
    # The baseline once went to the child as the label "base", which is no KEY=INT spec.
    commands = []

    class Done:
        returncode, stdout, stderr = 0, "", ""

    monkeypatch.setattr(sweep.subprocess, "run", lambda cmd, **_: commands.append(cmd) or Done())
    sweep.warm("gemm06_cpp", [{}, {"STAGES": 3}], ["float16"], jobs=1)
    variant_args = [cmd[3:cmd.index("--first-call-only")] for cmd in commands]
    assert variant_args == [[], ["STAGES=3"]]
    for args in variant_args:
        sweep.parse_spec(",".join(args))      # every argument the child gets parses
