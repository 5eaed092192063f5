"""gemmlab.checking.integrity on the CPU: library calls are seen, grading mode is read, messages say what to do."""
from __future__ import annotations

import pytest

from gemmlab.checking.integrity import grading_mode, late_work_message, library_guard, library_message

torch = pytest.importorskip("torch")


def test_library_guard_records_torch_computation_and_not_data_movement() -> None:
    A, B = torch.randn(4, 3), torch.randn(5, 3)
    with library_guard() as seen:                          # what a launcher does around its kernel
        D = torch.empty(4, 5)
        D.fill_(float("nan"))
        A.contiguous().view(-1).narrow(0, 1, 2).clone()
        D.copy_(torch.zeros_like(D).t().t())
        A.half().float()
        torch.nn.functional.pad(A, (0, 5))                 # padding to a tile multiple is data movement
        torch.cat([A, torch.zeros(4, 2)], 1)
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


@pytest.mark.parametrize("product", [
    lambda A, B: (A[:, None, :] * B[None, :, :]).sum(-1),                       # broadcast multiply and sum
    lambda A, B: torch.stack([(A * b).sum(1) for b in B], 1),                     # row by row
    lambda A, B: torch.zeros(A.shape[0], B.shape[0]).index_add_(1, torch.arange(B.shape[0]), (A @ B.T)),
    lambda A, B: (A.unsqueeze(1) * B).cumsum(-1)[..., -1],                        # a scan's last element
    lambda A, B: torch.nn.functional.conv1d(A[None], B[:, :, None].transpose(1, 2).transpose(1, 2)),
])
def test_any_torch_arithmetic_is_seen(product) -> None:
    """Not a list of GEMM-like operators: whatever computes in torch is caught, as a class."""
    A, B = torch.randn(4, 3), torch.randn(5, 3)
    with library_guard() as seen:
        try:
            product(A, B)
        except RuntimeError:  # a shape the operator refuses still ran through the guard first
            pass
    assert seen, "torch computed and the guard saw nothing"


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


def test_a_copy_kernels_launcher_may_not_copy_with_torch_even_one_element_at_a_time() -> None:
    """NO_COPIES (check_copy): copies, clones and joins are out, and so are element-wise copies through fill_ with a
    tensor's value or through .item(); allocation, views and plain fills stay allowed."""
    import torch

    from gemmlab.checking.integrity import NO_COPIES, library_guard

    src, dst = torch.randn(4, 4), torch.empty(4, 4)
    for copy in (lambda: dst.copy_(src), lambda: dst[0].fill_(src[0, 0]), lambda: dst[0].fill_(src[0, 0].item()),
                 lambda: torch.cat([src, src])):
        with library_guard(True, NO_COPIES) as seen:
            copy()
        assert seen, copy
    with library_guard(True, NO_COPIES) as seen:
        torch.empty_like(dst).fill_(0.0)
        dst.view(16)[3:5].zero_()
    assert not seen
    with library_guard(True) as seen:      # check_gemm's guard: copies are data movement there
        dst.copy_(src)
        dst[0].fill_(src[0, 0])
    assert not seen


def test_a_watched_call_does_not_load_torchs_compiler_and_compiled_products_are_still_seen() -> None:
    """Neither watch (a graded check's, a DSL recording's) costs a ``torch._dynamo`` import (1 s of CPU per
    grading kernel); both still see what they watch for, and a product that a student hands to
    ``torch.compile`` inside the check's watch still runs its operators through it."""
    import subprocess
    import sys

    probe = ("import sys, torch\n"
             "from gemmlab.checking.integrity import library_guard\n"
             "with library_guard() as seen:\n"
             "    D = torch.zeros(3, 3); D[0, 0] = 1.0; torch.mm(D, D)\n"
             "assert seen == ['aten::mm'], seen\n"
             "from gemmlab.dsl.host_recording import H100_ATTRIBUTES, HostRecordingError\n"
             "from gemmlab.dsl.recording import probe, recording\n"
             "P = probe((4, 4), (4, 1), torch.float16, 0)\n"
             "with recording('sm_90a', H100_ATTRIBUTES, [P]) as recorder:\n"
             "    P.zero_()\n"
             "    try:\n"
             "        torch.mm(P, P)\n"
             "        print('a product computed while recording')\n"
             "    except HostRecordingError:\n"
             "        pass\n"
             "print('dynamo' if 'torch._dynamo' in sys.modules else 'no dynamo')\n"
             "with library_guard() as seen:\n"
             "    torch.compile(lambda a, b: a @ b, backend='eager')(D, D)\n"
             "print(seen)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.splitlines() == ["no dynamo", "['aten::mm']"], out.stdout + out.stderr[-2000:]
