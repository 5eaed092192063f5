"""benchmarks/solutions.py without a GPU: arguments, the run plan, loading and skipping kernels,
convention detection, the table, and the clear exit where there is no GPU."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.support import ROOT


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_solutions", ROOT / "benchmarks" / "solutions.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module          # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_default_plan_covers_every_kernel_shape_dtype_and_method(bench) -> None:
    args = bench.parse_args([])
    kernels, shapes, dtypes = bench.plan(args)
    names = [n for _, n in kernels]
    assert names[:5] == ["cublas", "gemm05_cpp", "gemm05_dsl", "gemm06_cpp", "gemm06_dsl"]
    assert names[1:] == [n for _, n in bench.KERNELS] and {"hopper_pipelined", "hopper_ws"} <= set(names)
    assert shapes == [(4096,) * 3, (6144,) * 3, (8192,) * 3] and dtypes == ["float16", "bfloat16"]
    assert bench.methods_of(args) == ["flushed", "nvidia"]
    refs = bench.plan(bench.parse_args(["--cutlass", "c", "--fastcu", "f"]))[0]
    assert [n for a, n in refs[:3]] == ["cublas", "cutlass_persistent", "fastcu_12"] and refs[1][0] is None


def test_quick_and_only(bench) -> None:
    args = bench.parse_args(["--quick", "--only", "gemm06_cpp", "--only", "gemm05_dsl", "--out", "x"])
    kernels, shapes, dtypes = bench.plan(args)
    assert [n for _, n in kernels] == ["gemm05_dsl", "gemm06_cpp"]
    assert shapes == [(4096,) * 3] and dtypes == ["float16"] and args.out == Path("x")
    assert bench.methods_of(args) == ["flushed"]
    sized = bench.parse_args(["--sizes", "2048,4096", "--methods", "nvidia"])
    assert bench.plan(sized)[1] == [(2048,) * 3, (4096,) * 3] and bench.methods_of(sized) == ["nvidia"]


def test_bad_arguments_are_refused(bench) -> None:
    with pytest.raises(SystemExit):
        bench.parse_args(["--only", "gemm07_cpp"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--set", "gemm06_cpp:STAGES"])
    with pytest.raises(SystemExit):
        bench.parse_args(["--set", "nope:STAGES=3"])
    for bad in (["--methods", "cutlass"], ["--sizes", "4k"], ["--sizes", "0"], ["--budget-s", "-1"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)
    args = bench.parse_args(["--set", "gemm06_cpp:STAGES=5", "--set", "gemm06_cpp:BK=32", "--set", "gemm06_dsl:BN=128"])
    assert args.overrides == {"gemm06_cpp": {"STAGES": 5, "BK": 32}, "gemm06_dsl": {"BN": 128}}


def test_missing_assignment_or_cell_is_a_skip_reason(bench) -> None:
    with pytest.raises(LookupError, match="no solutions notebook"):
        bench.load_kernel("99_no_such_assignment", "gemm99_cpp")
    with pytest.raises(LookupError, match="kernel:gemm06_nope"):
        bench.load_kernel("06_pipelining", "gemm06_nope")


def test_helper_cells_come_along_but_not_the_other_kernels(bench) -> None:
    assert bench.tags_for("06_pipelining", "gemm06_cpp") == ["kernel:gemm06_cpp"]
    assert bench.tags_for("06_pipelining", "gemm06_dsl") == ["kernel:gemm06_dsl"]


def test_loads_06_kernels_and_applies_settings(bench) -> None:
    fn, ns = bench.load_kernel("06_pipelining", "gemm06_cpp", {"STAGES": 3})
    assert callable(fn) and ns["CPP_CONFIG"]["STAGES"] == 3
    fn, ns = bench.load_kernel("06_pipelining", "gemm06_dsl", {"STAGES": 5, "BK": 64})
    assert ns["STAGES"] == 5 and ns["BK"] == 64 and ns["gemm06_dsl"] is fn
    assert bench.convention_of(fn, ns, "gemm06_dsl") == "tn"


def test_convention_from_signature(bench) -> None:
    assert bench.convention_of(lambda A, B, D: None, {}, "x") == "tn"
    assert bench.convention_of(lambda A, B, C, alpha, beta: None, {}, "x") == "nn"
    assert bench.convention_of(lambda A, B, C, alpha=1.0, beta=0.0: None, {}, "x") == "nn"
    assert bench.convention_of(lambda A, B, D: None, {"CONVENTION": "nn"}, "x") == "nn"


def test_markdown_table(bench) -> None:
    ok = bench.KernelReport("gemm06_cpp", "06_pipelining", first_call_s=12.3, correct={"float16": True})
    ok.rows.append(bench.Row("gemm06_cpp", (4096, 4096, 4096), "float16", 450.0, 690.0, 450 / 690))
    ok.rows.append(bench.Row("gemm06_cpp", (4096, 4096, 4096), "float16", 455.0, 680.0, 455 / 680, method="nvidia",
                             sm_clock_mhz=1710, power_w=699, cublas_sm_clock_mhz=1695, cublas_power_w=700))
    skipped = bench.KernelReport("gemm05_dsl", "05_global_gemm", status="skipped", reason="no cell")
    text = bench.markdown([ok, skipped], "GPU X")
    assert ("| gemm06_cpp | tn | 4096×4096×4096 | float16 | flushed | 450.0 | 690.0 | 0.652 | - | - | - | float16: yes "
            "| 12.3 s | - |") in text
    assert "| nvidia | 455.0 | 680.0 | 0.669 |" in text and "| 1,710/1,695 MHz 699/700 W |" in text
    assert [r.key for r in ok.rows] == ["4096x4096x4096 float16", "4096x4096x4096 float16 nvidia"]
    assert "skipped: no cell" in text


def test_without_gpu_exits_2_with_a_message(bench, capsys, no_gpu) -> None:
    assert bench.main(["--quick"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().out


def test_05_kernels_are_the_cells_gemm_functions_and_the_dsl_one_compiles(bench) -> None:
    # The benchmark must call what the cell defines, not wrap it again (wrapping gemm05_dsl in
    # dsl_gemm_from made its first call pass 6 arguments to a 5-argument function).
    import torch

    for name in ("gemm05_cpp", "gemm05_dsl"):
        fn, ns = bench.load_kernel("05_global_gemm", name)
        assert fn is ns[name] and bench.convention_of(fn, ns, name) == "nn"
    # What fn(A, B, D, 1.0, 0.0) compiles on the benchmark's first call, without a GPU.
    A, B, D = (torch.empty(256, 256, dtype=torch.float16) for _ in range(3))
    kernel = fn.kernel
    kernel.arch = "sm_90a"
    kernel.compile_for(A, B, D, 1.0, 0.0, ns["load_vector_elems"](A, B))
    assert "mma.sync.aligned.m16n8k16" in kernel.ptx


def test_07_steps_are_the_capstone_with_ideas_switched_off(bench) -> None:
    """Each notebook-07 step the benchmark derives from hopper_ws changes settings the cell still
    defines, and the settings reach the compiled kernel (no multicast without a cluster)."""
    import torch

    import gemmlab

    args = [torch.empty(s, dtype=torch.float16) for s in ((512, 256), (384, 256), (512, 384))]
    ptx = {}
    for name in ("hopper_ws_persistent", "hopper_ws"):
        fn, ns = bench.load_kernel("07_hopper", name)
        assert callable(fn)
        for key, value in bench.VARIANTS.get(name, ("", {}))[1].items():
            assert ns[key] == value
        ptx[name] = gemmlab.dsl.compile(ns["ws_jit"], *args, arch="sm_90a").ptx
    assert ".multicast::cluster" in ptx["hopper_ws"] and ".multicast::cluster" not in ptx["hopper_ws_persistent"]
    assert set(bench.FIXED_SHAPE) <= {n for _, n in bench.KERNELS}


def test_capstone_attempts_reach_the_compiled_kernel(bench) -> None:
    """The capstone's attempt rows compile what they say: the whole-tile epilogue has no stmatrix and
    3 stages; the sliced epilogue uses stmatrix, with 3 or 4 stages (visible in its shared memory);
    only the stream-K build waits on another CTA's flag (ld.acquire.gpu)."""
    import torch

    import gemmlab

    args = [torch.empty(s, dtype=torch.float16) for s in ((256, 128), (512, 128), (256, 512))]
    seen = {}
    for name in ("capstone_whole_tile_epilogue", "capstone_3_stages", "capstone_stream_k", "capstone"):
        _, ns = bench.load_kernel("09_capstone", name)
        workspace = [torch.empty(ns["CAP_SMS"] * ns["CAP_BM"] * ns["CAP_BN"]),
                     torch.zeros(ns["CAP_SMS"], dtype=torch.int32), 1]
        kernel = gemmlab.dsl.compile(ns["capstone_jit"], *args, *workspace, ns["CAP_STREAM_K"], arch="sm_90a")
        seen[name] = (ns["CAP_STAGES"], "stmatrix" in kernel.ptx, "ld.acquire.gpu" in kernel.ptx,
                      kernel.resources.dynamic_smem_bytes)
    assert seen["capstone_whole_tile_epilogue"][:3] == (3, False, False)
    assert seen["capstone_3_stages"][:3] == (3, True, False)
    assert seen["capstone_stream_k"][:3] == (4, True, True) and seen["capstone"][:3] == (4, True, False)
    assert seen["capstone"][3] > seen["capstone_3_stages"][3]


def test_pingpong_attempt_runs_after_the_capstone_cell_and_compiles_its_own_schedule(bench) -> None:
    """The ping-pong attempt is the capstone's cell plus a file that replaces its kernel: capstone_gemm (the
    cell's, with its padding) now launches a kernel whose warpgroups each own a 64x256 tile (wgmma n256 on 64
    rows, one warpgroup's tiled MMA), hand turns to each other through named-barrier arrives, and fits 5 stages."""
    fn, ns = bench.load_kernel("09_capstone", "capstone_pingpong")
    assert fn is ns["capstone_gemm"] and "ping-pong" in ns["CAPSTONE_DESCRIPTION"]
    assert ns["cap_launch"].__code__.co_filename != ns["cap_kernel"].__code__.co_filename   # redefined after the cell
    assert ns["PP_STAGES"] == 5
    with pytest.raises(LookupError):
        bench.load_kernel("09_capstone", "capstone_pingpong", {"NOT_A_SETTING": 1})
    kernels = ns["capstone_compile"]("sm_90a")
    assert len(kernels) == 2
    ptx = kernels[0].ptx
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16" in ptx
    assert "multicast::cluster" in ptx and "stmatrix" in ptx and "ld.acquire.gpu" not in ptx   # whole tiles only
    assert ptx.count("bar.arrive") + ptx.count("barrier.cta.arrive") == 4      # 2 to start, 2 turns passed
    assert kernels[0].resources.dynamic_smem_bytes >= 5 * (64 + 256) * 64 * 2 and not kernels[0].resources.spills
    assert "bf16" in kernels[1].ptx


def test_set_reaches_a_dsl_cells_integer_constants(bench) -> None:
    _, ns = bench.load_kernel("07_hopper", "hopper_ws", {"WS_GROUP_M": 16, "WS_STAGES": 4})
    assert ns["WS_GROUP_M"] == 16 and ns["WS_STAGES"] == 4
    with pytest.raises(LookupError, match="no integer constant NOT_A_SETTING"):
        bench.load_kernel("07_hopper", "hopper_ws", {"NOT_A_SETTING": 1})
