"""How far apart two timings must be before the difference is more than noise.

Pure statistics on repeated measurements, no GPU: ``bench_gemm`` times a kernel and cuBLAS in
interleaved *rounds* and keeps one ratio per round (cuBLAS's time over the kernel's); this module
turns those per-round ratios into intervals and verdicts. Both intervals are distribution-free
(they assume only that rounds are independent draws from one distribution), so they hold for the
skewed, occasionally bimodal times a GPU produces, where a mean ± 2σ would not:

* :func:`median_interval`: the order-statistic interval of the median (the sign test's): the
  ``j``-th smallest to the ``j``-th largest value, with ``j`` the largest that still covers the
  median with at least the asked probability (exactly, from the binomial distribution).
* :func:`shift_interval`: the difference in location of two samples (the Hodges–Lehmann estimate,
  the median of all pairwise differences), with the exact rank-sum (Mann–Whitney) interval.

What neither covers (docs/TIMING.md): differences between runs (another boot, another GPU,
another temperature), and any bias of the timing method itself.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from gemmlab.errors import GemmlabError

#: The coverage every interval here aims for (at least).
LEVEL = 0.95
#: Above this many pairs (n·m) the rank-sum interval uses the normal approximation of U.
EXACT_PAIRS = 40_000


class NoSpreadError(GemmlabError):
    """A comparison needs repeated measurements (rounds) that a result does not carry."""


def median_interval(values: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """``(low, high, coverage)``: an interval that holds the median of the distribution ``values``
    were drawn from with probability ``coverage`` (at least ``level`` when there are 6 or more
    values; with fewer, the whole range, whose coverage is then below ``level`` and says so)."""
    xs = sorted(float(v) for v in values)
    n = len(xs)
    if n < 2:
        raise NoSpreadError("an interval needs at least two measurements (rounds).")
    j = 1
    while j + 1 <= n // 2 and _sign_coverage(n, j + 1) >= level:
        j += 1
    return xs[j - 1], xs[n - j], _sign_coverage(n, j)


def _sign_coverage(n: int, j: int) -> float:
    """P(x_(j) <= median <= x_(n+1-j)) for n independent draws: 1 - 2·P(Binomial(n, ½) < j)."""
    tail = sum(math.comb(n, i) for i in range(j)) / 2 ** n
    return 1.0 - 2.0 * tail


def shift_interval(a: Sequence[float], b: Sequence[float],
                   level: float = LEVEL) -> tuple[float, float, float, float]:
    """``(estimate, low, high, coverage)`` of the shift Δ with ``a ~ b + Δ``: the median of all
    pairwise differences ``a_i - b_j`` and the exact rank-sum interval around it."""
    xs, ys = [float(v) for v in a], [float(v) for v in b]
    n, m = len(xs), len(ys)
    if n < 2 or m < 2:
        raise NoSpreadError("a comparison needs at least two rounds on each side.")
    diffs = sorted(x - y for x in xs for y in ys)
    k, coverage = _rank_sum_cut(n, m, level)
    return statistics.median(diffs), diffs[k - 1], diffs[n * m - k], coverage


def _rank_sum_cut(n: int, m: int, level: float) -> tuple[int, float]:
    """The largest k >= 1 with 1 - 2·P(U <= k-1) >= level, and that coverage (k = 1 when none is)."""
    total = n * m
    if total > EXACT_PAIRS:
        cdf = _normal_u_cdf(n, m)
    else:
        counts = _u_counts(n, m)
        ways = math.comb(n + m, n)
        running, table = 0, []
        for c in counts:
            running += c
            table.append(running / ways)
        cdf = lambda u: table[u] if u >= 0 else 0.0  # noqa: E731
    k = 1
    while k + 1 <= total // 2 and 1.0 - 2.0 * cdf(k) >= level:
        k += 1
    return k, 1.0 - 2.0 * cdf(k - 1)


def _u_counts(n: int, m: int) -> list[int]:
    """How many of the C(n+m, n) orderings give each value 0..n·m of the Mann–Whitney U: the
    coefficients of the Gaussian binomial [n+m choose n](q) = Π_{i=1..n} (1 - q^(m+i)) / (1 - q^i)."""
    poly = [1] + [0] * (n * m)
    for i in range(1, n + 1):
        step = m + i
        for u in range(len(poly) - 1, step - 1, -1):     # times (1 - q^(m+i))
            poly[u] -= poly[u - step]
        for u in range(i, len(poly)):                    # divided by (1 - q^i)
            poly[u] += poly[u - i]
    return poly


def _normal_u_cdf(n: int, m: int):
    mean, sd = n * m / 2.0, math.sqrt(n * m * (n + m + 1) / 12.0)
    return lambda u: 0.5 * (1.0 + math.erf((u + 0.5 - mean) / (sd * math.sqrt(2.0))))


@dataclass(frozen=True)
class Comparison:
    """How much faster ``subject`` is than ``reference`` (a ratio of speeds), with its interval.

    ``within_noise`` is True when the interval holds 1.0: this run cannot tell the two apart."""

    subject: str
    reference: str
    ratio: float            #: subject's speed / reference's speed (1.02: 2 % faster)
    low: float
    high: float
    coverage: float
    method: str

    @property
    def within_noise(self) -> bool:
        return self.low <= 1.0 <= self.high

    @property
    def verdict(self) -> str:
        """'within noise', 'faster' or 'slower' (the latter two beyond the noise)."""
        if self.within_noise:
            return "within noise"
        return "faster" if self.low > 1.0 else "slower"

    def __str__(self) -> str:
        head = (f"{self.subject} runs at {self.ratio:.3f}× {self.reference}'s speed "
                f"({interval_text(self.low, self.high, self.coverage)}, {self.method})")
        if self.within_noise:
            return head + f": within noise, this run cannot tell {self.subject} from {self.reference}."
        return head + f": {self.verdict}, beyond the noise."

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(str(self))


def interval_text(low: float, high: float, coverage: float) -> str:
    """'96% interval 0.965–0.979': the coverage rounded down, so it never overstates."""
    return f"{math.floor(coverage * 100 + 1e-9):d}% interval {low:.3f}–{high:.3f}"


def against_one(subject: str, reference: str, values: Sequence[float], level: float = LEVEL,
                method: str = "") -> Comparison:
    """``values`` (per-round ratios of speeds, subject over reference) against parity."""
    low, high, coverage = median_interval(values, level)
    return Comparison(subject, reference, statistics.median(values), low, high, coverage,
                      method or f"median of {len(values)} rounds")


def between(subject: str, reference: str, a: Sequence[float], b: Sequence[float], level: float = LEVEL,
            method: str = "") -> Comparison:
    """Two samples of per-round ratios to a common yardstick (cuBLAS), compared: the ratio
    ``a / b`` from the shift of their logarithms."""
    if min(list(a) + list(b), default=0.0) <= 0:
        raise GemmlabError("ratios to compare must be positive numbers.")
    shift, low, high, coverage = shift_interval([math.log(v) for v in a], [math.log(v) for v in b], level)
    return Comparison(subject, reference, math.exp(shift), math.exp(low), math.exp(high), coverage,
                      method or f"{len(a)} and {len(b)} rounds, rank-sum interval")


__all__ = ["EXACT_PAIRS", "LEVEL", "Comparison", "NoSpreadError", "against_one", "between", "interval_text",
           "median_interval", "shift_interval"]
