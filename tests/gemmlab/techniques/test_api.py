"""What a test cell writes: ``techniques.require(target, checks)`` on every kind of target (a C++ Kernel, a
launcher with ``build()``, a compiled DSL kernel, a Python function that launches one, recorded on example
tensors without a GPU), the report and the error; and, in the grader's judge, a compiled kernel of the
student's read from the image the judge holds, with every later launch held to the same checks."""
from __future__ import annotations

import json

import pytest
import torch

import gemmlab
from gemmlab import dsl
from gemmlab import techniques as T
from gemmlab.dtypes import dtype_name
from gemmlab.answers import serving, stand_ins
from gemmlab.techniques import guards
from gemmlab.techniques.images import images_of_plan, record_plan
from tests.dsl_kernels import simple_gemm
from tests.gemmlab.techniques import kernels

PASSES = [T.copies("global", "shared", by="cp.async", bytes=16, where="main_loop")]
FAILS = [T.mma("m16n8k16", count=1)]


@pytest.fixture(scope="module")
def ring():
    return gemmlab.compile(kernels.RING, "ring", arch="sm_80")


@pytest.fixture(scope="module")
def dsl_gemm():
    return dsl.compile(simple_gemm.gemm, *examples(), arch="sm_90a")


def examples(M=64, N=48, K=32):
    return torch.empty(M, K, dtype=torch.float16), torch.empty(N, K, dtype=torch.float16), torch.empty(M, N)


def test_require_passes_a_kernel_with_the_technique_and_names_what_another_lacks(ring) -> None:
    report = T.require(ring, PASSES, what="the ring")
    assert report.passed and "16-byte cp.async" in str(report) and "<table>" in report._repr_html_()
    with pytest.raises(T.TechniqueError) as err:
        T.require(ring, PASSES + FAILS, what="the ring")
    assert isinstance(err.value, AssertionError) and isinstance(err.value, gemmlab.GemmlabError)
    message = str(err.value)
    assert message.startswith("the ring:") and "expected 1, found 0 m16n8k16" in message
    assert "cp.async" not in message.split(":", 1)[1], "a check that passed is not in the message"


def test_a_launcher_with_build_is_read_through_what_it_builds(ring) -> None:
    class Launcher:
        __name__ = "ring_gemm"

        def build(self, arch=None):
            return ring

    assert T.check(Launcher(), PASSES).passed


def test_a_compiled_dsl_kernel_and_a_function_that_launches_one_are_read_the_same(dsl_gemm) -> None:
    simt = [T.instructions("fma", at_least=1), T.mma("any", count=0, at_least=None)]
    assert T.check(dsl_gemm, simt).passed

    def launcher(A, B, D):              # what a notebook's Python launcher looks like: it calls the compiled kernel
        dsl_gemm(A, B, D)

    recorded = T.check(launcher, simt, example=examples())
    assert recorded.passed and len(recorded.findings) == len(simt)
    plan = record_plan(launcher, examples())
    (code,) = images_of_plan(plan, "launcher")
    assert code.cubin == dsl_gemm.cubin and code.kernel == dsl_gemm.kernel_name


def test_what_has_no_machine_code_is_refused_with_a_sentence() -> None:
    with pytest.raises(T.TargetError, match="cannot find the machine code of int"):
        T.check(3, PASSES)
    uncompiled = dsl.gemm_fn(simple_gemm.gemm)
    with pytest.raises(T.TargetError, match="is not compiled yet"):
        T.check(uncompiled, PASSES)
    with pytest.raises(TypeError, match="a list of technique checks"):
        T.check(uncompiled, ["pipelined"])


@pytest.mark.parametrize("make, message", [
    (lambda: T.copies("global", "local"), "from 'global' to 'shared'"),
    (lambda: T.copies(by="magic"), "by= must be one of"),
    (lambda: T.stores(where="inside"), "where= must be one of"),
    (lambda: T.pipelined(in_flight=0), "1 or more"),
    (lambda: T.waits_in_main_loop(pending=-1), "0 or more"),
    (lambda: T.fragments_by("registers"), "'ldmatrix' or 'shared'"),
    (lambda: T.instructions("teleport"), "kind= must be one of"),
])
def test_a_check_written_wrong_is_refused_when_written(make, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make()


# ------------------------------------------------------------------ in the grader's judge

@pytest.fixture
def linked(monkeypatch):
    student: dict = {}
    judge: dict = {}

    def channel(request):
        return serving.serve(student, json.dumps(request))

    monkeypatch.setattr(stand_ins, "channel", channel)
    return student, judge


def test_in_the_judge_a_compiled_kernel_is_read_from_its_image_and_its_launches_are_held_to_the_checks(
        linked, dsl_gemm, monkeypatch) -> None:
    student, judge = linked
    student["k"] = dsl_gemm
    stand_ins.bind(judge, serving.describe(student, ["k"]), ["k"])
    registered = []
    monkeypatch.setattr(stand_ins, "guard_launches", lambda target, guard: registered.append((target, guard)))
    simt = [T.instructions("fma", at_least=1)]
    assert T.require(judge["k"], simt).passed
    ((target, guard),) = registered
    assert target is judge["k"] and stand_ins.launch_key(target) == ("kernel", judge["k"]._handle)
    A, B, D = examples()
    metas = [{"shape": list(t.shape), "stride": list(t.stride()), "dtype": dtype_name(t.dtype), "address_mod": 0}
             for t in (A, B, D)]
    guard(record_plan(dsl_gemm, (A, B, D)), metas)            # the kernel that was checked: launched


def test_a_guard_refuses_another_kernel_on_aligned_tensors_and_lets_a_fallback_variant_run(dsl_gemm) -> None:
    from tests.dsl_kernels import tensorop_gemm

    no_tensor_cores = [T.mma("any", count=0, at_least=None)]
    guard = guards.bind_checks_to_launches(None, no_tensor_cores, T.machine_code(dsl_gemm), "your gemm",
                                           register=False)
    A, B, D = (t.to(torch.float16) for t in examples(128, 128, 64))
    aligned = [{"shape": list(t.shape), "stride": list(t.stride()), "dtype": dtype_name(t.dtype), "address_mod": 0}
               for t in (A, B, D)]
    guard(record_plan(dsl_gemm, (A, B, D)), aligned)           # the kernel that was checked runs
    other = dsl.compile(tensorop_gemm.gemm, A, B, D, arch="sm_90a")
    plan = record_plan(other, (A, B, D))
    with pytest.raises(T.TechniqueError, match="not the kernel whose techniques were checked"):
        guard(plan, aligned)
    odd = [dict(m, address_mod=2) for m in aligned]
    guard(plan, odd)                                           # narrower rows: a fallback variant, not held to them
    assert guards.vector_friendly(aligned) and not guards.vector_friendly(odd)
    assert not guards.vector_friendly([{"shape": [4, 7], "stride": [7, 1], "dtype": "float16", "address_mod": 0}])


def test_in_the_judge_a_launching_function_is_recorded_without_a_gpu(linked, dsl_gemm, no_gpu) -> None:
    student, judge = linked

    def gemm(A, B, D):
        dsl_gemm(A, B, D)

    student["gemm"] = gemm
    stand_ins.bind(judge, serving.describe(student, ["gemm"]), ["gemm"])
    plan = stand_ins.recorded_plan(judge["gemm"], examples())
    (code,) = images_of_plan(plan, "gemm")
    assert code.cubin == dsl_gemm.cubin
    assert T.check(judge["gemm"], [T.instructions("fma")], example=examples()).passed
