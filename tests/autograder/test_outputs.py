"""What the grader keeps of a cell's outputs: published gemmlab results become records (and leave
the outputs), forged or malformed ones are dropped, hidden test source never reaches feedback;
and which errors make the runner start a fresh kernel."""
from __future__ import annotations

import pytest

from autograder.harness.inkernel import parse_probe
from autograder.harness.kernel import CellRun
from autograder.harness.outputs import for_feedback, take_published, withhold
from autograder.harness.runner import FAULT_CLASSES, GPU_STATE, leaves_gpu_unusable
from autograder.records import PublishedResult
from gemmlab.checking.report import RESULT_MIME, payload


class _Bench:
    def to_dict(self) -> dict:
        return {"ratio": 0.5}


def test_published_results_leave_the_outputs_and_become_records() -> None:
    text = {"output_type": "stream", "name": "stdout", "text": "hello\n"}
    shown = {"output_type": "display_data", "data": {"text/plain": "table"}, "metadata": {}}
    published = {"output_type": "display_data", "data": {RESULT_MIME: payload("bench", _Bench())}, "metadata": {}}
    forged = [{"output_type": "display_data", "data": {RESULT_MIME: value}, "metadata": {}}
              for value in ("text", {"kind": "rm -rf", "data": {}}, {"kind": "bench", "data": [1]})]
    kept, found = take_published([text, published, shown, *forged])
    assert kept == [text, shown]
    assert found == [PublishedResult("bench", {"ratio": 0.5})]


def test_payload_refuses_an_unknown_kind() -> None:
    with pytest.raises(ValueError, match="unknown result kind"):
        payload("speed", _Bench())


def test_feedback_outputs_drop_tracebacks_and_withhold_hidden_lines() -> None:
    hidden = ["assert square(-4) == 16, 'secret'"]
    outs = for_feedback([{"output_type": "error", "ename": "AssertionError", "evalue": "x", "traceback": ["t"]},
                         {"output_type": "stream", "name": "stdout", "text": repr(hidden)}], hidden)
    assert outs[0]["traceback"] == []
    assert "withheld" in outs[1]["text"] and "secret" not in outs[1]["text"]
    assert withhold("fine", hidden) == "fine" and "withheld" in withhold(hidden[0], hidden)


class _Kernel:
    """A kernel's account of its GPU, as GPU_STATE asks it (``None``: it does not answer)."""

    km = object()

    def __init__(self, state: str | None) -> None:
        self.state, self.asked = state, 0

    def alive(self) -> bool:
        return True

    def evaluate(self, expression: str, timeout_s: float) -> tuple[bool, str]:
        self.asked += 1
        assert expression == GPU_STATE
        return (False, "it did not answer within 30 s") if self.state is None else (True, repr(self.state))


@pytest.mark.parametrize("ename, evalue, state, fresh", [
    ("ContextLostError", "the CUDA context is lost", "usable", True),        # gemmlab's class: no need to ask
    ("KernelTimeoutError", "the kernel did not finish within 20 s", "usable", True),
    ("AcceleratorError", "CUDA error: an illegal memory access was encountered", "lost", True),
    ("RuntimeError", "CUDA error: misaligned address", "lost", True),
    ("RuntimeError", "a kernel still runs", "busy", True),
    ("AssertionError", "square(3) should be 9", None, True),                 # a kernel that does not answer
    ("OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB", "usable", False),
    # the student's words in an error, with the kernel's GPU fine: no restart (it cost the judge three before)
    ("AnswerError", "gemm(...) raised RuntimeError: CUDA error: an illegal memory access was encountered", "usable",
     False),
    ("AssertionError", "got 'CUDA_ERROR_ILLEGAL_ADDRESS ContextLostError KernelTimeoutError'", "usable", False),
])
def test_errors_that_need_a_fresh_kernel_are_told_from_trusted_signals(ename: str, evalue: str, state: str | None,
                                                                       fresh: bool) -> None:
    kernel = _Kernel(state)
    assert leaves_gpu_unusable(CellRun("error", ename=ename, evalue=evalue), kernel) is fresh
    assert kernel.asked == (0 if ename in FAULT_CLASSES else 1)
    assert not leaves_gpu_unusable(CellRun("timeout", ename=ename, evalue=evalue), kernel)


def test_the_gpu_state_a_kernel_gives_never_creates_a_context() -> None:
    """GPU_STATE asks a kernel's own gemmlab: without CUDA in use it says "usable" without touching the GPU."""
    import sys

    from gemmlab.running import faults

    assert eval(GPU_STATE) == ("usable" if faults.lost_reason() is None else "lost")
    torch = sys.modules.get("torch")
    assert torch is None or not torch.cuda.is_initialized()


def test_probe_answer_must_carry_our_nonce_and_a_list_of_strings() -> None:
    good = {"application/json": {"nonce": "n1", "problems": ["builtin len was replaced"]}}
    assert parse_probe(good, "n1") == ["builtin len was replaced"]
    assert parse_probe({"application/json": {"nonce": "n1", "problems": []}}, "n1") == []
    assert parse_probe(good, "n2") is None
    assert parse_probe({"text/plain": "'n1|'"}, "n1") is None
    assert parse_probe({"application/json": {"nonce": "n1", "problems": "none"}}, "n1") is None
    assert parse_probe(None, "n1") is None
