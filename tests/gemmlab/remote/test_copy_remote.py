"""gemmlab.check_copy through a pool service (a local fake with the tests' fake judge), the copy action of the
judge's protocol, and what a copy function's recording refuses. The fake judge reads a kernel's behaviour from its
name (``*_wrong``: wrong in the last column of tiles); the kernels are real and compile without a GPU."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import pytest
import torch

import gemmlab
from gemmlab.results import CopyResult
from gemmlab.judge import JudgeError, JudgeRequest
from gemmlab.judge.backend import judge
from tests.support.fake_judge import FakeBackend
from gemmlab.remote import UnsendableCallError
from gemmlab.remote.recording import record_copy

from .copy_kernels import copy_kernel, copy_launcher, expected_who
from .fake_pool import GPU, FakePool

pytestmark = pytest.mark.usefixtures("fresh_connection")


@pytest.fixture
def pool() -> Iterator[FakePool]:
    with FakePool() as fake:
        gemmlab.connect(fake.url, "good")
        yield fake


def test_a_copy_check_runs_on_the_pool_with_its_roles_and_names_the_gpu(pool: FakePool) -> None:
    result = gemmlab.check_copy(copy_launcher(copy_kernel()), [(96, 256), (32, 64)], torch.float32)
    assert isinstance(result, CopyResult) and result.passed and result.device == f"{GPU} (shared GPU pool)"
    assert f"PASSED on {GPU}" in str(result)
    (request,) = pool.requests
    assert request.action == "copy" and request.dtype == "float32" and list(request.shapes) == [(96, 256, 1), (32, 64, 1)]
    assert request.copy == {"transpose": False, "who": False}
    assert request.spec.launches[0].args == ("A", "out", 96, 256) and request.spec.launches[0].grid == (8, 3, 1)


def test_a_who_map_comes_back_as_the_thread_index_of_every_element(pool: FakePool) -> None:
    result = gemmlab.check_copy(copy_launcher(copy_kernel("copy_who", defines=("WHO",))), [(64, 128)], who=True)
    assert result.passed and np.array_equal(result.who((64, 128)), expected_who(64, 128))
    (request,) = pool.requests
    assert request.copy["who"] and request.spec.launches[0].args == ("A", "out", "B", 64, 128)
    with pytest.raises(gemmlab.GemmlabError, match="no row of this check has shape"):
        result.who((32, 32))


def test_a_wrong_copy_fails_naming_its_tiles_and_a_transpose_says_so(pool: FakePool) -> None:
    result = gemmlab.check_copy(copy_launcher(copy_kernel("copy_tiny_wrong", defines=("TRANSPOSE",))), [(64, 96)],
                                torch.bfloat16, transpose=True)
    assert not result.passed and result.rows[0].bad_tiles == ((0, 2), (1, 2))
    assert "differ from src" in result.rows[0].message and "FAILED" in str(result)
    with pytest.raises(gemmlab.GemmlabError, match="pass who=True"):
        result.who((64, 96))
    assert pool.requests[0].copy == {"transpose": True, "who": False}
    with pytest.raises(AssertionError, match="FAILED"):
        result.raise_if_failed()


def test_a_shape_the_function_refuses_is_a_failed_row_as_on_a_local_gpu(pool: FakePool) -> None:
    inner = copy_launcher(copy_kernel())

    def whole_tiles_only(src, dst):
        if src.shape[0] % 32:
            raise gemmlab.LaunchError("M must be a multiple of 32")
        inner(src, dst)

    result = gemmlab.check_copy(whole_tiles_only, [(64, 64), (33, 64)])
    assert [r.passed for r in result.rows] == [True, False]
    with pytest.raises(gemmlab.GemmlabError, match="pass who=True"):
        result.who((33, 64))

    def refuses(src, dst, who):
        raise gemmlab.LaunchError("M must be a multiple of 32")

    mapped = gemmlab.check_copy(refuses, [(33, 64)], torch.float32, who=True)
    with pytest.raises(gemmlab.GemmlabError, match="failed before its who map was read: LaunchError: M must"):
        mapped.who((33, 64))
    assert result.rows[1].message.startswith("LaunchError: M must be a multiple of 32")


def test_copying_with_torch_or_passing_another_tensor_cannot_be_sent(pool: FakePool) -> None:
    kernel = copy_kernel()

    def torch_copies(src, dst):
        copy_launcher(kernel)(src, torch.empty_like(dst))
        dst.copy_(src)

    with pytest.raises(UnsendableCallError, match="copy_"):
        gemmlab.check_copy(torch_copies, [(64, 64)])

    def scratch_buffer(src, dst):
        copy_launcher(kernel)(src[:, :], dst)

    with pytest.raises(UnsendableCallError, match="src, dst or the who map"):
        gemmlab.check_copy(scratch_buffer, [(64, 64)])
    assert not pool.requests


def test_bad_arguments_are_refused_before_anything_is_sent(pool: FakePool) -> None:
    fn = copy_launcher(copy_kernel())
    for shapes, match in (([(0, 4)],), "outside"), (([(3, 4, 5)],), "copy shape is"), ((["x"],), "copy shape is"):
        with pytest.raises(gemmlab.GemmlabError, match=match):
            gemmlab.check_copy(fn, *shapes)
    with pytest.raises(gemmlab.GemmlabError, match="dtype must be"):
        gemmlab.check_copy(fn, [(4, 4)], torch.int32)
    with pytest.raises(gemmlab.GemmlabError, match="1,048,576 elements or fewer in all"):
        gemmlab.check_copy(fn, [(1024, 1024), (32, 32)], who=True)     # each under the limit, not together
    with pytest.raises(gemmlab.GemmlabError, match="dtype must be"):
        gemmlab.check_copy(fn, [(4, 4)], "float16")
    assert not pool.requests


def test_without_a_gpu_or_a_pool_the_check_says_what_to_do() -> None:
    with pytest.raises(gemmlab.NoGPUError, match="check_copy needs a CUDA GPU"):
        gemmlab.check_copy(copy_launcher(copy_kernel()), [(32, 32)])


def test_the_copy_action_of_the_protocol_round_trips_and_refuses_what_it_cannot_run() -> None:
    recording = record_copy(copy_launcher(copy_kernel()), (64, 32), torch.float32)
    from gemmlab.remote.requests import copy_requests
    from gemmlab.judge import JudgeLimits

    (request,) = copy_requests([recording], "float32", True, False, JudgeLimits())
    again = JudgeRequest.from_json(request.to_json())
    assert again.copy == {"transpose": True, "who": False} and again.shapes == ((64, 32, 1),)
    report = judge(again, FakeBackend())
    assert report.verdict == "passed" and report.action == "copy"
    assert CopyResult.from_dict(report.check).rows[0].shape == (64, 32)
    data = request.to_dict()
    for change, match in (({"dtype": "int8"}, "copy's dtype"), ({"shapes": [[64, 32, 2]]}, r"\[M, N, 1\]"),
                          ({"copy": {"transpose": 1}}, "true/false"), ({"copy": {"who": True, "x": False}}, "true/false"),
                          ({"tile": [32, 32]}, "takes no"), ({"shapes": "default"}, "not a suite"),
                          ({"action": "check"}, "copy action only")):
        with pytest.raises(JudgeError, match=match):
            JudgeRequest.from_dict({**data, **change})
    unrecorded = {**data, "spec": {k: v for k, v in data["spec"].items() if k != "launches"}}
    with pytest.raises(JudgeError, match="recorded launches"):
        JudgeRequest.from_dict(unrecorded)
    big = {**data, "copy": {"who": True}, "shapes": [[2048, 1024, 1]]}
    with pytest.raises(JudgeError, match="with a who map"):
        JudgeRequest.from_dict(big)
    with pytest.raises(JudgeError, match="role B"):     # the request asks for a who map its launch never passes
        JudgeRequest.from_dict({**data, "copy": {"who": True}})
    (mapped,) = copy_requests([record_copy(copy_launcher(copy_kernel("copy_who", defines=("WHO",))), (64, 32),
                                           torch.float32, who=True)], "float32", False, True, JudgeLimits())
    with pytest.raises(JudgeError, match="role B"):     # a launch that passes a tensor the request does not make
        JudgeRequest.from_dict({**mapped.to_dict(), "copy": {"who": False}})


def test_a_copy_result_from_the_wire_is_checked() -> None:
    row = {"shape": [2, 2], "passed": True, "n_bad": 0, "n_unwritten": 0, "guard_ok": True, "input_ok": True,
           "message": "ok", "bad_tiles": [], "who": None}
    assert CopyResult.from_dict({"rows": [row], "seed": 3}).passed
    for bad in ({"rows": [{"shape": [2, 2]}]}, {"rows": "x"}, [], {"rows": [{**row, "passed": "false"}]},
                {"rows": [{**row, "n_bad": -1}]}, {"rows": [row], "seed": "3"},
                {"rows": [{"shape": [2, 2], "passed": True, "n_bad": 0, "n_unwritten": 0, "guard_ok": True,
                           "input_ok": True, "message": "ok", "bad_tiles": [], "who": [[1, 2, 3]]}]}):
        with pytest.raises(gemmlab.GemmlabError, match="not a copy check"):
            CopyResult.from_dict(bad)



def test_a_copy_is_timed_on_the_pool_as_a_timing_and_a_wrong_one_is_not() -> None:
    with FakePool() as pool:
        gemmlab.connect(pool.url, "good")
        timing = gemmlab.bench_copy(copy_launcher(copy_kernel()), (256, 512), torch.float32)
        assert timing.device == f"{GPU} (shared GPU pool)" and timing.low_gbps <= timing.gbps <= timing.high_gbps
        assert "GB/s" in str(timing) and timing.shape == (256, 512)
        (request,) = pool.requests
        assert request.action == "copy_bench" and request.shape == (256, 512, 1) and request.copy["who"] is False
        with pytest.raises(gemmlab.checking.integrity.BenchIntegrityError, match="not timed"):
            gemmlab.bench_copy(copy_launcher(copy_kernel("copy_tiny_wrong")), (64, 64), torch.float32)
        with pytest.raises(gemmlab.GemmlabError, match="batches"):
            gemmlab.bench_copy(copy_launcher(copy_kernel()), (64, 64), batches=2)
        with pytest.raises(gemmlab.GemmlabError, match="times 20 batches"):
            gemmlab.bench_copy(copy_launcher(copy_kernel()), (64, 64), batches=30)


def test_a_copy_timing_request_is_a_timing_and_takes_no_who_map() -> None:
    from gemmlab.judge import JudgeLimits
    from gemmlab.judge.protocol import TIMING_ACTIONS
    from gemmlab.remote.requests import copy_bench_request
    from pool.scheduler import Job

    request = copy_bench_request(record_copy(copy_launcher(copy_kernel()), (64, 32), torch.float32), "float32", False,
                                 JudgeLimits())
    assert request.action in TIMING_ACTIONS and request.run_shapes() == [(64, 32, 1)]
    assert Job("alice", request).is_timing      # the pool's scheduler gives it its GPU alone
    with pytest.raises(JudgeError, match="no who map"):
        JudgeRequest.from_dict({**request.to_dict(), "copy": {"who": True}})
    from gemmlab.results import CopyTiming

    with pytest.raises(gemmlab.GemmlabError, match="not a copy timing"):
        CopyTiming.from_dict({"shape": [2, 2], "ms": -1})


def test_a_none_for_a_pointer_is_recorded_as_a_null_pointer() -> None:
    """02's kernel takes a who map it writes only when there is one: its launcher passes None when timed."""
    kernel = copy_kernel("copy_who", defines=("WHO",))
    launch = copy_launcher(kernel)
    recording = record_copy(lambda src, dst: launch(src, dst, None), (64, 32), torch.float32)
    assert recording.launch.args == ("A", "out", "null", 64, 32)
