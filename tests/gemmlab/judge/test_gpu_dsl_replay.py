"""CuTe DSL kernels recorded in a "student" namespace and replayed by the judge's proxy, on a GPU.

The two sides of grading in one process: ``serving.serve`` answers record requests from a
namespace (the student's kernel), :class:`~gemmlab.answers.stand_ins.Answer` records and replays
(the judge). ``check_gemm`` then sees only the replay: the student's Python never touched the
judge's tensors.
"""
from __future__ import annotations

import json

import pytest
import torch

import gemmlab
import solution_cells
from gemmlab.answers import serving, stand_ins
from tests.dsl_kernels import simple_gemm

pytestmark = pytest.mark.gpu


@pytest.fixture
def student(monkeypatch):
    """A namespace standing for the student's kernel, and the judge's proxy for any name in it."""
    namespace: dict = {}
    monkeypatch.setattr(stand_ins, "channel", lambda request: serving.serve(namespace, json.dumps(request)))
    stand_ins.REPLAYS.clear()
    stand_ins.record_launches(True)          # as the grader sets it for a test marked judged
    yield namespace
    stand_ins.record_launches(False)


def test_a_bare_jit_function_is_recorded_and_replayed(student):
    student["gemm"] = simple_gemm.gemm
    result = gemmlab.check_gemm(stand_ins.Answer("gemm"), shapes=[(64, 64, 32), (100, 70, 33), (1, 1, 1)])
    assert result.passed, result


def test_notebook_05s_dsl_solution_is_correct_through_the_judge(student):
    ns = solution_cells.load_namespace("05_global_gemm", ["kernel:gemm05_vec", "kernel:gemm05_launch",
                                                          "kernel:gemm05_dsl"])
    student.update(ns)
    for dtype in (torch.float16, torch.bfloat16):
        result = gemmlab.check_gemm(stand_ins.Answer("gemm05_dsl"), convention="nn", dtype=dtype)
        assert result.passed, result


@pytest.fixture(scope="module", params=[{}, {"CAP_FEWEST_CLUSTERS": 0, "CAP_STREAM_K": 1}],
                ids=["as_shipped", "all_clusters_stream_k"])
def capstone(request):
    """The capstone as the notebook ships it (the fewest clusters, stream-K off), and as it was before
    (every cluster that fits, stream-K on: the variant capstone_all_clusters of benchmarks/solutions.py),
    whose stream-K branch the notebook keeps and teaches."""
    ns = solution_cells.load_namespace("09_capstone", ["kernel:capstone"])
    ns.update(request.param)
    return ns


@pytest.mark.slow
def test_the_capstone_solution_is_correct_through_the_judge(student, capstone):
    """TMA descriptors, 2x1 clusters, the stream-K workspace and flags where it is on (8192 x 8192 x 512),
    and the padded path (copies before and after the launch)."""
    student.update(capstone)
    assert bool(capstone["cap_uses_stream_k"](8192, 8192)) == bool(capstone["CAP_STREAM_K"])
    shapes = [(8192, 8192, 512), (8192, 8192, 512), (1000, 1001, 999), (4096, 4096, 4096), (256, 512, 128)]
    for dtype in (torch.float16, torch.bfloat16):
        result = gemmlab.check_gemm(stand_ins.Answer("capstone_gemm"), dtype=dtype, shapes=shapes, timeout_s=300)
        assert result.passed, result


@pytest.mark.parametrize("body, said", [
    (lambda k, A, B, D: D.copy_(A @ B.t()), "computes with torch"),
    (lambda k, A, B, D: k(A.clone(), B, D.clone()), None),   # launches on copies: the judge's D stays poisoned
])
def test_work_outside_the_kernel_never_reaches_the_judges_tensors(student, body, said):
    kernel = gemmlab.dsl.gemm_fn(simple_gemm.gemm)
    student["gemm"] = lambda A, B, D: body(kernel, A, B, D)
    result = gemmlab.check_gemm(stand_ins.Answer("gemm"), shapes=[(64, 64, 32)])
    assert not result.passed
    assert said is None or said in str(result.to_dict()), result


@pytest.mark.slow
@pytest.mark.timing
def test_replayed_capstone_times_like_the_capstone(student, capstone):
    """Not a speed target (benchmarks/solutions.py is): the replay adds no work to what is timed."""
    student.update(capstone)
    shape = (4096, 4096, 4096)
    local = gemmlab.bench_gemm(capstone["capstone_gemm"], shape=shape)
    judged = gemmlab.bench_gemm(stand_ins.Answer("capstone_gemm"), shape=shape)
    print(f"capstone 4096^3: in process {local.ratio:.3f}x cuBLAS, replayed {judged.ratio:.3f}x cuBLAS")
    assert judged.ratio > 0.9 * local.ratio


def test_a_compiled_kernel_crosses_as_a_handle_and_is_replayed(student):
    """``gemmlab.dsl.compile`` of the student's function, asked for by the judge: the student's kernel compiles
    it for probes and keeps it; the judge's handle launches through a recording, and a new shape reuses it."""
    student["gemm"] = simple_gemm.gemm
    judge: dict = {}
    stand_ins.bind(judge, serving.describe(student, ["gemm"]))
    examples = [torch.empty(64, 32, dtype=torch.float16, device="cuda"),
                torch.empty(48, 32, dtype=torch.float16, device="cuda"), torch.empty(64, 48, device="cuda")]
    kernel = gemmlab.dsl.compile(judge["gemm"], *examples)
    # the judge reads the kernel's machine code from its image, never PTX text from the student's process
    assert isinstance(kernel, stand_ins.CompiledAnswer) and kernel.image()[0] and "EXIT" in kernel.sass()
    result = gemmlab.check_gemm(kernel, shapes=[(64, 48, 32), (100, 70, 33)], out_dtype=torch.float32)
    assert result.passed, result
