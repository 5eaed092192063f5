"""Recording a GEMM function's launch without a GPU, and what cannot be recorded."""
from __future__ import annotations

import json
import math

import pytest
import torch

import gemmlab
from gemmlab.notebook import nbhelpers as nbh
from gemmlab.judge import JudgeLimits, JudgeRequest
from gemmlab.judge.backend import judge
from tests.support.fake_judge import FakeBackend
from gemmlab.running.kernel import Kernel
from gemmlab.remote import UnsendableCallError
from gemmlab.remote.recording import record, student_options
from gemmlab.remote.requests import by_kernel, check_requests

from .launchers import NN_SOURCE, nn_launcher, tn_kernel, tn_launcher

F16 = torch.float16


def test_a_tn_launch_is_recorded_with_its_geometry_roles_and_own_options() -> None:
    kernel = tn_kernel(options=("-DUNROLL=4",))
    r = record(tn_launcher(kernel), (129, 257, 64), "tn", F16, F16)
    assert (r.launch.shape, r.launch.grid, r.launch.block) == ((129, 257, 64), (17, 9, 1), (16, 16, 1))
    assert r.launch.smem == 0
    assert r.launch.args == ("A", "B", "out", 129, 257, 64)
    assert (r.kernel.name, r.kernel.arch, r.kernel.options) == ("gemm_tiny", "sm_90a", ("-DUNROLL=4",))
    assert r.kernel.source == kernel.source


def test_an_nn_launch_records_pitches_and_the_scalars_it_was_called_with() -> None:
    r = record(nn_launcher(), (100, 70, 30), "nn", F16, F16, alpha=0.75, beta=-1.0)
    assert r.launch.args == ("A", "B", "out", 100, 70, 30, 30, 70, 70, 0.75, -1.0)
    assert r.launch.grid == (3, 13, 1) and r.launch.block == (32, 8, 1)


def test_a_misaligned_check_records_on_operands_past_alignment_and_sends_its_offset() -> None:
    """check_misaligned on the pool: the function sees operands 3 elements (6 bytes) past alignment, as it would on a
    local GPU (a launcher that refuses them refuses here too), and the request tells the judge to place its own so."""
    from gemmlab.remote.recording import gemm_probes

    assert [p.data_ptr() % 16 for p in gemm_probes((100, 70, 30), "nn", F16, F16, 0, 3)] == [6, 6, 6]
    with pytest.raises(gemmlab.LaunchError, match="16-byte aligned"):
        record(nn_launcher(), (100, 70, 30), "nn", F16, F16, alpha=1.0, beta=-1.0, offset=3)
    kernel = gemmlab.compile(NN_SOURCE, "ladder_tiny", arch="sm_90a", options=("-DTILE=32",))

    def any_alignment(A, B, C, alpha, beta):
        M, N, K = nbh.gemm_operands(A, B, C)
        kernel(A, B, C, M, N, K, A.stride(0), B.stride(0), C.stride(0), float(alpha), float(beta),
               grid=(math.ceil(N / 32), math.ceil(M / 8)), block=(32, 8))

    r = record(any_alignment, (100, 70, 30), "nn", F16, F16, alpha=1.0, beta=-1.0, offset=3)
    (request,) = check_requests([r], "nn", "float16", "float16", 1.0, -1.0, (128, 128), JudgeLimits(), offset=3)
    assert JudgeRequest.from_json(request.to_json()).offset == 3 and request.pad is None


def test_a_padded_check_records_the_pitches_of_padded_rows_and_sends_the_padding() -> None:
    """check_padded on the pool: the launch is recorded on stand-ins whose rows are ``pad`` longer (so the kernel is
    handed lda = K + pad, ...), and the request tells the judge to pad its operands the same way."""
    r = record(nn_launcher(), (100, 70, 30), "nn", F16, F16, alpha=0.5, beta=0.25, pad=3)
    assert r.launch.args == ("A", "B", "out", 100, 70, 30, 33, 73, 73, 0.5, 0.25)
    (request,) = check_requests([r], "nn", "float16", "float16", 0.5, 0.25, (128, 128), JudgeLimits(), pad=3)
    assert JudgeRequest.from_json(request.to_json()).pad == 3
    (unpadded,) = check_requests([record(nn_launcher(), (100, 70, 30), "nn", F16, F16)], "nn", "float16",
                                 "float16", 1.0, 0.0, (128, 128), JudgeLimits())
    assert unpadded.pad is None


def test_recording_launches_nothing_and_restores_the_kernel_call() -> None:
    call = Kernel.__dict__["__call__"]
    record(tn_launcher(tn_kernel()), (16, 16, 16), "tn", F16, F16)
    assert Kernel.__dict__["__call__"] is call
    with pytest.raises(gemmlab.NoGPUError):  # still the real launch outside a recording (no GPU here)
        tn_launcher(tn_kernel())(*(torch.empty(16, 16, dtype=F16),) * 3)


def test_the_recorded_request_is_judged_by_position() -> None:
    recordings = [record(tn_launcher(tn_kernel("gemm_tiny_wrong")), s, "tn", F16, F16) for s in [(128, 384, 64)]]
    (request,) = check_requests(recordings, "tn", "float16", "float16", 1.0, 0.0, (128, 128), JudgeLimits())
    report = judge(JudgeRequest.from_json(request.to_json()), FakeBackend())
    assert report.verdict == "failed" and report.check["rows"][0]["shape"] == [128, 384, 64]


def test_shapes_that_pick_another_compile_go_to_requests_of_their_own() -> None:
    kernels = {8: tn_kernel(options=("-DVEC=8",)), 1: tn_kernel(options=("-DVEC=1",))}

    def gemm(A, B, D):  # notebook 05's pattern: the vector width, and so the compile, follows the shape
        kernel = kernels[8 if A.shape[1] % 8 == 0 else 1]
        tn_launcher(kernel)(A, B, D)

    shapes = [(16, 16, 16), (3, 5, 7), (64, 64, 64), (1, 1, 1)]
    recordings = [record(gemm, s, "tn", F16, F16) for s in shapes]
    groups = by_kernel(recordings)
    assert [[r.launch.shape for r in g] for g in groups] == [[(16, 16, 16), (64, 64, 64)], [(3, 5, 7), (1, 1, 1)]]
    requests = check_requests(recordings, "tn", "float16", "float16", 1.0, 0.0, (128, 128), JudgeLimits())
    assert [r.spec.options for r in requests] == [("-DVEC=8",), ("-DVEC=1",)]


def _refused(fn, message: str, convention: str = "tn") -> None:
    with pytest.raises(UnsendableCallError, match=message):
        record(fn, (64, 64, 32), convention, F16, F16, 1.0, 0.5)


def test_a_function_that_launches_nothing_is_refused() -> None:
    _refused(lambda A, B, D: None, "launched no kernel compiled with gemmlab")


def test_a_function_that_computes_with_torch_is_refused() -> None:
    _refused(lambda A, B, D: D.copy_(A @ B.T), r"computes with torch \(aten::mm\)")


def test_a_tensor_that_is_not_an_operand_is_refused() -> None:
    kernel = tn_kernel()

    def copies_b(A, B, D):
        M, K = A.shape
        kernel(A, B.contiguous().clone(), D, M, B.shape[0], K, grid=1, block=1)
    _refused(copies_b, "argument 1 of the kernel is a tensor that is not A, B or the output")


def test_a_pointer_passed_as_a_number_is_refused() -> None:
    kernel = tn_kernel()
    _refused(lambda A, B, D: kernel(A.data_ptr(), B, D, 64, 64, 32, grid=1, block=1),
             "pointer parameter 'A' got the number")


def test_two_launches_per_call_are_refused() -> None:
    fn = tn_launcher(tn_kernel())
    _refused(lambda A, B, D: (fn(A, B, D), fn(A, B, D)), "launched kernels 2 times")


def test_a_function_that_needs_values_or_cuda_says_why_it_cannot_be_recorded() -> None:
    _refused(lambda A, B, D: float(A[0, 0]), "stand-in tensors that hold no data")


def test_an_error_of_the_function_itself_passes_through_as_locally() -> None:
    def refuses(A, B, D):
        raise gemmlab.LaunchError("handles only whole tiles")
    with pytest.raises(gemmlab.LaunchError, match="whole tiles"):
        record(refuses, (3, 5, 7), "tn", F16, F16)
    kernel = tn_kernel()
    with pytest.raises(gemmlab.LaunchError, match="grid=.* is empty"):
        record(lambda A, B, D: kernel(A, B, D, 3, 5, 7, grid=(5 // 16, 1), block=16), (3, 5, 7), "tn", F16, F16)


def test_student_options_drop_gemmlabs_own() -> None:
    kernel = tn_kernel(options=("-DUNROLL=2", "--use_fast_math"))
    assert student_options(kernel.options, kernel.arch) == ("-DUNROLL=2", "--use_fast_math")
    with pytest.raises(UnsendableCallError, match="-std=c\\+\\+17"):
        student_options(("--gpu-architecture=sm_90a", "-std=c++20"), "sm_90a")


def test_an_option_the_judge_does_not_pass_is_refused_before_sending() -> None:
    recording = record(tn_launcher(tn_kernel(options=("-G",))), (16, 16, 16), "tn", F16, F16)
    with pytest.raises(UnsendableCallError, match="compile option '-G'"):
        check_requests([recording], "tn", "float16", "float16", 1.0, 0.0, (128, 128), JudgeLimits())


def test_more_shapes_than_one_request_holds_are_split() -> None:
    fn = tn_launcher(tn_kernel())
    recordings = [record(fn, (16, 16, k), "tn", F16, F16) for k in range(1, 41)]
    requests = check_requests(recordings, "tn", "float16", "float16", 1.0, 0.0, (128, 128), JudgeLimits())
    assert [len(r.shapes) for r in requests] == [32, 8]
    assert all(len(r.spec.launches) == len(r.shapes) for r in requests)


# ------------------------------------------------------------------ CuTe DSL kernels

@pytest.mark.slow
def test_a_dsl_kernel_is_recorded_as_a_plan_and_judged_by_the_fake_judge() -> None:
    from gemmlab.judge.spec import DslSpec
    from gemmlab.remote.recording import DslRecording
    from gemmlab.remote.requests import bench_request
    from tests.dsl_kernels import simple_gemm

    fn = gemmlab.dsl.gemm_fn(simple_gemm.gemm)            # compiles for the pool's GPU, no GPU here
    recordings = [record(fn, s, "tn", F16, F16) for s in [(64, 64, 32), (100, 70, 33)]]
    assert all(isinstance(r, DslRecording) for r in recordings)
    assert recordings[1].plan["steps"][0]["grid"] == [5, 7, 1]
    (request,) = check_requests(recordings, "tn", "float16", "float16", 1.0, 0.0, (128, 128), JudgeLimits())
    parsed = JudgeRequest.from_json(request.to_json())
    assert isinstance(parsed.spec, DslSpec) and parsed.spec.geometry(100, 70, 33)[0] == (5, 7, 1)
    assert len(request.to_json()) < 2 * len(json.dumps(recordings[0].plan)), "the module image is sent once"
    report = judge(parsed, FakeBackend())
    assert report.verdict == "passed" and [r["shape"] for r in report.check["rows"]] == [[64, 64, 32], [100, 70, 33]]
    timed = judge(JudgeRequest.from_json(bench_request(recordings[0], "tn", "float16", "float16", 1.0, 0.0,
                                                       JudgeLimits()).to_json()), FakeBackend())
    assert timed.verdict == "passed"


@pytest.mark.slow
def test_a_forged_dsl_plan_is_refused_before_anything_runs() -> None:
    from tests.dsl_kernels import simple_gemm

    r = record(gemmlab.dsl.gemm_fn(simple_gemm.gemm), (64, 64, 32), "tn", F16, F16)
    (request,) = check_requests([r], "tn", "float16", "float16", 1.0, 0.0, (128, 128), JudgeLimits())
    data = json.loads(request.to_json())
    data["spec"]["plans"][0]["plan"]["steps"][0]["block"] = [4096, 1, 1]
    with pytest.raises(gemmlab.judge.JudgeError, match="a block"):
        JudgeRequest.from_dict(data)
    data = json.loads(request.to_json())
    data["shapes"] = [[128, 128, 32]]
    with pytest.raises(gemmlab.judge.JudgeError, match="no launch was recorded for M×N×K = 128×128×32"):
        JudgeRequest.from_dict(data)
