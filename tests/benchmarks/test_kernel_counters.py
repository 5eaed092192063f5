"""benchmarks/kernel_counters.py without a GPU or ncu: arguments, the ncu command line for a child,
kernel names, the derived columns, the result check, and a whole run against a stand-in for ncu."""
from __future__ import annotations

import json
import math

import pytest

import kernel_counters as kc  # noqa: E402
import ncu  # noqa: E402

CAP = "kernel_cutlass_cap_kernel_CopyAtom_ThrID10_TVLayoutSrc1_8192_TVLayoutDst1_8192_Valuetypef16_0"


def test_the_ncu_command_profiles_one_child_at_the_boards_own_clocks() -> None:
    cmd = kc.ncu_command("/opt/ncu", "capstone_pingpong", 4096, "bfloat16")
    assert cmd[:2] == ["/opt/ncu", "--csv"]
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--metrics") + 1].split(",") == list(kc.METRICS.values())
    child = cmd[cmd.index("--metrics") + 2:]
    assert child[1].endswith("benchmarks/kernel_counters.py")
    assert child[2:] == ["--child", "capstone_pingpong", "--shape", "4096", "--dtype", "bfloat16"]
    assert kc.parse_args(child[2:]).child == "capstone_pingpong"          # the child understands it


def test_the_metrics_are_the_ones_the_table_explains() -> None:
    assert kc.METRICS == {
        "time_ns": "gpu__time_duration.sum",
        "tensor_pct": "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
        "l2_pct": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "l2_sectors": "lts__t_sectors_srcunit_tex.sum",
        "dram_read_bytes": "dram__bytes_read.sum",
        "sm_hz": "sm__cycles_elapsed.avg.per_second"}


def test_arguments() -> None:
    args = kc.parse_args(["--only", "capstone", "--only", "capstone_pingpong", "--only", "capstone"])
    assert args.only == ["capstone", "capstone_pingpong"] and args.shape == 4096 and args.dtype == "float16"
    assert args.child is None and args.out is None


@pytest.mark.parametrize("argv, message", [
    (["--only", "capstone", "--only", "gemm99"], "unknown kernel(s) ['gemm99']; choose from"),
    (["--child", "nope"], "unknown kernel(s) ['nope']"),
    ([], "--only NAME"),
    (["--only", "capstone", "--shape", "0"], "must be a positive size"),
])
def test_bad_arguments_exit_with_the_valid_names(argv, message, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        kc.parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    if "choose from" in message:
        assert "'capstone_pingpong'" in err and "'gemm06_cpp'" in err


def test_without_ncu_it_says_how_to_get_it(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ncu, "FALLBACKS", (str(tmp_path / "no" / "ncu"),))
    monkeypatch.setattr(kc, "profile_kernel", lambda *a: pytest.fail("ran without ncu"))
    with pytest.raises(SystemExit, match=r"not found.*CUDA toolkit.*PATH"):
        kc.main(["--only", "capstone"])


@pytest.mark.parametrize("kernel, known, expected", [
    (CAP, ["cap_kernel", "cap", "capstone_gemm"], "cap_kernel"),
    (CAP, [], "cap_kernel"),                                       # cut after its "kernel" word
    ("kernel_cutlass_copy_kernel_dsl_tensorptrf16gmem_0", ["copy_kernel_dsl"], "copy_kernel_dsl"),
    ("kernel_cutlass_pp_step_CopyAtom_ThrID10_0", [], "pp_step"),   # cut before the first mangled argument
    ("ladder_wmma(const __half *, const __half *, __half *, int, int, int, int, int, int, float, float)", [],
     "ladder_wmma"),
    ("void gemm06<__half, 128, 128, 32, 4, 2, 2, 8>(const __half *, const __half *, __half *, int)", [],
     "gemm06<__half, 128, 128, 32, 4, 2, 2, 8>"),
    ("void gemm05<(int)128>(float)", [], "gemm05<(int)128>"),       # a "(" inside the template stays
    ("(anonymous namespace)::fill(int)", [], "fill"),
    ("ladder_naive", [], "ladder_naive"),
])
def test_short_kernel_names(kernel, known, expected) -> None:
    assert kc.short_name(kernel, known) == expected


def test_derived_columns() -> None:
    # 4096³: 2·4096³ FLOPs. A 128x256 tile reads A once per 256 columns and B once per 128 rows:
    # 2 bytes · 4096³ · (1/256 + 1/128) = 4096³ · 3/128 bytes, i.e. 3/256 byte per FLOP = 11.71875 per kFLOP.
    flops = 2 * 4096 ** 3
    sectors = 4096 ** 3 * 3 / 128 / 32
    got = kc.derived({"time_ns": 200_000.0, "l2_sectors": sectors, "dram_read_bytes": 100_663_296.0,
                      "sm_hz": 1_755_000_000.0, "tensor_pct": 80.0}, (4096, 4096, 4096))
    assert got["time_us"] == pytest.approx(200.0)
    assert got["tflops"] == pytest.approx(flops / 200e-6 / 1e12)      # 687.19...
    assert got["tflops"] == pytest.approx(687.194767)
    assert got["l2_bytes_per_kflop"] == pytest.approx(11.71875)
    assert got["l2_gbytes"] == pytest.approx(4096 ** 3 * 3 / 128 / 1e9)
    assert got["dram_mbytes"] == pytest.approx(100.663296)
    assert got["clock_ghz"] == pytest.approx(1.755)


def test_derived_columns_of_missing_counters_are_nan() -> None:
    got = kc.derived({"time_ns": 0.0}, (64, 128, 64))
    assert all(math.isnan(v) for k, v in got.items() if k != "time_us") and got["time_us"] == 0.0


def test_several_launches_are_summed() -> None:
    launches = [{"time_ns": 100.0, "l2_sectors": 10.0, "dram_read_bytes": math.nan},
                {"time_ns": 50.0, "l2_sectors": 5.0, "dram_read_bytes": 64.0, "tensor_pct": 3.0}]
    assert kc.total(launches) == {"time_ns": 150.0, "l2_sectors": 15.0, "dram_read_bytes": 64.0}


def test_the_check_accepts_rounding_and_names_a_wrong_element() -> None:
    torch = pytest.importorskip("torch")
    gen = torch.Generator().manual_seed(0)
    A, B = torch.randn(64, 256, generator=gen), torch.randn(32, 256, generator=gen)
    expected = A @ B.T
    for dtype in ("float16", "bfloat16"):
        assert kc.verdict(expected.to(getattr(torch, dtype)), expected, 256, dtype) is None   # output rounding
    wrong = expected.half().clone()
    wrong[5, 7] += 1.0
    assert kc.verdict(wrong, expected, 256, "float16") == (
        f"1 of 2048 elements of D are wrong; worst at (5, 7): {float(wrong[5, 7]):.4g}, "
        f"expected {float(expected[5, 7]):.4g}")
    assert "of 2048 elements of D are wrong" in kc.verdict(torch.zeros(64, 32), expected, 256, "float16")  # unwritten
    wrong[0, 0] = float("nan")
    assert kc.verdict(wrong, expected, 256, "float16") == "1 of 2048 elements of D are not finite"


def fake_profile(kernels: list[str], info: dict | None):
    """A stand-in for ncu.profile: these launches, and the child's INFO line (None: the child died)."""
    def run(child, metrics, options=None, timeout=1200):
        assert options == kc.NCU_OPTIONS and metrics == kc.METRICS
        launches = [{"kernel": k, "time_ns": 2e5, "l2_sectors": 5e7, "dram_read_bytes": 1e8, "sm_hz": 1.7e9,
                     "tensor_pct": 70.0, "l2_pct": 85.0} for k in kernels]
        stdout = "==PROF== Connected\nTraceback (most recent call last):\nRuntimeError: boom\n"
        if info is not None:
            stdout = "==PROF== Connected\n" + kc.INFO + json.dumps(info) + "\n"
        return launches, stdout
    return run


INFO = {"device": "NVIDIA H100 80GB HBM3", "convention": "tn", "shape": [4096, 4096, 4096],
        "names": ["cap_kernel", "capstone_gemm"]}


def test_a_run_prints_a_row_per_launch_and_saves_json(monkeypatch, tmp_path, capsys) -> None:
    monkeypatch.setattr(ncu, "find_ncu", lambda: "/x/ncu")
    monkeypatch.setattr(ncu, "profile", fake_profile([CAP, "void fill<float>(float *, int)"], INFO))
    out = tmp_path / "counters.json"
    assert kc.main(["--only", "capstone", "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "| capstone | cap_kernel | 4096×4096×4096 | 200.0 | 687.2 | 70.0 | 85.0 | 11.64 |" in table
    assert "| capstone | fill<float> |" in table
    assert "| capstone | all 2 launches | 4096×4096×4096 | 400.0 | 343.6 | - | - | 23.28 |" in table
    assert "NVIDIA H100 80GB HBM3" in table
    saved = json.loads(out.read_text())
    launch = saved["kernels"]["capstone"]["launches"][0]
    assert launch["kernel"] == "cap_kernel" and launch["full_name"] == CAP and launch["l2_sectors"] == 5e7
    assert saved["kernels"]["capstone"]["all_launches"]["time_ns"] == 4e5 and saved["metrics"] == kc.METRICS


def test_a_child_that_did_not_finish_is_an_error_with_its_output(monkeypatch) -> None:
    monkeypatch.setattr(ncu, "profile", fake_profile([CAP], None))
    with pytest.raises(SystemExit, match=r"capstone: the child process did not finish(.|\n)*RuntimeError: boom"):
        kc.profile_kernel("capstone", 4096, "float16")


def test_no_profiled_launch_is_an_error(monkeypatch) -> None:
    monkeypatch.setattr(ncu, "profile", fake_profile([], INFO))
    with pytest.raises(SystemExit, match="ncu profiled no kernel launch"):
        kc.profile_kernel("capstone", 4096, "float16")


def test_json_has_no_nan() -> None:
    assert kc.plain({"a": [1.0, math.nan], "b": {"c": math.nan, "d": "x"}}) == {"a": [1.0, None],
                                                                                "b": {"c": None, "d": "x"}}


def test_fixed_shape_kernels_keep_their_tile() -> None:
    assert kc.problem("hopper_one_tile", 4096) == (64, 128, 64)
    assert kc.problem("capstone", 2048) == (2048, 2048, 2048)


def test_the_child_without_a_gpu_says_so(no_gpu, capsys) -> None:
    assert kc.main(["--child", "capstone"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
