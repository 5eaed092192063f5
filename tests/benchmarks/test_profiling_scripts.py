"""benchmarks/profile_solutions.py and benchmarks/timeline_overhead.py without a GPU: what they would record, the
placeholders they leave (SYNTHETIC, never over a real recording), the builds they compare, and their refusal to
run without a GPU."""
from __future__ import annotations

import json

import pytest

import profile_solutions as ps  # noqa: E402
import timeline_overhead as to  # noqa: E402



def test_the_recordings_cover_the_notebooks_that_show_them(capsys) -> None:
    assert ps.main(["--dry-run"]) == 0
    listed = capsys.readouterr().out.split("\n")
    for line in ("readout  gemm05_cpp", "readout  gemm06_cpp", "readout  ladder_naive", "readout  ladder_any",
                 "readout  hopper_ws", "readout  capstone", "readout  transpose_row_major",
                 "timeline hopper_ws", "timeline capstone"):
        assert line in listed


def test_placeholders_are_synthetic_and_never_replace_a_recording(tmp_path, capsys) -> None:
    real = tmp_path / "readout_capstone.json"
    real.write_text(json.dumps({"source": "measured"}))
    assert ps.main(["--synthetic", "--out", str(tmp_path), "--only", "capstone", "--only", "hopper_ws"]) == 0
    out = capsys.readouterr().out
    assert "readout_capstone.json: a recording exists; left alone" in out
    assert json.loads(real.read_text()) == {"source": "measured"}
    assert json.loads((tmp_path / "readout_hopper_ws.json").read_text())["source"] == "synthetic"
    assert json.loads((tmp_path / "timeline_capstone.json").read_text())["source"] == "synthetic"


def test_without_a_gpu_neither_script_runs(no_gpu, capsys) -> None:
    assert ps.main(["--only", "capstone"]) == 2 and to.main([]) == 2
    assert "there is none here" in capsys.readouterr().err


def test_the_transpose_comes_from_notebook_03_with_the_models_prediction() -> None:
    _, naive = ps.transpose_from_notebook("NAIVE_INDEX", arch="sm_90a")
    _, swizzled = ps.transpose_from_notebook("SMEM_INDEX", arch="sm_90a")
    assert naive == {"st": (1.0, 0.0), "ld": (32.0, 31.0)}          # every column read: a 32-way conflict
    assert swizzled == {"st": (1.0, 0.0), "ld": (1.0, 0.0)}


@pytest.mark.parametrize("kernel", ["traced_tiled", pytest.param("traced_gemm", marks=pytest.mark.slow)])
def test_the_overhead_compares_one_kernel_built_with_and_without_marks(kernel) -> None:
    plain, off, on, facts = to.launchers(kernel, (64, 48, 32))
    assert facts["convention"] == "tn" and facts["ctas"] == 4 * 3 and facts["warps_per_cta"] == 8
    if kernel == "traced_tiled":
        assert (facts["marks_plain"], facts["marks_traced"]) == (0, 7)          # one %globaltimer read per mark
        assert plain.compiled.ptx.count("%globaltimer") == 0 and off.compiled is not on.compiled
        assert facts["registers_traced"] >= facts["registers_plain"]
    else:
        assert (facts["marks_plain"], facts["marks_traced"]) == (False, True)   # the buffer's symbol in the module


def test_arguments() -> None:
    args = to.parse_args(["--kernel", "hopper_ws", "--shape", "4096"])
    assert args.kernel == ["hopper_ws"] and args.rounds == 10
    assert to.parse_args([]).kernel == list(to.TEST_KERNELS)
    with pytest.raises(SystemExit):
        to.parse_args(["--rounds", "1"])
