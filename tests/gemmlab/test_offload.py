"""Where check_gemm's work goes: the finder the pool registers, never in the grader, and results without torch."""
from __future__ import annotations

import subprocess
import sys
from typing import Iterator

import pytest

from gemmlab import offload


class _Elsewhere:
    """A stand-in for the pool that records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def check_gemm(self, fn, convention, dtype, out_dtype, shapes, alpha, beta, tile, **options):
        self.asked.append("check_gemm")
        return "checked elsewhere"


@pytest.fixture
def elsewhere() -> Iterator[_Elsewhere]:
    target = _Elsewhere()
    offload.register("test", lambda: target)
    yield target
    offload.unregister("test")


def test_a_registered_finder_takes_the_work(elsewhere: _Elsewhere, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from gemmlab.checking.check import check_gemm

    monkeypatch.delenv("GEMMLAB_GRADING", raising=False)
    assert check_gemm(lambda A, B, D: None, dtype=torch.float16) == "checked elsewhere"
    assert elsewhere.asked == ["check_gemm"]


def test_the_grader_never_sends_work_elsewhere(elsewhere: _Elsewhere, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMMLAB_GRADING", "1")
    assert offload.pool_for_work() is None
    assert elsewhere.asked == []


def test_finders_that_find_nothing_mean_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMMLAB_GRADING", raising=False)
    monkeypatch.delenv("GEMMLAB_POOL", raising=False)
    offload.register("nothing", lambda: None)
    try:
        assert offload.pool_for_work() is None
    finally:
        offload.unregister("nothing")
    assert "nothing" not in offload.registered()


def test_importing_gemmlab_registers_the_pool_and_pulls_in_no_torch() -> None:
    code = ("import sys, gemmlab, gemmlab.results, gemmlab.offload, gemmlab.judge.protocol\n"
            "assert gemmlab.offload.registered() == ('pool',), gemmlab.offload.registered()\n"
            "assert 'gemmlab.remote' not in sys.modules\n"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
