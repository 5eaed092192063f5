"""gemmlab.profile and gemmlab.timeline on a machine without a GPU: through the class's pool (a stand-in service
answered by the fake judge, whose readouts and timelines are SYNTHETIC), and with neither GPU nor pool (the
course's recordings, or what to do). The requests that cross are checked as data."""
from __future__ import annotations

import base64

import pytest

import gemmlab
from gemmlab.judge.spec import DslSpec
from gemmlab.profiling import api
from gemmlab.profiling.errors import ProfilerError, TimelineError
from gemmlab.profiling.trace_format import BUFFER_SYMBOL

from .copy_kernels import copy_kernel, copy_launcher
from .fake_pool import FakePool
from .launchers import tn_kernel, tn_launcher


@pytest.fixture
def pool(fresh_connection, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                           # report files go to ./gemmlab-profiles by default
    with FakePool() as running:
        gemmlab.connect(running.url, "good")
        yield running
    gemmlab.disconnect()


def test_without_a_gpu_or_a_pool_it_says_what_to_do_or_shows_the_recording(fresh_connection, capsys) -> None:
    fn = tn_launcher(tn_kernel())
    with pytest.raises(ProfilerError, match=r"needs a GPU.*gemmlab.connect\(url, token\).*recorded='<name>'.*hopper_ws"):
        gemmlab.profile(fn, (256, 256, 64))
    shown = gemmlab.profile(fn, (256, 256, 64), recorded="hopper_ws")
    assert shown.source in ("synthetic", "recorded") and shown.label.split(": ")[-1].startswith(shown.device)
    assert "showing the recorded readout of 'hopper_ws'" in capsys.readouterr().out
    timeline = gemmlab.timeline(fn, (256, 256, 64), recorded="capstone")
    assert timeline.ctas and timeline.source in ("synthetic", "recorded")
    with pytest.raises(ProfilerError, match="no recorded readout named 'nope'; recorded: .*ladder_naive"):
        gemmlab.profile(fn, (256, 256, 64), recorded="nope")
    with pytest.raises(ProfilerError, match="letters, digits and _"):
        api.recorded_readout("../../etc/passwd")


def test_every_shipped_recording_says_where_and_when_or_that_it_is_synthetic() -> None:
    names = api.recorded_names("readout")
    assert {"gemm05_cpp", "gemm06_cpp", "hopper_ws", "ladder_naive", "ladder_any", "capstone", "transpose_row_major",
            "transpose_swizzled"} <= set(names)
    assert {"hopper_ws", "capstone"} <= set(api.recorded_names("timeline"))
    for name in names:
        r = api.recorded_readout(name)
        assert r.source in ("recorded", "synthetic") and r.device and r.measured_on
        assert r.source == "synthetic" or (r.ncu_version[:4].isdigit() and r.measured_on[:4].isdigit())
    for name in api.recorded_names("timeline"):
        t = api.recorded_timeline(name)
        assert t.source in ("recorded", "synthetic") and (t.source == "synthetic" or t.measured_on[:4].isdigit())


def test_a_profile_through_the_pool_keeps_the_report_and_shows_the_model(pool, tmp_path) -> None:
    readout = gemmlab.profile(tn_launcher(tn_kernel()), (256, 384, 64), report_dir=tmp_path,
                              predicted={"ld": (1.0, 0.0)})
    (request,) = pool.requests
    assert request.action == "profile" and request.shape == (256, 384, 64) and request.spec.launches[0].shape == \
        (256, 384, 64)
    assert readout.device == "fake GPU (CPU tests) (shared GPU pool)" and readout.source == "synthetic"
    assert readout.shared_row("ld").predicted.wavefronts == 1.0
    saved = tmp_path / readout.report_file.split("/")[-1]
    assert saved.read_bytes() == base64.b64decode("TkNVUg==") and saved.suffix == ".ncu-rep"
    assert readout.report_file in readout.summary()


def test_a_wrong_kernel_is_not_profiled_and_says_why(pool) -> None:
    with pytest.raises(ProfilerError, match=r"failed its checked call .* Fix it first:(.|\n)*FAIL"):
        gemmlab.profile(tn_launcher(tn_kernel("gemm_tiny_wrong")), (256, 384, 64))


def test_a_copy_kernels_profile_and_a_timeline_through_the_pool(pool) -> None:
    import torch

    readout = gemmlab.profile(copy_launcher(copy_kernel()), (64, 96), dtype=torch.float32)
    request = pool.requests[-1]
    assert readout.what == "copy" and request.copy == {"transpose": False, "who": False}
    assert request.shape == (64, 96, 1) and request.dtype == "float32"
    timeline = gemmlab.timeline(tn_launcher(tn_kernel()), (256, 256, 64), capacity=64, ctas=2, names={40: "mine"})
    request = pool.requests[-1]
    assert request.action == "trace" and request.profile.capacity == 64 and request.profile.ctas == 2
    assert timeline.capacity == 64 and timeline.names == {40: "mine"} and "shared GPU pool" in timeline.device


@pytest.mark.parametrize("call, error, words", [
    (lambda fn: gemmlab.profile(fn, (1, 2, 3, 4)), ProfilerError, r"\(M, N, K\) for a GEMM or \(M, N\) for a copy"),
    (lambda fn: gemmlab.profile(fn, (0, 8, 8)), ProfilerError, "all positive"),
    (lambda fn: gemmlab.profile(fn, (8, 8, 8), convention="tt"), ProfilerError, "'tn' or 'nn'"),
    (lambda fn: gemmlab.timeline(fn, (8, 8, 8), capacity=0), TimelineError, "capacity is 1 to"),
    (lambda fn: gemmlab.timeline(fn, (8, 8, 8), names={3: "x"}), TimelineError, "id from 32 to 127"),
])
def test_bad_arguments_are_refused_before_anything_is_sent(pool, call, error, words) -> None:
    with pytest.raises(error, match=words):
        call(tn_launcher(tn_kernel()))
    assert pool.requests == []


@pytest.mark.slow
def test_a_dsl_function_is_recorded_with_its_marks_for_a_timeline_only(pool) -> None:
    from tests.dsl_kernels import traced_gemm

    fn = gemmlab.dsl.gemm_fn(traced_gemm.traced_gemm)
    gemmlab.profile(fn, (64, 48, 40))
    gemmlab.timeline(fn, (64, 48, 40))
    profiled, traced = pool.requests

    def images(request) -> list[bytes]:
        assert isinstance(request.spec, DslSpec)
        return [base64.b64decode(i) for _, plan in request.spec.plans for i in plan["images"].values()]

    assert not any(BUFFER_SYMBOL.encode() in image for image in images(profiled))   # checks and profiles: no marks
    assert any(BUFFER_SYMBOL.encode() in image for image in images(traced))          # the timeline's build: marks


def test_the_grader_runs_no_profiles_and_shows_the_recording(pool, monkeypatch, capsys) -> None:
    fn = tn_launcher(tn_kernel())
    monkeypatch.setenv("GEMMLAB_GRADING", "1")
    shown = gemmlab.profile(fn, (256, 256, 64), recorded="capstone")
    assert shown.kernel == api.recorded_readout("capstone").kernel and pool.requests == []
    assert "the grader runs no profiles: showing the recorded readout of 'capstone'" in capsys.readouterr().out
    with pytest.raises(ProfilerError, match="for exploring, not grading"):
        gemmlab.timeline(fn, (256, 256, 64))
