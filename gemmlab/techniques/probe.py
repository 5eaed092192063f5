"""Which output tile each CTA computes, measured on the GPU from the real kernel: the raster order.

Why: the order in which CTAs take their tiles (row-major, or grouped for L2 reuse) is arithmetic on
``blockIdx``, decided by values the machine code alone cannot evaluate. So the probe asks the kernel
itself: it runs the kernel with only its first ``k`` CTAs, on an output filled with NaN, for
``k = 1, 2, …``; the tile that stops being NaN when CTA ``k - 1`` joins is the tile CTA ``k - 1``
computes. Nothing but the kernel under test runs, on the judge's own tensors: a C++ kernel through a
``launch(ctas, A, B, D)`` the test writes around it, a CuTe DSL kernel through its recorded launch
replayed with a smaller grid (in the grader's judge, the plan its kernel recorded).

Needs a GPU (``gemmlab.require_gpu``); a kernel that keeps computing tiles after its own (a persistent
kernel, whose tiles depend on the grid size) cannot be probed this way.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..errors import GemmlabError, LaunchError
from gemmlab.running.gpu import require_gpu
from .report import TechniqueError


@dataclass(frozen=True)
class TileOrder:
    """``order[c]`` is the tile ``(m, n)`` CTA ``c`` computed, for a ``tiles_m × tiles_n`` grid of tiles."""

    order: tuple[tuple[int, int], ...]
    tiles_m: int
    tiles_n: int

    def compare(self, expected: Callable[[int], tuple[int, int]], what: str = "your kernel") -> str | None:
        """None if CTA ``c`` computes ``expected(c)`` for every ``c``, else a sentence about the first that does not."""
        for c, tile in enumerate(self.order):
            want = tuple(int(v) for v in expected(c))
            if tile != want:
                return (f"{what}: CTA {c} computes tile {tile} of the {self.tiles_m} x {self.tiles_n} grid of tiles, "
                        f"where the order asked for gives it tile {want}.")
        return None

    def require(self, expected: Callable[[int], tuple[int, int]], what: str = "your kernel") -> "TileOrder":
        """Raise :class:`TechniqueError` unless every CTA computes the tile ``expected(cta)``."""
        problem = self.compare(expected, what)
        if problem:
            raise TechniqueError(problem + " The tiles are all computed, in another order: compute each CTA's tile "
                                           "from blockIdx with the grouped order of the exercise.")
        return self


def probe_tile_order(fn: Any, shape: tuple[int, int, int], tile: tuple[int, int],
                     launch: Callable[[int, Any, Any, Any], None] | None = None, convention: str = "tn",
                     dtype: Any = None) -> TileOrder:
    """Run ``fn`` on an ``M × N × K`` problem (whole tiles of ``tile = (BM, BN)``) with 1, 2, … CTAs and return
    which tile each CTA computed. ``launch(ctas, A, B, D)`` launches a C++ kernel with a grid of ``ctas`` CTAs;
    without it ``fn`` is a CuTe DSL kernel or launcher whose one launch is recorded and replayed with the smaller
    grid. ``convention``: "tn" (``fn(A, B, D)``, B is N×K) or "nn" (``fn(A, B, C, alpha, beta)``, B is K×N)."""
    import torch

    require_gpu("Probing which tile each CTA computes")
    M, N, K = shape
    BM, BN = tile
    if M % BM or N % BN:
        raise LaunchError(f"probe_tile_order needs whole tiles: {M} x {N} is not a multiple of {BM} x {BN}.")
    dtype = dtype or torch.float16
    A = torch.randn(M, K, device="cuda", dtype=dtype)
    B = torch.randn(N, K, device="cuda", dtype=dtype) if convention == "tn" else torch.randn(K, N, device="cuda", dtype=dtype)
    D = torch.empty(M, N, device="cuda", dtype=dtype)
    tiles_m, tiles_n = M // BM, N // BN
    run = launch if launch is not None else _replaying(fn, A, B, D, convention)
    order: list[tuple[int, int]] = []
    done = torch.zeros(tiles_m, tiles_n, dtype=torch.bool)
    for ctas in range(1, tiles_m * tiles_n + 1):
        D.fill_(float("nan"))
        run(ctas, A, B, D)
        torch.cuda.synchronize()
        written = (~torch.isnan(D)).view(tiles_m, BM, tiles_n, BN).any(dim=3).any(dim=1).cpu()
        new = (written & ~done).nonzero().tolist()
        if len(new) != 1 or bool((done & ~written).any()):
            raise TechniqueError(f"with {ctas} CTAs your kernel wrote {int(written.sum())} tiles where {ctas} "
                                 "were expected (one tile per CTA, each CTA the same tile whatever the grid): "
                                 "the probe cannot tell which tile each CTA computes.")
        order.append((int(new[0][0]), int(new[0][1])))
        done |= written
    return TileOrder(tuple(order), tiles_m, tiles_n)


def _replaying(fn: Any, A: Any, B: Any, D: Any, convention: str) -> Callable[[int, Any, Any, Any], None]:
    """A ``launch(ctas, ...)`` for a DSL kernel: its recorded plan replayed with a grid of ``ctas``."""
    from ..judge.dsl_replay import Launch, Replay
    from .guards import in_judge_answer
    from .images import record_plan

    args = (A, B, D) if convention == "tn" else (A, B, D, 1.0, 0.0)
    if in_judge_answer(fn):
        from gemmlab.answers.stand_ins import recorded_plan

        plan = recorded_plan(fn, args)
    else:
        plan = record_plan(fn, args)
    replay = Replay(plan, 3)
    launches = [s for s in replay.steps if isinstance(s, Launch)]
    if len(launches) != 1 or launches[0].cluster != (1, 1, 1) or launches[0].grid[1:] != (1, 1):
        raise GemmlabError("probe_tile_order replays one launch of a 1-D grid without clusters; this call made "
                           f"{len(launches)} launch(es).")

    def run(ctas: int, a: Any, b: Any, d: Any) -> None:
        replay([a, b, d], grid=(ctas, 1, 1))

    return run


__all__ = ["TileOrder", "probe_tile_order"]
