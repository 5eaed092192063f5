"""The leaderboard's shapes and input seeds, drawn from a secret the student's process never sees.

Why: a leaderboard timed on shapes everyone knows (4096³, 8192³) rewards a kernel that recognises them
(a schedule, a tile count or a cached answer keyed on the exact size) as much as a fast one; inputs
from a known seed can be precomputed. So a leaderboard run draws, per nominal size, each of M, N and K
within ±12.5 % of it in steps of 64 (multiples of 64 keep 16-byte-aligned rows, so the kernel's fast
path is what is timed), and a seed for the inputs of each timed run, from an HMAC-SHA256 of a secret.

The secret lives in the grader's environment (:data:`SECRET_ENV`). The grader hands it to the judge
kernel, which runs the speed test, and never to the student's kernel (autograder.harness.judging),
so a hand-in cannot know the shapes before its kernel is called with them, nor the inputs ever.
Everyone in one leaderboard run gets the same shapes (the same secret and nominal size give the same
draw), so the ranking compares like with like; the instructor can reproduce a run from the secret.
Use a fresh secret for each leaderboard run (``python -c "import secrets; print(secrets.token_hex(32))"``):
the shapes appear in the records afterwards. Without a secret the draw is the nominal shapes and fresh
random inputs, as a student's own run has.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Sequence

#: The grader's environment variable holding the leaderboard's secret.
SECRET_ENV = "GEMMLAB_LEADERBOARD_SECRET"
#: Each drawn size lies within this fraction of its nominal size, on multiples of STEP.
SPREAD = 0.125
STEP = 64


@dataclass(frozen=True)
class LeaderboardRun:
    """One timed run: the nominal size it stands for, the drawn shape, the dtype, the inputs' seed (None: fresh)."""

    nominal: int
    shape: tuple[int, int, int]
    dtype: str
    seed: int | None


def _draw(key: bytes, label: str) -> int:
    """A 64-bit number from the secret ``key`` and a public label (HMAC-SHA256, the first 8 bytes)."""
    return int.from_bytes(hmac.new(key, label.encode(), hashlib.sha256).digest()[:8], "little")


def drawn_size(key: bytes, nominal: int, axis: str) -> int:
    """One of M, N, K for ``nominal``: a multiple of :data:`STEP` within :data:`SPREAD` of it."""
    steps = int(nominal * SPREAD) // STEP
    offset = _draw(key, f"size {nominal} {axis}") % (2 * steps + 1) - steps
    return int(nominal) + STEP * offset


def draw_runs(secret: str | bytes | None, sizes: Sequence[int] = (4096, 8192),
              dtypes: Sequence[str] = ("float16", "bfloat16")) -> list[LeaderboardRun]:
    """The runs of a leaderboard timing: for each nominal size and dtype, the drawn shape and seed.

    With no secret (None or empty): the nominal square shapes and no seed."""
    if not secret:
        return [LeaderboardRun(int(n), (int(n),) * 3, str(d), None) for n in sizes for d in dtypes]
    key = secret.encode() if isinstance(secret, str) else bytes(secret)
    runs = []
    for n in sizes:
        shape = tuple(drawn_size(key, int(n), axis) for axis in "MNK")
        for d in dtypes:
            runs.append(LeaderboardRun(int(n), shape, str(d), _draw(key, f"seed {n} {d}") >> 1))
    return runs


def runs(sizes: Sequence[int] = (4096, 8192), dtypes: Sequence[str] = ("float16", "bfloat16")) -> list[LeaderboardRun]:
    """:func:`draw_runs` with the secret of this process's environment (the judge's, in the grader)."""
    return draw_runs(os.environ.get(SECRET_ENV), sizes, dtypes)


__all__ = ["LeaderboardRun", "SECRET_ENV", "SPREAD", "STEP", "draw_runs", "drawn_size", "runs"]
