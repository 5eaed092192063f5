"""check_copy on a real GPU: right, wrong, transposed and torch-made copies, the who map, and the same recorded
launches judged by the real judge (a fresh judge process) with the same verdicts."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import gemmlab
from gemmlab.results import CopyResult
from gemmlab.judge import JudgeLimits, JudgeRequest
from gemmlab.judge.client import judge
from gemmlab.remote.recording import record_copy
from gemmlab.remote.requests import copy_requests

from .copy_kernels import copy_kernel, copy_launcher, expected_who

pytestmark = pytest.mark.gpu


def _fn(name: str, *defines: str):
    return copy_launcher(copy_kernel(name, gemmlab.current_arch(), defines))


def test_check_copy_passes_right_copies_and_says_what_is_wrong_with_the_others() -> None:
    assert gemmlab.check_copy(_fn("cc_right"), [(96, 256), (33, 65), (1, 1)], torch.float32).passed
    transpose = _fn("cc_transpose", "TRANSPOSE")
    assert gemmlab.check_copy(transpose, [(64, 96), (7, 45)], torch.float32, transpose=True).passed
    assert not gemmlab.check_copy(transpose, [(64, 96)], torch.float32).passed      # a transpose is not a copy
    row = gemmlab.check_copy(_fn("cc_skip", "SKIP_LAST"), [(64, 96)], torch.float32).rows[0]
    assert not row.passed and row.n_unwritten == 64 * 32 and row.bad_tiles == ((0, 2), (1, 2))
    result = gemmlab.check_copy(_fn("cc_who", "WHO"), [(64, 128)], torch.float32, who=True)
    assert result.passed and np.array_equal(result.who((64, 128)), expected_who(64, 128))

    def torch_copy(src, dst):
        dst.copy_(src)

    row = gemmlab.check_copy(torch_copy, [(32, 32)], torch.float32).rows[0]
    assert not row.passed and "aten::copy_" in row.message


def _judged(fn, shapes, dtype: str, transpose: bool = False, who: bool = False) -> CopyResult:
    recorded = [record_copy(fn, s, getattr(torch, dtype), transpose, who) for s in shapes]
    (request,) = copy_requests(recorded, dtype, transpose, who, JudgeLimits())
    report = judge(JudgeRequest.from_json(request.to_json()), timeout_s=300)
    assert report.verdict in ("passed", "failed"), report.error
    return CopyResult.from_dict(report.check)


def test_the_judge_gives_recorded_copies_the_local_verdicts() -> None:
    assert _judged(_fn("cj_right"), [(96, 256), (33, 65)], "float32").passed
    assert _judged(_fn("cj_transpose", "TRANSPOSE"), [(64, 96)], "float32", transpose=True).passed
    skipped = _judged(_fn("cj_skip", "SKIP_LAST"), [(64, 96)], "float32").rows[0]
    assert not skipped.passed and skipped.bad_tiles == ((0, 2), (1, 2))
    mapped = _judged(_fn("cj_who", "WHO"), [(64, 128)], "float32", who=True)
    assert mapped.passed and np.array_equal(mapped.who((64, 128)), expected_who(64, 128))


def test_bench_copy_times_a_right_copy_here_and_in_the_judge_and_refuses_a_wrong_one() -> None:
    from gemmlab.checking.integrity import BenchIntegrityError
    from gemmlab.remote.requests import copy_bench_request
    from gemmlab.results import CopyTiming

    fn = _fn("cb_right")
    here = gemmlab.bench_copy(fn, (4096, 4096), torch.float32)
    assert here.gbps > 100 and here.low_gbps <= here.gbps <= here.high_gbps and here.batches == 20
    with pytest.raises(BenchIntegrityError, match="not timed"):
        gemmlab.bench_copy(_fn("cb_skip", "SKIP_LAST"), (256, 256), torch.float32)
    request = copy_bench_request(record_copy(fn, (4096, 4096), torch.float32), "float32", False, JudgeLimits())
    report = judge(JudgeRequest.from_json(request.to_json()), timeout_s=300)
    assert report.verdict == "passed", report.error
    judged = CopyTiming.from_dict(report.bench)
    assert judged.gbps > 100 and judged.shape == (4096, 4096)


def test_the_judge_passes_a_recorded_null_pointer() -> None:
    """02's copy kernel takes a who map it writes only when given one; its launcher passes None when no map is asked
    for, recorded as a null pointer that the judge passes on (checked and timed)."""
    from gemmlab.results import CopyTiming
    from gemmlab.remote.requests import copy_bench_request

    launch = _fn("cj_who_if_given", "WHO", "WHO_IF_GIVEN")

    def fn(src, dst, who=None):
        launch(src, dst, who)

    assert _judged(fn, [(64, 96)], "float32").passed
    mapped = _judged(fn, [(64, 128)], "float32", who=True)
    assert mapped.passed and np.array_equal(mapped.who((64, 128)), expected_who(64, 128))
    request = copy_bench_request(record_copy(fn, (2048, 2048), torch.float32), "float32", False, JudgeLimits())
    report = judge(JudgeRequest.from_json(request.to_json()), timeout_s=300)
    assert report.verdict == "passed", report.error
    assert CopyTiming.from_dict(report.bench).gbps > 100
