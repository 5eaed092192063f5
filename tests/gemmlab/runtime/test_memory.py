"""gemmlab.running.memory on the CPU: guard zones notice stray stores, poison notices unwritten elements."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gemmlab.running.memory import GUARD_BYTES, GuardedMatrix, as_signed  # noqa: E402


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_guard_zones_count_stray_writes_on_each_side(dtype) -> None:
    g = GuardedMatrix((5, 7), dtype, torch.device("cpu"))
    assert g.tensor.shape == (5, 7) and g.guard * g.elem == GUARD_BYTES
    assert g.guard_writes() == (0, 0)
    g.tensor.fill_(1.0)                      # inside the matrix: not a guard write
    assert g.guard_writes() == (0, 0)
    g.buffer[g.guard - 1] = 2.0              # just before
    g.buffer[g.guard + g.numel: g.guard + g.numel + 3] = 3.0   # three just after
    assert g.guard_writes() == (1, 3)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_poison_marks_exactly_the_elements_never_written(dtype) -> None:
    g = GuardedMatrix((4, 6), dtype, torch.device("cpu"))
    g.poison()
    assert torch.isnan(g.tensor).all() and int(g.unwritten().sum()) == 24
    g.tensor[1, 2] = 0.5
    g.tensor[3] = float("nan")               # a NaN the kernel computed is written, not poison
    unwritten = g.unwritten()
    assert int(unwritten.sum()) == 24 - 1 - 6
    assert not unwritten[1, 2] and not unwritten[3].any()


def test_signed_view_of_bit_patterns() -> None:
    assert as_signed(0x7FFF, 2) == 0x7FFF
    assert as_signed(0xFFFF, 2) == -1
    assert as_signed(0x80000000, 4) == -(2 ** 31)
