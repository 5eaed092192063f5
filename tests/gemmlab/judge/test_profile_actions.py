"""The judge's profile and trace actions without a GPU: the request's options and limits, the report's new
field, the flow (a checked call first; a wrong kernel gets its check and no profile) on the fake backend and
in a real judge process, and the profile's ncu run against a stand-in for ncu. Every readout and timeline
here is SYNTHETIC."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gemmlab.errors import ContextLostError
from gemmlab.judge import JudgeError, JudgeReport, JudgeRequest, KernelSpec
from gemmlab.judge.backend import judge
from tests.support.fake_judge import FakeBackend, fake_judge_command
from gemmlab.judge.client import judge as judge_in_process
from gemmlab.judge.profile_options import MAX_BUFFER_RECORDS, MAX_CAPACITY, ProfileOptions
from gemmlab.judge.profiled_calls import check_request, launched_kernels
from gemmlab.judge.protocol import EXCLUSIVE_ACTIONS, TIMING_ACTIONS
from gemmlab.judge.spec import RecordedLaunch
from gemmlab.profiling.errors import ProfilerError
from gemmlab.profiling.readout import Readout
from gemmlab.profiling.timeline import Timeline

from .cases import naive_spec

SHAPE = (256, 128, 64)


def request(action: str = "profile", name: str = "gemm_naive", **fields) -> JudgeRequest:
    return JudgeRequest(naive_spec(name), action, shape=SHAPE, **fields)


def test_profile_and_trace_are_exclusive_one_shape_actions_with_options() -> None:
    assert set(EXCLUSIVE_ACTIONS) == {*TIMING_ACTIONS, "profile", "trace"}
    r = request("trace", profile={"capacity": 64, "ctas": 3, "names": {"40": "swizzle"}})
    assert r.run_shapes() == [SHAPE] and r.profile == ProfileOptions(64, 3, {40: "swizzle"})
    again = JudgeRequest.from_json(r.to_json())
    assert again == r and json.loads(r.to_json())["profile"] == {"capacity": 64, "ctas": 3, "names": {"40": "swizzle"}}
    assert request("profile").profile == ProfileOptions()                       # defaults
    assert "profile" not in json.loads(JudgeRequest(naive_spec(), "check", shapes=[SHAPE]).to_json())


@pytest.mark.parametrize("fields, words", [
    ({"action": "check", "profile": {"capacity": 8}}, "profile and trace actions only"),
    ({"profile": {"capacity": MAX_CAPACITY + 1}}, "capacity is 1 to"),
    ({"profile": {"capacity": 0}}, "capacity is 1 to"),
    ({"profile": {"ctas": 0}}, "number of CTAs"),
    ({"profile": {"names": {"5": "mine"}}}, "id from 32 to 127"),
    ({"profile": {"names": {"x": "mine"}}}, "keyed by state ids"),
    ({"profile": {"names": {"40": "x" * 41}}}, "1 to 40 characters"),
    ({"profile": {"seed": 1}}, "capacity, ctas and names"),
    ({"copy": {"transpose": False, "who": True}}, "takes no who map"),
])
def test_bad_options_are_refused_with_the_reason(fields, words) -> None:
    data = {**request().to_dict(), **fields}
    with pytest.raises(JudgeError, match=words):
        JudgeRequest.from_dict(data)


def copy_spec(shape: tuple[int, int, int] = (64, 96, 1)) -> KernelSpec:
    """The copy kernel of tests/gemmlab/remote/copy_kernels.py with its launch recorded for ``shape``."""
    from tests.gemmlab.remote.copy_kernels import COPY_SOURCE

    source = COPY_SOURCE.replace("NAME", "copy_tiny").replace("WHO_PARAM", "")
    M, N, _ = shape
    return KernelSpec(source, "copy_tiny", "tn", launches=(RecordedLaunch(shape, (-(-N // 32), -(-M // 32), 1),
                                                                          (32, 8, 1), 0, ("A", "out", M, N)),))


def test_a_profile_of_a_copy_kernel_is_a_copy_request() -> None:
    r = JudgeRequest(copy_spec(), "profile", "float32", shape=(64, 96, 1), copy={"transpose": True, "who": False})
    assert r.is_copy and check_request(r).action == "copy" and check_request(r).shapes == ((64, 96, 1),)
    assert check_request(request()).action == "check" and check_request(request()).profile is None
    with pytest.raises(JudgeError, match="float16, bfloat16"):
        JudgeRequest(naive_spec(), "profile", "float32", shape=SHAPE)          # float32 is a copy's dtype only
    with pytest.raises(JudgeError, match=r"\[M, N, 1\]"):
        JudgeRequest(copy_spec((64, 96, 2)), "profile", "float32", shape=(64, 96, 2),
                     copy={"transpose": False, "who": False})
    report = judge(r, FakeBackend())
    assert report.verdict == "passed" and Readout.from_dict(report.profile["readout"]).what == "copy"


def test_the_report_carries_a_profile_only_when_there_is_one() -> None:
    plain = JudgeReport("passed", "check", check={"rows": []})
    assert "profile" not in plain.to_dict() and JudgeReport.from_json(plain.to_json()) == plain
    with_profile = JudgeReport("passed", "profile", check={}, profile={"readout": {}})
    assert JudgeReport.from_json(with_profile.to_json()) == with_profile
    for broken in ({**with_profile.to_dict(), "profile": [1]}, {**plain.to_dict(), "extra": 1}):
        with pytest.raises(JudgeError):
            JudgeReport.from_dict(broken)


def test_a_profile_comes_after_a_checked_call() -> None:
    report = judge(request("profile"), FakeBackend())
    assert report.verdict == "passed" and report.check["rows"][0]["shape"] == list(SHAPE)
    readout = Readout.from_dict(report.profile["readout"])
    assert readout.source == "synthetic" and readout.shape == SHAPE and readout.kernel == "gemm_naive"
    wrong = judge(request("profile", "gemm_wrong"), FakeBackend())
    assert wrong.verdict == "failed" and wrong.profile is None and not wrong.check["rows"][0]["passed"]
    assert judge(request("trace", "gemm_hang"), FakeBackend()).verdict == "timeout"
    traced = judge(request("trace", profile={"capacity": 100, "names": {"33": "mine"}}), FakeBackend())
    timeline = Timeline.from_dict(traced.profile)
    assert traced.verdict == "passed" and timeline.capacity == 100 and timeline.names == {33: "mine"}
    assert timeline.source == "synthetic"


def test_a_profile_in_a_real_judge_process() -> None:
    report = judge_in_process(request("profile"), timeout_s=120, memory_limit_mb=4096, command=fake_judge_command())
    assert report.verdict == "passed" and Readout.from_dict(report.profile["readout"]).device.startswith("fake GPU")


def test_the_launches_of_one_call() -> None:
    assert launched_kernels(request(), "gemm_naive") == ["gemm_naive"]
    assert launched_kernels(request(), "_Z5gemm_v") == ["_Z5gemm_v"]


# --------------------------------------------------------------------------- the ncu run, with ncu stood in for

STAND_IN = r'''
import json, pathlib, sys
args = sys.argv[1:]
log = pathlib.Path({log!r})
if args[:1] == ["--version"]:
    print("Version {version} (build 1) (public-release)"); sys.exit(0)
if "--import" in args:
    sys.path.insert(0, {root!r})
    from gemmlab.profiling import synthetic
    print(synthetic.raw_csv([("gemm_naive", synthetic.counters((256, 128, 64))),
                             ("void fill<float>(float *, int)", {{"gpu__time_duration.sum": 1.0}})]))
    sys.exit(0)
log.write_text(json.dumps(args))
folder = pathlib.Path(args[-1])
pathlib.Path(args[args.index("--export") + 1]).write_bytes(b"NCU" * {report_size})
result = {result}
if result is not None:
    (folder / "result.json").write_text(json.dumps(result))
print("==PROF== Disconnected")
'''


def run_profile(tmp_path: Path, monkeypatch, result: object, version: str = "2025.3.1.0", report_size: int = 10):
    from gemmlab.judge import ncu_run
    from gemmlab.running import gpu

    root = str(Path(__file__).resolve().parents[3])
    log = tmp_path / "ncu-args.json"
    tool = tmp_path / "bin" / "ncu"
    tool.parent.mkdir()
    tool.write_text(f"#!{sys.executable}\n" + STAND_IN.format(log=str(log), root=root, version=version,
                                                              report_size=report_size, result=repr(result)))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:/usr/bin:/bin")
    monkeypatch.setattr(gpu, "current_arch", lambda device=None: "sm_90a")
    compiled = SimpleNamespace(lowered_name="gemm_naive", to_record=lambda: {"name": "gemm_naive"})
    outcome = ncu_run.profile_in_child(request(), SimpleNamespace(compiled=compiled))
    return outcome, (json.loads(log.read_text()) if log.exists() else None), None


def checks(passed: bool = True) -> list[dict]:
    name = "gemm_naive" if passed else "gemm_wrong"
    return [judge(JudgeRequest(naive_spec(name), "check", shapes=[SHAPE]), FakeBackend()).check] * 2


def test_ncu_profiles_the_second_call_only_and_the_readout_comes_back(tmp_path, monkeypatch) -> None:
    result = {"device": "NVIDIA H100 80GB HBM3", "checks": checks(),
              "power": {"watts": 600.0, "limit_watts": 700.0, "sm_mhz": 1755.0, "reasons": ["power cap"], "seconds": 0.5}}
    (checked, data), args, _ = run_profile(tmp_path, monkeypatch, result)
    assert checked.passed
    assert args[args.index("--kernel-name") + 1] == "regex:^(gemm_naive)$"
    assert args[args.index("--launch-skip") + 1] == "1" and args[args.index("--launch-count") + 1] == "1"
    assert args[args.index("--clock-control") + 1] == "none" and args[args.index("--set") + 1] == "full"
    assert args[-4:-1] == ["-P", "-m", "gemmlab.judge.profile_target"] and Path(args[-1]).name.startswith("gemmlab-ncu-")
    readout = Readout.from_dict(data["readout"])
    assert readout.device == "NVIDIA H100 80GB HBM3" and readout.ncu_version == "2025.3.1"
    assert readout.kernel == "gemm_naive" and readout.other_launches == (("fill<float>", 1.0),)  # the longest: the GEMM
    assert readout.power.capped and readout.source == "measured"
    assert data["report_bytes"] == 30 and data["report"] == "TkNV" * 10


def test_a_wrong_kernel_gets_its_check_and_no_profile(tmp_path, monkeypatch) -> None:
    (checked, data), _, _ = run_profile(tmp_path, monkeypatch, {"device": "x", "checks": checks(False), "power": None})
    assert not checked.passed and data is None


def test_the_childs_fault_ends_the_profile_with_its_verdict(tmp_path, monkeypatch) -> None:
    with pytest.raises(ContextLostError, match="while profiling: illegal address"):
        run_profile(tmp_path, monkeypatch, {"error": "ContextLostError", "message": "illegal address"})


def test_a_child_without_a_result_and_a_big_report(tmp_path, monkeypatch) -> None:
    with pytest.raises(ProfilerError, match="ended without a result(.|\n)*Disconnected"):
        run_profile(tmp_path, monkeypatch, None)
    from gemmlab.judge.ncu_run import MAX_REPORT_FILE_BYTES

    big = tmp_path / "big"
    big.mkdir()
    result = {"device": "x", "checks": checks(), "power": None}
    (_, data), _, _ = run_profile(big, monkeypatch, result, report_size=MAX_REPORT_FILE_BYTES // 3 + 1)
    assert "report" not in data and data["report_bytes"] > MAX_REPORT_FILE_BYTES   # said, not sent


def test_a_refused_version_runs_nothing(tmp_path, monkeypatch) -> None:
    with pytest.raises(ProfilerError, match="2022.2.1 is refused on this GPU"):
        run_profile(tmp_path, monkeypatch, {"device": "x", "checks": checks(), "power": None}, version="2022.2.1.0")
    assert not (tmp_path / "ncu-args.json").exists()


def test_the_trace_buffers_size_is_bounded() -> None:
    from gemmlab.judge.tracing import traced_ctas

    assert traced_ctas(132, 12, 512, None) == 132
    assert traced_ctas(132, 12, 512, 5) == 5
    assert traced_ctas(100_000, 32, 4096, None) == MAX_BUFFER_RECORDS // (32 * 4096)
    assert traced_ctas(10, 4, 16, 1000) == 10
