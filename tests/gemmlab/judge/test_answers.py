"""Answers out, verdicts in: what crosses from a student's kernel to the judge is plain data, rebuilt there.

The student's side (``describe``, ``serve``) runs on a namespace the test fills like an answer cell
would; the judge's side (``bind``, ``Answer``) talks to it through ``stand_ins.channel``, as the grader's
stdin bridge would. Every hostile value below must reach the judge as a refusal, never as an object
the student made.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import gemmlab.layout as L
from gemmlab.answers import serving, stand_ins, wire
from gemmlab.judge import plain


class AlwaysEqual(float):
    def __eq__(self, other):  # noqa: D105 - the cheat under test
        return True

    __hash__ = float.__hash__


@pytest.fixture
def linked(monkeypatch):
    """A student namespace and a judge namespace joined as the grader joins them."""
    student: dict = {}
    judge: dict = {}
    monkeypatch.setattr(stand_ins, "channel", lambda request: serving.serve(student, json.dumps(request)))

    def bind(*names: str) -> None:
        stand_ins.bind(judge, serving.describe(student, list(names)))

    return student, judge, bind


@pytest.mark.parametrize("value", [0, -3, 2**80, 1.5, math.inf, "text", None, True, (1, (2, 3)), [1, [2]],
                                   {"a": (1, 2), 3: None}, {1, (2, 3)}, frozenset({"x"})])
def test_plain_values_cross_unchanged(value) -> None:
    assert plain.decode(plain.encode(value)) == value
    assert type(plain.decode(plain.encode(value))) is type(value)


def test_nan_arrays_tensors_and_layouts_are_rebuilt_from_the_judges_own_types() -> None:
    assert math.isnan(plain.decode(plain.encode(float("nan"))))
    arr = np.arange(12, dtype=np.int32).reshape(3, 4)
    back = plain.decode(plain.encode(arr))
    assert type(back) is np.ndarray and np.array_equal(back, arr) and back.dtype == arr.dtype
    for t in (torch.randn(4, 3).half(), torch.randn(2, 5).bfloat16()):
        got = plain.decode(plain.encode(t))
        assert type(got) is torch.Tensor and got.dtype == t.dtype and torch.equal(got, t)
    layout = L.Layout(((2, 4), 8), ((1, 16), 2))
    got = plain.decode(plain.encode(layout))
    assert type(got) is L.Layout and got.shape == layout.shape and got.stride == layout.stride
    swz = L.make_composed_layout(L.Swizzle(3, 3, 3), 0, L.Layout((8, 64), (64, 1)))
    got = plain.decode(plain.encode(swz))
    assert type(got) is L.ComposedLayout and [got(i) for i in range(512)] == [swz(i) for i in range(512)]


@pytest.mark.parametrize("make", [
    lambda: AlwaysEqual(1.0),
    lambda: type("Tup", (tuple,), {"__eq__": lambda s, o: True})((1, 2)),
    lambda: type("Anything", (), {"__eq__": lambda s, o: True})(),
    lambda: np.array([object()]),
    lambda: (1, [2, {3: lambda: 0}]),
    lambda: {1, (2, object())},
])
def test_objects_a_student_made_are_not_plain_data(make) -> None:
    with pytest.raises(plain.NotPlainData, match="not plain data|dtype"):
        plain.encode(make(), "the answer")


@pytest.mark.parametrize("text", [
    '{"t": "tuple", "v": 3}', '{"t": "eval", "v": "__import__(\'os\')"}', '{"t": "array", "dtype": "object", "shape": [1], "b64": ""}',
    '{"t": "array", "dtype": "int32", "shape": [4], "b64": "AAAA"}', "[" * 100 + "]" * 100,
    '{"t": "layout", "shape": "x", "stride": 1}', "not json",
])
def test_the_judge_refuses_malformed_or_hostile_data(text: str) -> None:
    with pytest.raises(plain.NotPlainData):
        plain.decode(text)


def test_functions_are_called_in_the_students_namespace_and_return_plain_data(linked) -> None:
    student, judge, bind = linked
    student["crd2idx"] = lambda coord, shape, stride: sum(c * s for c, s in zip(coord, stride))
    student["SMEM_INDEX"] = "(r)*32 + (c)"
    bind("crd2idx", "SMEM_INDEX")
    assert judge["SMEM_INDEX"] == "(r)*32 + (c)"
    assert judge["crd2idx"]((2, 3), (4, 8), (8, 1)) == 19
    student["crd2idx"] = lambda *a: 7          # redefined later: the judge calls what the student has now
    assert judge["crd2idx"]((2, 3), (4, 8), (8, 1)) == 7


def test_cheats_reach_the_judge_as_failures(linked) -> None:
    student, judge, bind = linked
    student["always"] = lambda *a, **k: AlwaysEqual(0.0)
    student["raises"] = lambda *a: (_ for _ in ()).throw(NotImplementedError("still the placeholder"))
    student["ANSWER"] = AlwaysEqual(3.0)
    student["GPU_STUFF"] = object()
    bind("always", "raises", "ANSWER", "GPU_STUFF", "missing")
    with pytest.raises(wire.AnswerError, match="not plain data"):
        judge["always"](1, 2)
    with pytest.raises(wire.AnswerError, match="raised NotImplementedError: still the placeholder"):
        judge["raises"]()
    for name in ("ANSWER", "GPU_STUFF"):
        with pytest.raises(wire.AnswerError, match="not plain data"):
            judge[name] == 3.0          # noqa: B015 - comparing is the use under test
        with pytest.raises(wire.AnswerError):
            bool(judge[name])
    assert "missing" not in judge


def test_a_forged_description_binds_nothing_a_student_made() -> None:
    judge: dict = {}
    forged = json.dumps({"x": {"kind": "value", "data": '{"t": "eval", "v": "1"}'},
                         "f": {"kind": "function"}, "__class__": {"kind": "value", "data": "1"},
                         "not an identifier": {"kind": "value", "data": "1"}, "g": {"kind": "dsl", "done": "yes"}})
    bound = stand_ins.bind(judge, forged)
    assert isinstance(judge["x"], stand_ins.Opaque) and isinstance(judge["f"], stand_ins.Answer)
    assert "not an identifier" not in judge
    assert isinstance(judge["g"], stand_ins.DslAnswer) and judge["g"].done is False
    assert set(bound) == {"x", "f", "__class__", "g"}
    with pytest.raises(wire.AnswerError):
        stand_ins.bind(judge, "[1, 2]")


def test_a_dsl_answer_is_built_only_in_the_students_process() -> None:
    from gemmlab import dsl

    fn = stand_ins.DslAnswer("gemm_jit", "JitFunction", done=True)
    with pytest.raises(wire.StudentProcessOnly, match="your notebook's process"):
        dsl.gemm_fn(fn)
    with pytest.raises(wire.AnswerError, match="no connection"):   # compiled by the student's kernel, asked over the link
        dsl.compile(fn, torch.empty(4, 4), arch="sm_90a")
    from gemmlab.notebook import nbhelpers

    assert nbhelpers.function_done(fn) is True
    assert nbhelpers.function_done(stand_ins.DslAnswer("k", "kernel", done=False)) is False


def test_a_call_with_tensors_is_a_launch_the_grader_runs_in_the_students_process(linked) -> None:
    student, judge, bind = linked
    student["my_gemm"] = lambda A, B, D: D.copy_(A @ B.T)
    bind("my_gemm")
    A = torch.ones(2, 2)
    with pytest.raises(wire.NeedsStudentProcess):
        judge["my_gemm"](A, A, torch.empty(2, 2))
    with pytest.raises(wire.NeedsStudentProcess):
        judge["my_gemm"]([A], {"B": A}, None)
    assert not issubclass(wire.NeedsStudentProcess, Exception), "no `except Exception` may swallow it"


def test_in_a_judged_test_a_call_with_tensors_is_recorded_not_moved(linked) -> None:
    """Where the grader records launches (a test marked ``judged``), tensors never move the test: the call is
    recorded in the student's kernel and replayed by the judge, which launches only on its own GPU tensors."""
    student, judge, bind = linked
    student["my_gemm"] = lambda A, B, D: D.copy_(A @ B.T)
    bind("my_gemm")
    stand_ins.record_launches(True)
    try:
        with pytest.raises(wire.AnswerError, match="not on the GPU"):
            judge["my_gemm"](torch.ones(2, 2), torch.ones(2, 2), torch.empty(2, 2))
    finally:
        stand_ins.record_launches(False)


def _placeholder(x):
    raise NotImplementedError()  # YOUR CODE HERE


def test_a_function_answer_says_whether_it_is_still_the_placeholder(linked) -> None:
    from gemmlab.notebook import nbhelpers

    student, judge, bind = linked
    student["todo"], student["done"] = _placeholder, lambda x: x
    bind("todo", "done")
    assert nbhelpers.function_done(judge["todo"]) is False and nbhelpers.function_done(judge["done"]) is True


def test_calls_cross_a_socket_pair_as_json_lines(monkeypatch) -> None:
    """The wire the grader relays: the student's serving thread on one end, the judge's channel on the other."""
    import socket

    student_end, judge_end = socket.socketpair()
    student = {"double": lambda x: 2 * x, "boom": lambda: 1 / 0}
    monkeypatch.setenv(wire.ANSWER_FD_ENV, str(student_end.fileno()))
    assert serving.serve_in_background(student)
    monkeypatch.setenv(wire.ANSWER_FD_ENV, str(judge_end.fileno()))
    monkeypatch.setattr(stand_ins, "channel", stand_ins.SocketChannel())
    judge: dict = {}
    stand_ins.bind(judge, serving.describe(student, ["double", "boom"]))
    assert [judge["double"](i) for i in range(200)] == [2 * i for i in range(200)]
    with pytest.raises(wire.AnswerError, match="ZeroDivisionError"):
        judge["boom"]()
    monkeypatch.delenv(wire.ANSWER_FD_ENV)
    assert not serving.serve_in_background(student), "outside grading no thread starts"


def test_binding_the_answers_again_forgets_every_recorded_launch(linked) -> None:
    """A function redefined by a later answer cell is recorded afresh, never judged on the old one's plan."""
    student, judge, bind = linked
    student["f"] = lambda: 1
    stand_ins.REPLAYS["stale"] = object()
    bind("f")
    assert stand_ins.REPLAYS == {}


def test_many_calls_cross_in_one_round_trip_and_stay_plain_data(linked, monkeypatch) -> None:
    from gemmlab.notebook import nbhelpers

    student, judge, bind = linked
    student["owner"] = lambda m, n: (m % 4, n // 2)
    student["cheat"] = lambda m, n: AlwaysEqual(1.0) if m else (0, 0)
    bind("owner", "cheat")
    sent = []
    channel = stand_ins.channel
    monkeypatch.setattr(stand_ins, "channel", lambda request: sent.append(request) or channel(request))
    calls = [(m, n) for m in range(8) for n in range(8)]
    assert nbhelpers.ask_each(judge["owner"], calls) == [(m % 4, n // 2) for m, n in calls] and len(sent) == 1
    with pytest.raises(wire.AnswerError, match=r"cheat\(...\) returned\[8\] is a .*AlwaysEqual, not plain data"):
        nbhelpers.ask_each(judge["cheat"], calls)
    student["owner"] = lambda m, n: 1 / 0 if m == 3 else (0, 0)
    with pytest.raises(wire.AnswerError, match="ZeroDivisionError"):
        nbhelpers.ask_each(judge["owner"], calls)
    assert nbhelpers.ask_each(lambda m, n: m + n, [(1, 2), (3, 4)]) == [3, 7]    # in the student's own notebook


# ------------------------------------------------------- a call watched for a library (gemmlab.checking.library_watch)

_LIBS = ["pycute", "gemmlab.layout"]


def _own_crd2idx(coord, shape, stride):
    if isinstance(shape, tuple):
        return sum(_own_crd2idx(c, s, d) for c, s, d in zip(coord, shape, stride))
    return coord * stride


def test_a_watched_call_through_the_judge(linked) -> None:
    """01's crd2idx rule in the grader: the student's function runs watched in the student's kernel (serve), the
    report crosses back, and a call into the library fails the judge's test with the functions named."""
    from gemmlab.notebook import nbhelpers

    student, judge, bind = linked
    student.update(own=_own_crd2idx, cheat=lambda c, s, d: L.Layout(s, d)(c))
    bind("own", "cheat")
    assert nbhelpers.ask_without(_LIBS, judge["own"], ((1, 2), 5), ((2, 4), 8), ((1, 16), 2)) == 43
    with pytest.raises(nbhelpers.CheckFailed, match=r"cheat\(.*ran code of pycute or gemmlab.layout: .*Layout"):
        nbhelpers.ask_without(_LIBS, judge["cheat"], ((1, 2), 5), ((2, 4), 8), ((1, 16), 2))


def test_a_reply_without_a_watch_report_is_refused(monkeypatch) -> None:
    student = {"own": _own_crd2idx}
    judge: dict = {}
    stand_ins.bind(judge, serving.describe(student, ["own"]))
    monkeypatch.setattr(stand_ins, "channel", lambda request: json.dumps({"id": 1, "result": plain.encode(3)}))
    with pytest.raises(wire.AnswerError, match="no report of the watched call"):
        judge["own"].watched(_LIBS, 1, 4, 2)
