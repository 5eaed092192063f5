"""gemmlab.integrity on the CPU: library calls are seen, grading mode is read, messages say what to do."""
from __future__ import annotations

import pytest

from gemmlab.integrity import grading_mode, late_work_message, library_guard, library_message

torch = pytest.importorskip("torch")


def test_library_guard_records_matrix_products_and_nothing_else() -> None:
    A, B = torch.randn(4, 3), torch.randn(5, 3)
    with library_guard() as seen:
        (A[:, None, :] * B[None, :, :]).sum(-1)
    assert seen == []
    with library_guard() as seen:
        torch.matmul(A, B.T)
        torch.einsum("mk,nk->mn", A, B)
    assert "aten::mm" in seen and len(seen) >= 2
    with library_guard(enabled=False) as seen:
        torch.matmul(A, B.T)
    assert seen == []
    assert "instead of computing the product in your own kernel" in library_message(["aten::mm", "aten::mm"])
    assert library_message(["aten::mm", "aten::mm"]).count("aten::mm") == 1


def test_grading_mode_follows_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("GEMMLAB_GRADING", "1")
    assert grading_mode()
    monkeypatch.setenv("GEMMLAB_GRADING", "0")
    assert not grading_mode()
    monkeypatch.delenv("GEMMLAB_GRADING")
    assert not grading_mode()


def test_late_work_message_counts_and_says_how_to_launch() -> None:
    assert late_work_message(1).startswith("1 element of the output changed after your function returned")
    text = late_work_message(1_000_000)
    assert text.startswith("1,000,000 elements") and "torch's current stream" in text and "stream=stream" in text
