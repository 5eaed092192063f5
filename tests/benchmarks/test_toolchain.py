"""benchmarks/toolchain.py: the -fdevice-time-trace row finds NVRTC's trace file and ranks its
template instantiations, and each row's verdict says what the numbers mean."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import toolchain as bench
from gemmlab.errors import ToolchainError

RECURSIVE = """
template <int N> struct Depth { static constexpr int value = Depth<N - 1>::value + 1; };
template <> struct Depth<0> { static constexpr int value = 0; };
template <int N> __device__ int twice() { return 2 * Depth<N>::value; }
extern "C" __global__ void deep(int* out) { out[0] = twice<40>(); }
"""


def _span(name: str, ts: int, dur: int, detail: str = "") -> dict:
    return {"name": name, "ph": "X", "pid": 0, "tid": 0, "ts": ts, "dur": dur, "args": {"detail": detail}}


def test_instantiations_are_ranked_by_total_time_with_their_own_time(tmp_path: Path) -> None:
    events = [
        {},  # NVRTC starts its list with an empty event
        _span("CUDA C++ Front-End", 0, 10_000_000),
        _span("Instantiating Template Class", 100, 3_000_000, "Outer [Outer<int>]"),
        _span("Instantiating Template Function", 200, 2_000_000, "inner [inner<int>]"),
        _span("Scanning Function Body", 300, 500_000, "f()"),
        _span("Instantiating Template Class", 5_000_000, 1_000_000, "Other [Other<1>]"),
        _span("Instantiating Template Class", 7_000_000, 1_500_000, "Other [Other<1>]"),
    ]
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    every = bench.instantiations(trace)
    found = every[:2]
    assert [i.what for i in found] == ["class Outer [Outer<int>]", "class Other [Other<1>]"]
    outer, other = found
    assert outer.total_s == pytest.approx(3.0) and outer.self_s == pytest.approx(1.0) and outer.count == 1
    assert other.total_s == pytest.approx(2.5) and other.self_s == pytest.approx(2.5) and other.count == 2
    assert len(every) == 3
    assert every[2].what == "function inner [inner<int>]" and every[2].self_s == pytest.approx(1.5)


def test_an_unreadable_trace_lists_nothing(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text("not json")
    assert bench.instantiations(tmp_path / "bad.json") == []
    assert bench.instantiations(tmp_path / "missing.json") == []


def test_nvrtc_writes_the_trace_where_the_row_reads_it(tmp_path: Path) -> None:
    try:
        nvrtc = bench.toolchain.nvrtc()
    except ToolchainError as exc:
        pytest.skip(f"NVRTC is not installed: {exc}")
    option, trace = bench.time_trace_option(tmp_path / "trace")
    _, prog = nvrtc.nvrtcCreateProgram(RECURSIVE.encode(), b"kernel.cu", 0, [], [])
    opts = [b"--gpu-architecture=compute_90", option.encode()]
    (result,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    nvrtc.nvrtcDestroyProgram(prog)
    assert int(result) == 0
    found = bench.instantiations(trace)
    assert len(found) == 40 + 1  # Depth<1..40> and twice<40>
    names = [i.what for i in found]
    assert "function twice [twice<40>()]" in names and "class Depth [Depth<40>]" in names
    assert [i.total_s for i in found] == sorted((i.total_s for i in found), reverse=True)


def test_lever_verdicts() -> None:
    base = {"cpu": 20.0, "registers": 128, "spills": 0}
    assert bench.lever_verdict({"ok": False, "error": ["kernel.cu(3): error: identifier \"cudaStream_t\""]},
                               base).startswith("not kept: does not compile (kernel.cu(3): error")
    assert bench.lever_verdict({"ok": True, "cpu": 15.0, "registers": 128, "spills": 0}, base).startswith("keep: 25%")
    assert "kernel changes" in bench.lever_verdict({"ok": True, "cpu": 15.0, "registers": 96, "spills": 8}, base)
    assert "no real gain" in bench.lever_verdict({"ok": True, "cpu": 19.0, "registers": 128, "spills": 0}, base)
    assert "50% more CPU" in bench.lever_verdict({"ok": True, "cpu": 30.0, "registers": 128, "spills": 0}, base)


def test_target_verdicts() -> None:
    base = {"cpu": 20.0}
    assert bench.cold_verdict({"cpu": 21.0}, base).startswith("meets the target: 1.05x")
    assert bench.cold_verdict({"cpu": 23.0}, base).startswith("MISSES the target: 1.15x")
    assert bench.warm_verdict({"seconds": 0.01}).startswith("meets")
    assert bench.warm_verdict({"seconds": 0.2}) == "MISSES the target (<= 0.05 s)"
    assert "CPU time meets it" in bench.warm_verdict({"seconds": 0.2, "cpu": 0.02})


def test_levers_change_gemmlabs_own_command_line() -> None:
    try:
        base = bench.baseline_options("sm_90a")
    except ToolchainError as exc:
        pytest.skip(f"CuTe headers are not installed: {exc}")
    assert "-lineinfo" in base and "-std=c++17" in base
    assert "-lineinfo" not in bench.lever_options("sm_90a", bench.LEVERS["no-lineinfo"])
    cxx20 = bench.lever_options("sm_90a", bench.LEVERS["c++20"])
    assert "-std=c++20" in cxx20 and "-std=c++17" not in cxx20
    assert "--gpu-architecture=compute_90a" in bench.lever_options("sm_90a", bench.LEVERS["ptx-only"])
    assert bench.LEVERS["minimal-stream"].source("x").startswith(bench.STREAM_TYPEDEF)


def test_unknown_levers_are_refused_with_the_choices() -> None:
    parser_args = bench.argparse.Namespace(levers="minimal,nope", quick=False, trace=False)
    with pytest.raises(SystemExit, match="unknown lever.*nope.*choose from.*minimal"):
        bench.chosen_levers(parser_args)
    assert bench.chosen_levers(bench.argparse.Namespace(levers=None, quick=True, trace=True)) == ["pch", "trace"]


def test_a_failed_lever_names_the_header_briefly() -> None:
    line = ("/site-packages/cutlass_library/source/include/cutlass/cuda_host_adapter.hpp(318): "
            "error: identifier \"cudaStream_t\" is undefined")
    assert bench.short_path(line) == 'cutlass/cuda_host_adapter.hpp(318): error: identifier "cudaStream_t" is undefined'
    assert bench.short_path("kernel.cu(3): error: x") == "kernel.cu(3): error: x"


def test_repeated_compiles_keep_the_least_cpu() -> None:
    runs = iter([{"cpu": 21.0, "seconds": 40.0}, {"cpu": 18.0, "seconds": 18.5}, {"cpu": 19.0, "seconds": 19.0}])
    best = bench.least_cpu(lambda: next(runs), 3)
    assert best["cpu"] == 18.0 and best["seconds"] == 18.5 and best["cpu_runs"] == [21.0, 18.0, 19.0]
