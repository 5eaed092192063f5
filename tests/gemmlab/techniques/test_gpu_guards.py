"""On the GPU, in a judge linked to a student's namespace as the grader links them: a compiled DSL kernel whose
techniques were checked is launched (recorded, guarded, replayed) and computes the right product; a launch that
would run another kernel under the same handle is refused before anything runs."""
from __future__ import annotations

import json

import pytest
import torch

from gemmlab import dsl
from gemmlab import techniques as T
from gemmlab.answers import serving, stand_ins
from tests.dsl_kernels import simple_gemm, tensorop_gemm

pytestmark = pytest.mark.gpu


@pytest.fixture
def linked(monkeypatch):
    student: dict = {}
    judge: dict = {}
    monkeypatch.setattr(stand_ins, "channel", lambda request: serving.serve(student, json.dumps(request)))
    stand_ins.record_launches(True)
    yield student, judge
    stand_ins.record_launches(False)


def operands(M=128, N=128, K=64):
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(N, K, device="cuda", dtype=torch.float16)
    return A, B, torch.full((M, N), float("nan"), device="cuda", dtype=torch.float16)


def test_a_checked_kernel_runs_and_another_under_its_handle_is_refused(linked) -> None:
    student, judge = linked
    A, B, D = operands()
    student["k"] = dsl.compile(simple_gemm.gemm, A.cpu(), B.cpu(), D.cpu(), arch=None)
    stand_ins.bind(judge, serving.describe(student, ["k"]), ["k"])
    T.require(judge["k"], [T.mma("any", count=0, at_least=None)])
    judge["k"](A, B, D)
    torch.cuda.synchronize()
    assert torch.allclose(D.float(), A.float() @ B.float().T, rtol=1e-2, atol=1e-1)
    student["k"].fn = tensorop_gemm.gemm                 # the student's process swaps what the handle compiles
    student["k"].current_key = lambda: "swapped"
    with pytest.raises(T.TechniqueError, match="not the kernel whose techniques were checked"):
        judge["k"](*operands(256, 256, 128))
