"""Timings cannot be bought (issue 44, item 5), on the CPU: the speed of light of a GEMM and of a copy from
the GPU's theoretical peaks (refusing impossible times, flooring the rest), persisting L2 reset before
timed rounds and refused when a timed call turns it on again (a fake driver), a recorded launch that
sets an access-policy window refused by the judge, and the leaderboard's shapes and seeds drawn from a
secret that reaches the judge's kernel and never the student's. GPU tests at the end."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import gemmlab
from gemmlab.timing import leaderboard_draw, speed_of_light, events as timing
from gemmlab.running import persisting_l2
from gemmlab.timing.speed_of_light import FasterThanLightError, rates_from_attributes

ROOT = Path(__file__).resolve().parents[2]
#: What the driver reports for an H100 SXM: compute capability, SMs, SM clock and memory clock (kHz), bus bits.
H100 = rates_from_attributes("NVIDIA H100 80GB HBM3", (9, 0), 132, 1_980_000, 2_619_000, 5120)


# ----------------------------------------------------------------------------- the speed of light
def test_peaks_match_the_datasheets() -> None:
    assert H100.tensor_tflops == pytest.approx(1070.5, abs=0.1)
    at_boost = rates_from_attributes("H100", (9, 0), 132, 1_830_000, 2_619_000, 5120)
    assert at_boost.tensor_tflops == pytest.approx(989.4, abs=0.1), "NVIDIA quotes 989.4 TFLOPS at 1,830 MHz"
    assert H100.dram_gbps == pytest.approx(3352, abs=1), "and 3.35 TB/s"
    a100 = rates_from_attributes("A100", (8, 0), 108, 1_410_000, 1_593_000, 5120)
    assert a100.tensor_tflops == pytest.approx(311.9, abs=0.1) and a100.dram_gbps == pytest.approx(2039, abs=1)
    assert H100.peak_flops(1) == 2 * H100.peak_flops(2), "8-bit inputs run twice as fast"
    assert H100.tflops_at_clock(990) == pytest.approx(H100.tensor_tflops / 2)
    unknown = rates_from_attributes("a future GPU", (15, 0), 200, 2_000_000, 0, 0)
    assert unknown.tensor_tflops is None and unknown.dram_gbps is None


def test_a_gemm_is_bound_by_compute_or_by_reading_its_inputs() -> None:
    assert speed_of_light.gemm_light_ms((4096,) * 3, H100) == pytest.approx(2 * 4096 ** 3 / 1070.5e12 * 1e3, rel=1e-3)
    skinny = (64, 64, 1 << 20)                                # 16 MiB of inputs, 8.6 GFLOP: DRAM-bound
    read = (64 * (1 << 20) * 2) * 2
    assert speed_of_light.gemm_light_ms(skinny, H100) == pytest.approx(read / 3352e9 * 1e3, rel=1e-3)
    warm = speed_of_light.gemm_light_ms(skinny, H100, inputs_from_dram=False)
    assert warm == pytest.approx(2 * 64 * 64 * (1 << 20) / 1070.5e12 * 1e3, rel=1e-3), "no flush: compute only"
    assert speed_of_light.gemm_light_ms((64, 64, 64), H100, convention="nn", beta=1.0) > \
        speed_of_light.gemm_light_ms((64, 64, 64), H100, convention="nn", beta=0.0), "beta ≠ 0 reads C too"
    assert speed_of_light.gemm_light_ms((4096,) * 3, rates_from_attributes("?", (15, 0), 1, 1, 0, 0)) is None


def test_honest_timings_are_never_refused() -> None:
    """Every row ever recorded by benchmarks/solutions.py (cuBLAS and the best kernels of the course, on
    the H100) lies well below the H100's speed of light, and a time at the light itself passes."""
    best = json.loads((ROOT / "benchmarks" / "solutions_best.json").read_text())
    rows = [(kernel, key, row) for kernel, by_key in best["devices"]["NVIDIA H100 80GB HBM3"].items()
            for key, row in by_key.items() if row.get("tflops")]
    assert len(rows) > 20
    for kernel, key, row in rows:
        n = int(key.split("x")[0])
        light = speed_of_light.gemm_light_ms((n, n, n), H100)
        for tflops in (row["tflops"], row["cublas_tflops"]):
            ms = 2 * n ** 3 / (tflops * 1e12) * 1e3
            assert ms > 1.2 * light, (kernel, key, tflops)
            speed_of_light.refuse_faster_than_light([ms], light, kernel)
    speed_of_light.refuse_faster_than_light([0.1284, 0.125], 0.1284, "at the light, within the timer's slack")


def test_an_impossible_time_is_refused_and_floored() -> None:
    light = speed_of_light.gemm_light_ms((4096,) * 3, H100)
    with pytest.raises(FasterThanLightError, match=r"1 of 3 timed calls finished faster .*the fastest in 0\.0100 ms.*"
                                                   r"peak: 1,071 TFLOPS at 1,980 MHz, DRAM 3,352 GB/s\)") as caught:
        speed_of_light.refuse_faster_than_light([0.18, 0.01, 0.19], light, "mine at 4096³", H100)
    assert isinstance(caught.value, gemmlab.checking.integrity.BenchIntegrityError), "graded code catches it as a cheat"
    assert speed_of_light.floor_at_light([0.01, 0.2], light) == [light, 0.2]
    assert speed_of_light.floor_at_light([0.01], None) == [0.01]
    speed_of_light.refuse_faster_than_light([0.0], None, "a GPU without a known peak")


def test_a_result_floors_its_times_before_the_median_and_ratio() -> None:
    from gemmlab.timing.bench import result_from_rounds

    light = 0.128
    kernel = [[0.001], [0.001], [0.2], [0.2]]          # two impossible rounds (as if one shape were "free")
    cublas = [[0.18], [0.18], [0.18], [0.18]]
    r = result_from_rounds(kernel, cublas, (4096,) * 3, "tn", "float16", "float16", "GPU", light_ms=light)
    assert max(r.round_ratios) == pytest.approx(0.18 / light) and r.light_ms == light
    unfloored = result_from_rounds(kernel, cublas, (4096,) * 3, "tn", "float16", "float16", "GPU")
    assert max(unfloored.round_ratios) == pytest.approx(180.0)


def test_a_copy_faster_than_dram_is_refused(monkeypatch) -> None:
    from gemmlab.checking import copy_check
    from gemmlab.running import device

    monkeypatch.setattr(speed_of_light, "peak_rates", lambda index: H100)
    monkeypatch.setattr(device, "device_attributes", lambda index: type("A", (), {"l2_bytes": 50 << 20})())
    source = 8192 * 8192 * 2                                   # 128 MiB: from DRAM on every call
    honest = source / 3.0e12 * 1e3
    copy_check.refuse_copy_faster_than_dram([honest] * 20, source, 0, "the copy")
    with pytest.raises(FasterThanLightError, match="the copy"):
        copy_check.refuse_copy_faster_than_dram([honest] * 19 + [honest / 4], source, 0, "the copy")
    copy_check.refuse_copy_faster_than_dram([1e-6], 4 << 20, 0, "a copy that fits in L2: no bound")


# ----------------------------------------------------------------------------- persisting L2
class FakeDriver:
    """The driver calls persisting_l2 makes, over a context limit and per-stream windows."""

    from cuda.bindings.driver import CUresult     # the real enum: results are read by name

    class CUlimit:
        CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 6

    class CUstreamAttrID:
        CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1

    def __init__(self, supported: bool = True) -> None:
        self.limit, self.windows, self.resets, self.supported = 0, {}, 0, supported

    def CUstream(self, handle):  # noqa: N802 - the driver's name
        return int(handle)

    def cuCtxSetLimit(self, which, value):  # noqa: N802
        if not self.supported:
            return (self.CUresult.CUDA_ERROR_UNSUPPORTED_LIMIT,)
        self.limit = value
        return (self.CUresult.CUDA_SUCCESS,)

    def cuCtxGetLimit(self, which):  # noqa: N802
        return (self.CUresult.CUDA_SUCCESS if self.supported else self.CUresult.CUDA_ERROR_UNSUPPORTED_LIMIT,
                self.limit)

    def cuCtxResetPersistingL2Cache(self):  # noqa: N802
        self.resets += 1
        return (self.CUresult.CUDA_SUCCESS,)

    def cuStreamGetAttribute(self, stream, attr):  # noqa: N802
        window = type("W", (), {"num_bytes": self.windows.get(stream, 0)})()
        return (self.CUresult.CUDA_SUCCESS, type("V", (), {"accessPolicyWindow": window})())


def test_persisting_l2_is_reset_before_timing_and_refused_after(monkeypatch) -> None:
    fake = FakeDriver()
    monkeypatch.setattr(persisting_l2, "driver", lambda: fake)
    monkeypatch.setattr(persisting_l2, "clear_window", lambda stream: fake.windows.pop(int(stream), None))
    fake.limit, fake.windows[7] = 32 << 20, 1 << 20               # left over from earlier work
    check = timing.guard_persisting_l2("mine at 4096³", stream=7)
    assert (fake.limit, fake.windows, fake.resets) == (0, {}, 1), "limit 0, lines normal, window gone"
    check()                                                      # nothing turned it on: the round stands
    fake.windows[7] = 48 << 20                                   # a timed call set a window on the stream
    with pytest.raises(gemmlab.checking.integrity.BenchIntegrityError,
                       match=r"mine at 4096³: during the timed calls the stream carries an L2 access-policy window "
                             r"over 50,331,648 bytes.*cudaStreamSetAttribute"):
        check()
    assert fake.windows == {} and fake.resets == 2, "and it is reset again for whatever runs next"
    timing.guard_persisting_l2("x", stream=7)
    fake.limit = 16 << 20
    assert "persisting-L2 limit was set to 16,777,216 bytes" in persisting_l2.tampering(7)


def test_a_gpu_without_persisting_l2_needs_no_reset(monkeypatch) -> None:
    fake = FakeDriver(supported=False)
    monkeypatch.setattr(persisting_l2, "driver", lambda: fake)
    timing.guard_persisting_l2("old GPU", stream=7)()
    assert fake.resets == 0 and persisting_l2.limit_bytes() == 0


@pytest.mark.slow
def test_the_judge_refuses_a_plan_that_sets_an_access_policy_window() -> None:
    import torch

    from gemmlab.dsl import gemm_fn
    from gemmlab.dsl.host_recording import H100_ATTRIBUTES
    from gemmlab.dsl.recording import probe, recording
    from gemmlab.judge.dsl_replay import ACCESS_POLICY_WINDOW, PlanError, parse_plan
    from tests.dsl_kernels import simple_gemm

    kernel = gemm_fn(simple_gemm.gemm, arch="sm_90a")
    tensors = [probe((64, 32), (32, 1), torch.float16, 0), probe((48, 32), (32, 1), torch.float16, 0),
               probe((64, 48), (48, 1), torch.float16, 256)]
    with recording("sm_90a", H100_ATTRIBUTES, tensors) as recorder:
        kernel(*tensors)
    plan = recorder.plan()
    parse_plan(plan, 3)                                          # as recorded: runs
    window = (0).to_bytes(8, "little") + (64 << 20).to_bytes(8, "little") + bytes(48)
    plan["steps"][0].setdefault("attributes", []).append([ACCESS_POLICY_WINDOW, window.hex()])
    with pytest.raises(PlanError, match="L2 access-policy window .* the judge refuses it"):
        parse_plan(plan, 3)


# ----------------------------------------------------------------------------- the leaderboard's secret draw
def test_shapes_and_seeds_come_from_the_secret() -> None:
    runs = leaderboard_draw.draw_runs("a secret of this leaderboard run")
    assert runs == leaderboard_draw.draw_runs("a secret of this leaderboard run"), "reproducible by the instructor"
    assert [(r.nominal, r.dtype) for r in runs] == [(4096, "float16"), (4096, "bfloat16"), (8192, "float16"),
                                                     (8192, "bfloat16")]
    assert runs[0].shape == runs[1].shape and runs[0].seed != runs[1].seed
    other = leaderboard_draw.draw_runs("another secret")
    assert [r.shape for r in other] != [r.shape for r in runs] and [r.seed for r in other] != [r.seed for r in runs]
    for r in runs + other:
        assert all(v % 64 == 0 and abs(v - r.nominal) <= 0.125 * r.nominal for v in r.shape)
        assert 0 <= r.seed < 2 ** 63
    offsets = {leaderboard_draw.drawn_size(f"s{i}".encode(), 4096, "M") - 4096 for i in range(400)}
    assert offsets == {64 * k for k in range(-8, 9)}, "every allowed size is drawn, none outside"
    plain = leaderboard_draw.draw_runs(None)
    assert [r.shape for r in plain] == [(4096,) * 3] * 2 + [(8192,) * 3] * 2 and {r.seed for r in plain} == {None}


def test_the_secret_reaches_the_judges_kernel_and_never_the_students(monkeypatch, tmp_path: Path) -> None:
    from autograder.harness import judging, sandbox

    monkeypatch.setenv(leaderboard_draw.SECRET_ENV, "s3cret")
    student = sandbox.sandbox_env(sandbox.SandboxSpec(tmp_path / "s", tmp_path / "r"))
    judge = sandbox.sandbox_env(sandbox.SandboxSpec(tmp_path / "j", tmp_path / "jr", env=judging.judge_kernel_env()))
    assert judge[leaderboard_draw.SECRET_ENV] == "s3cret"
    assert leaderboard_draw.SECRET_ENV not in student and "s3cret" not in json.dumps(student)
    assert leaderboard_draw.SECRET_ENV not in sandbox.PASSED_THROUGH
    assert [r.shape for r in leaderboard_draw.runs()] == [r.shape for r in leaderboard_draw.draw_runs("s3cret")]
    monkeypatch.delenv(leaderboard_draw.SECRET_ENV)
    assert leaderboard_draw.SECRET_ENV not in judging.judge_kernel_env()


# ----------------------------------------------------------------------------- on a GPU
def test_a_launcher_that_sets_a_persisting_window_is_refused(gpu) -> None:
    """A "kernel" that sets aside persisting L2 and puts its inputs in an access-policy window on torch's
    stream before computing: bench_gemm refuses the round, and leaves persisting L2 off behind it."""
    import torch
    from cuda.bindings import driver as d

    def persisting(A, B, D):
        d.cuCtxSetLimit(d.CUlimit.CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 32 << 20)
        value = d.CUstreamAttrValue()
        value.accessPolicyWindow.base_ptr = A.data_ptr()
        value.accessPolicyWindow.num_bytes = min(A.numel() * A.element_size(), 32 << 20)
        value.accessPolicyWindow.hitRatio = 1.0
        value.accessPolicyWindow.hitProp = d.CUaccessProperty.CU_ACCESS_PROPERTY_PERSISTING
        value.accessPolicyWindow.missProp = d.CUaccessProperty.CU_ACCESS_PROPERTY_STREAMING
        d.cuStreamSetAttribute(d.CUstream(torch.cuda.current_stream().cuda_stream),
                               d.CUstreamAttrID.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, value)
        torch.matmul(A, B.T, out=D)

    with torch.cuda.stream(torch.cuda.Stream()):
        with pytest.raises(gemmlab.checking.integrity.BenchIntegrityError, match="persisting|access-policy"):
            gemmlab.bench_gemm(persisting, shape=(1024, 1024, 1024), verify=False)
        assert persisting_l2.tampering(torch.cuda.current_stream().cuda_stream) == ""


def test_work_left_on_another_stream_times_faster_than_light_and_is_refused(gpu) -> None:
    """A launcher that puts the product on a side stream and returns at once: the events time nothing, and
    without the grader's checks (verify=False) the speed of light alone refuses it."""
    import torch

    side = torch.cuda.Stream()

    def elsewhere(A, B, D):
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.matmul(A, B.T, out=D)

    with pytest.raises(FasterThanLightError, match="faster than this GPU can do the work"):
        gemmlab.bench_gemm(elsewhere, shape=(8192, 8192, 8192), verify=False, rounds=4, rep=3)
