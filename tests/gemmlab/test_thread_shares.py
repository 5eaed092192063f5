"""gemmlab.checking.thread_shares on the CPU: a stand-in kernel that writes D by an ownership map shows each
thread's share, and one whose writes depend on the thread count is refused."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gemmlab.checking.thread_shares import MARK, ThreadShareError, thread_shares, written_elements

SHAPE = (8, 4, 2)


def _owner_launch(owner: np.ndarray):
    """A stand-in kernel: thread t writes the elements with owner == t (any value)."""
    def launch(A, B, D, threads):
        mask = torch.from_numpy(owner < threads)
        D[mask] = 1.5
    return launch


def test_written_elements_marks_what_a_launch_stores() -> None:
    owner = np.arange(32).reshape(8, 4)
    got = written_elements(_owner_launch(owner), SHAPE, 5, device="cpu")
    assert got.dtype == bool and np.array_equal(got, owner < 5)


def test_a_stored_nan_counts_as_written() -> None:
    def launch(A, B, D, threads):
        D[0, 0] = float("nan")
    got = written_elements(launch, SHAPE, 1, device="cpu")
    assert got[0, 0] and got.sum() == 1
    assert MARK == 0x7FBADBAD


def test_thread_shares_are_the_owners_elements() -> None:
    rng = np.random.default_rng(0)
    owner = rng.permutation(32).reshape(8, 4)
    shares = thread_shares(_owner_launch(owner), SHAPE, [0, 7, 31], device="cpu")
    for t in (0, 7, 31):
        assert np.array_equal(shares[t], owner == t)
    groups = thread_shares(_owner_launch(owner), SHAPE, [0, 16], size=16, device="cpu")
    assert np.array_equal(groups[16], (owner >= 16) & (owner < 32))


def test_writes_that_depend_on_the_thread_count_are_refused() -> None:
    def launch(A, B, D, threads):   # a kernel that writes row `threads % 8` only
        D[threads % 8] = 0.0
    with pytest.raises(ThreadShareError, match="must not depend on how many threads run"):
        thread_shares(launch, SHAPE, [3], device="cpu")


@pytest.mark.parametrize("call", [
    lambda f: thread_shares(f, (8, 4), [0], device="cpu"),
    lambda f: thread_shares(f, SHAPE, [-1], device="cpu"),
    lambda f: thread_shares(f, SHAPE, [0], size=0, device="cpu"),
    lambda f: written_elements(f, SHAPE, 0, device="cpu"),
])
def test_malformed_requests_say_what_is_wrong(call) -> None:
    with pytest.raises(ThreadShareError):
        call(_owner_launch(np.zeros((8, 4), dtype=int)))
