"""Compiled CuTe DSL kernels of the student's, seen from the judge: handles their kernel keeps, never the objects.

The student's side compiles for sm_90a on the CPU (no GPU needed); the judge's side talks to it through
``stand_ins.channel`` as the grader's relay would. What the judge gets is a :class:`CompiledAnswer`: its module
image and resources are asked for as plain data (its PTX is not: text from the student's process is evidence
of nothing), and its launches are recorded in the student's kernel (the replay needs a GPU:
tests/gemmlab/judge/test_gpu_dsl_replay.py).
"""
from __future__ import annotations

import json

import pytest
import torch

from gemmlab import dsl
from gemmlab.dsl.host_recording import H100_ATTRIBUTES
from gemmlab.judge import plain
from gemmlab.answers import serving, stand_ins, wire
from tests.dsl_kernels import simple_gemm

pytestmark = pytest.mark.slow


@pytest.fixture
def linked(monkeypatch):
    student: dict = {}
    judge: dict = {}
    sent: list[dict] = []

    def channel(request):
        sent.append(request)
        return serving.serve(student, json.dumps(request))

    monkeypatch.setattr(stand_ins, "channel", channel)

    def bind(*names: str) -> None:
        stand_ins.bind(judge, serving.describe(student, list(names)))

    return student, judge, bind, sent


def examples(M=64, N=48, K=32):
    return torch.empty(M, K, dtype=torch.float16), torch.empty(N, K, dtype=torch.float16), torch.empty(M, N)


def test_a_compiled_kernel_bound_to_a_name_crosses_as_a_handle_with_its_image(linked) -> None:
    student, judge, bind, sent = linked
    student["k"] = dsl.compile(simple_gemm.gemm, *examples(), arch="sm_90a")
    bind("k")
    k = judge["k"]
    assert isinstance(k, stand_ins.CompiledAnswer) and k.name == "gemm"
    cubin, kernel, arch = k.image()
    assert cubin == student["k"].cubin and kernel == student["k"].kernel_name and arch == "sm_90a"
    assert k.resources == student["k"].resources and k.compiled_arch == "sm_90a"
    assert "gemm" in k.summary()
    asked = len(sent)
    assert k.image()[0] == cubin and len(sent) == asked, "a fact is asked for once"
    assert k.sass() == student["k"].sass() and "EXIT" in k.sass() and len(sent) == asked, \
        "the judge disassembles the image itself"
    with pytest.raises(wire.AnswerError, match="does not read PTX text from your notebook's process"):
        k.ptx
    with pytest.raises(wire.AnswerError, match="call it with torch tensors"):
        k(3)
    with pytest.raises(wire.NeedsStudentProcess):      # a launch, where the grader does not record launches
        k(*examples())


def test_compile_in_the_judge_is_done_by_the_students_kernel_for_probes_of_the_examples(linked) -> None:
    student, judge, bind, sent = linked
    student["gemm"] = simple_gemm.gemm
    bind("gemm")
    assert isinstance(judge["gemm"], stand_ins.DslAnswer)
    k = dsl.compile(judge["gemm"], *examples(), arch="sm_90a")
    assert isinstance(k, stand_ins.CompiledAnswer) and k.image()[0][:4] == b"\x7fELF"
    assert sent[0]["compile"]["arch"] == "sm_90a"
    assert [t["shape"] for t in sent[0]["compile"]["tensors"]] == [[64, 32], [48, 32], [64, 48]]
    assert k.compile_for(*examples(16, 16, 8)) is k


def test_a_function_returning_compiled_kernels_gives_handles_the_judge_can_record(linked) -> None:
    """A launch of a handle is recorded in the student's kernel on probes: the plan names the same image."""
    student, judge, bind, _ = linked

    def build(arch):
        return [dsl.compile(simple_gemm.gemm, *examples(), arch=arch)]

    student["build"] = build
    bind("build")
    (k,) = judge["build"]("sm_90a")
    assert isinstance(k, stand_ins.CompiledAnswer)
    metas = [{"shape": [64, 32], "stride": [32, 1], "dtype": "float16", "address_mod": 0},
             {"shape": [48, 32], "stride": [32, 1], "dtype": "float16", "address_mod": 0},
             {"shape": [64, 48], "stride": [48, 1], "dtype": "float32", "address_mod": 256}]
    reply = json.loads(serving.serve(student, json.dumps({
        "id": 1, "name": "gemm", "kernel": k._handle, "args": plain.encode([{wire.TENSOR_MARK: i} for i in range(3)]),
        "kwargs": plain.encode({}),
        "record": {"arch": "sm_90a", "tensors": metas, "device_attributes": {str(a): v for a, v in H100_ATTRIBUTES.items()}}})))
    (step,) = reply["plan"]["steps"]
    assert step["op"] == "launch" and step["grid"] == [3, 4, 1]


def test_a_handle_the_student_never_gave_or_a_fact_not_offered_is_refused(linked) -> None:
    student, judge, bind, _ = linked
    student["k"] = dsl.compile(simple_gemm.gemm, *examples(), arch="sm_90a")
    bind("k")
    forged = stand_ins.CompiledAnswer(987654, "gemm")
    with pytest.raises(wire.AnswerError, match="KeyError"):
        forged.image()
    for fact in ("fn", "ptx", "sass"):                  # text the student's process writes is not offered
        reply = json.loads(serving.serve(student, json.dumps({"id": 1, "kernel": judge["k"]._handle, "get": fact,
                                                               "args": plain.encode([]),
                                                               "kwargs": plain.encode({})})))
        assert reply["error"] == "ValueError" and f"not {fact!r}" in reply["message"]


def test_a_mark_that_is_not_a_handle_stays_plain_data() -> None:
    for data in ({wire.KERNEL_MARK: {"handle": True}}, {wire.KERNEL_MARK: {"handle": -1}},
                 {wire.KERNEL_MARK: "x"}, {wire.KERNEL_MARK: {"handle": 1}, "other": 2}):
        judge: dict = {}
        stand_ins.bind(judge, json.dumps({"v": {"kind": "value", "data": plain.encode(data)}}))
        assert not isinstance(judge["v"], stand_ins.CompiledAnswer)


def test_a_value_the_judges_test_rebinds_is_what_the_students_compile_reads(linked, monkeypatch) -> None:
    """07's hidden test varies the stage count the student's DSL function reads: in the judge it rebinds the
    value, and the student's kernel compiles with the judge's value, then restores its own."""
    student, judge, bind, sent = linked
    student["STAGES"] = 2
    student["jit_fn"] = simple_gemm.gemm
    bind("STAGES", "jit_fn")
    seen = []
    real = dsl.compile
    monkeypatch.setattr(dsl, "compile", lambda fn, *a, **k: seen.append(student["STAGES"]) or real(fn, *examples(),
                                                                                                  arch="sm_90a"))
    judge["STAGES"] = 4
    assert isinstance(judge["jit_fn"].compile(torch.empty(2, 2), arch="sm_90a"), stand_ins.CompiledAnswer)
    assert seen == [4] and student["STAGES"] == 2
    judge["STAGES"] = 2
    judge["jit_fn"].compile(torch.empty(2, 2), arch="sm_90a")
    assert seen == [4, 2] and sent[-1]["compile"]["values"] == {}
    monkeypatch.setattr(dsl, "compile", lambda fn, *a, **k: "not a kernel")
    with pytest.raises(wire.AnswerError, match="sent back str, not the compiled kernel"):
        judge["jit_fn"].compile(torch.empty(2, 2), arch="sm_90a")


def test_only_the_answer_names_are_bound_and_only_they_cross_back_when_rebound(linked, monkeypatch) -> None:
    """A forged description naming the instructor's names (a flag, a helper) binds nothing; IPython's own
    ``_i``/``_iN`` (cell sources, hidden tests included) never go to the student's kernel."""
    student, judge, _, sent = linked
    student["jit_fn"] = simple_gemm.gemm
    forged = json.loads(serving.describe(student, ["jit_fn"]))
    forged.update({"BLACKWELL": {"kind": "value", "data": plain.encode(True)},
                   "_i3": {"kind": "value", "data": plain.encode(None)},
                   "check": {"kind": "function"}})
    judge.update(BLACKWELL=False, check=len)
    stand_ins.bind(judge, json.dumps(forged), ["jit_fn", "_i3"])
    assert judge["BLACKWELL"] is False and judge["check"] is len and isinstance(judge["jit_fn"], stand_ins.DslAnswer)
    judge["_i3"] = "### BEGIN HIDDEN TESTS"
    dsl.compile(judge["jit_fn"], *examples(), arch="sm_90a")
    assert sent[-1]["compile"]["values"] == {}


def test_what_comes_back_malformed_is_refused_with_a_sentence(linked, monkeypatch) -> None:
    import collections

    student, judge, bind, _ = linked
    student["k"] = dsl.compile(simple_gemm.gemm, *examples(), arch="sm_90a")
    student["pair"] = lambda: collections.namedtuple("P", "a b")(1, 2)
    student["jit_fn"] = simple_gemm.gemm
    bind("k", "pair", "jit_fn")
    with pytest.raises(wire.AnswerError, match="not plain data"):    # the answering side survives it
        judge["pair"]()
    k = judge["k"]
    k._facts["resources"] = {"registers": float("nan")}
    with pytest.raises(wire.AnswerError, match="resources came back malformed"):
        k.resources
    for forged, why in (({"cubin": "not base64!", "kernel": "gemm", "arch": "sm_90a"}, "not base64"),
                        ({"cubin": "aGVsbG8=", "kernel": "gemm", "arch": "sm_90a"}, "not a cubin"),
                        ({"cubin": 5, "kernel": "gemm", "arch": "sm_90a"}, "malformed"), ("text", "malformed")):
        k._facts["image"] = forged
        with pytest.raises(wire.AnswerError, match=why):
            k.image()
    monkeypatch.setattr(stand_ins, "channel", lambda request: json.dumps({"id": 1}))
    with pytest.raises(wire.AnswerError, match="a reply without a result"):
        judge["pair"]()
    with pytest.raises(wire.AnswerError, match="Only tensors and plain values"):
        dsl.compile(judge["jit_fn"], torch.float16, arch="sm_90a")
    channel = stand_ins.SocketChannel()
    channel._sock = object()                        # never reached: the request is refused before sending
    monkeypatch.setattr(stand_ins, "MAX_REPLY_CHARS", 1000)
    with pytest.raises(wire.AnswerError, match="at most 1,000 go to your notebook's kernel"):
        channel({"name": "f", "args": "x" * 2000})
