"""Recording a CuTe DSL call as a plan the judge replays, and the judge's checks of a plan: all without a GPU.

The DSL compiles for sm_90a on the CPU and exports its host launch code; the recording runs that
code against gemmlab's emulated CUDA runtime. Replaying needs a GPU (tests/gemmlab/judge/test_gpu_dsl_replay.py).
"""
from __future__ import annotations

import base64
import copy
import hashlib
import json

import pytest
import torch

from gemmlab.dsl import gemm_fn
from gemmlab.dsl.host_recording import H100_ATTRIBUTES, HostRecordingError
from gemmlab.dsl.recording import probe, recording
from gemmlab.answers import serving, wire
from gemmlab.judge.dsl_replay import Copy, Launch, PlanError, parse_plan, relocate
from gemmlab.running.elf_object import ElfObjectError, LoadedObject
from tests.dsl_kernels import simple_gemm

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kernel():
    return gemm_fn(simple_gemm.gemm, arch="sm_90a")


def probes(M, N, K, dtype=torch.float16):
    return [probe((M, K), (K, 1), dtype, 0), probe((N, K), (K, 1), dtype, 0), probe((M, N), (N, 1), dtype, 256)]


def record(fn, tensors):
    with recording("sm_90a", H100_ATTRIBUTES, tensors) as recorder:
        fn(*tensors)
    return recorder.plan()


def test_a_launch_is_recorded_with_its_grid_and_the_operands_addresses(kernel):
    A, B, D = probes(100, 70, 33)
    assert D.data_ptr() % 512 == 256, "a probe shares the judge's tensor's address alignment"
    plan = record(kernel, [A, B, D])
    json.dumps(plan)                                  # plain data
    (step,) = plan["steps"]
    assert step["op"] == "launch" and step["grid"] == [5, 7, 1] and step["block"] == [16, 16, 1]
    words = [int.from_bytes(bytes.fromhex(p)[:8], "little") for p in step["params"][:3]]
    assert words == [A.data_ptr(), B.data_ptr(), D.data_ptr()]
    images, buffers, steps, _ = parse_plan(plan, 3)
    assert [b.argument for b in buffers] == [0, 1, 2] and isinstance(steps[0], Launch)
    assert relocate(B.data_ptr() + 64, buffers, [1000, 2000, 3000]) == 2064
    assert relocate(D.data_ptr() + D.numel() * 2, buffers, [1000, 2000, 3000]) is None


def test_a_new_shape_records_a_new_grid_from_the_same_compile(kernel):
    first = record(kernel, probes(16, 16, 8))["steps"][0]
    second = record(kernel, probes(1000, 40, 8))["steps"][0]
    assert first["image"] == second["image"] and first["grid"] == [1, 1, 1] and second["grid"] == [3, 63, 1]


def test_copies_around_the_launch_are_steps_in_order(kernel):
    def padded(A, B, D):
        Ap = torch.zeros(A.shape[0], 40, dtype=A.dtype)
        Ap[:, :A.shape[1]] = A
        Bp = torch.zeros(B.shape[0], 40, dtype=B.dtype)
        Bp[:, :B.shape[1]].copy_(B)
        Dp = torch.empty_like(D)
        kernel(Ap, Bp, Dp)
        D.copy_(Dp)

    tensors = probes(20, 24, 33)
    plan = record(padded, tensors)
    assert [s["op"] for s in plan["steps"]] == ["copy", "copy", "launch", "copy"]
    assert plan["steps"][0]["src"]["buffer"] == 0 and plan["steps"][-1]["dst"]["buffer"] == 2
    scratch = [b for b in plan["buffers"] if b["argument"] is None]
    assert len(scratch) == 3 and all(b["nbytes"] > 0 for b in scratch)
    _, _, steps, _ = parse_plan(plan, 3)
    assert isinstance(steps[0], Copy) and steps[0].dst.shape == (20, 33)


@pytest.mark.parametrize("body, said", [
    (lambda k, A, B, D: D.copy_(A @ B.t()), "computes with torch"),
    (lambda k, A, B, D: (k(A, B, D), D.mul_(2.0)), "computes with torch (aten::mul_)"),
    (lambda k, A, B, D: D.zero_(), "launched no CuTe DSL kernel"),
])
def test_work_the_judge_would_not_replay_is_refused(kernel, body, said):
    with pytest.raises(HostRecordingError, match=said.replace("(", r"\(").replace(")", r"\)")):
        record(lambda A, B, D: body(kernel, A, B, D), probes(32, 32, 16))


def test_the_student_kernel_answers_a_record_request_with_a_plan():
    from gemmlab.judge import plain

    request = {"id": 7, "name": "gemm", "args": plain.encode([{wire.TENSOR_MARK: i} for i in range(3)], "args"),
               "kwargs": plain.encode({}, "kwargs"),
               "record": {"arch": "sm_90a", "device_attributes": {str(k): v for k, v in H100_ATTRIBUTES.items()},
                          "tensors": [{"shape": s, "stride": st, "dtype": "float16", "address_mod": 0}
                                      for s, st in (([64, 32], [32, 1]), ([48, 32], [32, 1]), ([64, 48], [48, 1]))]}}
    reply = json.loads(serving.serve({"gemm": simple_gemm.gemm}, json.dumps(request)))  # a bare @cute.jit function
    assert reply["id"] == 7 and reply["plan"]["steps"][0]["grid"] == [3, 4, 1]
    broken = json.loads(serving.serve({"gemm": lambda A, B, D: D.add_(1)}, json.dumps(request)))
    assert broken["error"] == "HostRecordingError" and "add_" in broken["message"]


# ------------------------------------------------------------------ the judge's checks of a plan

@pytest.fixture(scope="module")
def plan(kernel):
    return record(kernel, probes(64, 64, 32))


def _forged(plan, change):
    forged = copy.deepcopy(plan)
    change(forged)
    return forged


def _new_image(p):
    image = b"\x7fELF not the recorded one"
    p["images"] = {hashlib.sha256(image).hexdigest(): base64.b64encode(image).decode()}


@pytest.mark.parametrize("change, said", [
    (lambda p: p["images"].update({k: base64.b64encode(b"x").decode() for k in p["images"]}), "does not match its hash"),
    (_new_image, "does not name a kernel"),
    (lambda p: p["steps"][0].update(attributes=[[9, "00" * 64]]), "launch attribute 9"),
    (lambda p: p["steps"][0].update(attributes=[[4, (3).to_bytes(4, "little").hex() + "01000000" * 2]]),
     "does not divide grid"),
    (lambda p: p["steps"][0].update(kernel_attributes={"0": 1}), "kernel attribute 0"),
    (lambda p: p["steps"][0].update(block=[2048, 1, 1]), "a block"),
    (lambda p: p["buffers"].append({"base": 1, "nbytes": 4 << 30, "argument": None}), "scratch memory"),
    (lambda p: p["buffers"][0].update(argument=3), "names argument 3"),
    (lambda p: p["steps"].append({"op": "copy", "dst": {"buffer": 2, "offset": 8, "shape": [64, 64],
                                                         "stride": [64, 1], "dtype": "float16"},
                                  "src": {"buffer": 0, "offset": 0, "shape": [1], "stride": [1], "dtype": "float16"}}),
     "outside its buffer"),
    (lambda p: p.update(steps=[]), "1 to 64 steps"),
    (lambda p: p.update(version=2), "version-1"),
])
def test_the_judge_refuses_a_forged_plan(plan, change, said):
    with pytest.raises(PlanError, match=said):
        parse_plan(_forged(plan, change), 3)


def test_an_object_that_calls_an_unprovided_function_is_refused(kernel):
    from gemmlab.dsl.host_recording import export_object

    kernel.compile_for(*probes(16, 16, 16))
    obj = export_object(kernel._last.compiled, "t")
    with pytest.raises(ElfObjectError, match="_cudaLaunchKernelEx"):
        LoadedObject(obj, {})
    with pytest.raises(ElfObjectError, match="not a 64-bit"):
        LoadedObject(b"not an object", {})
