"""The statistics the judgement rests on, in pure Python (no numpy, no scipy).

- ``mann_whitney``: the two-sided Wilcoxon–Mann–Whitney rank test of "one side tends to be
  larger". Exact null distribution (the Mann–Whitney recursion) when both sides are small
  and untied; otherwise the normal approximation with the tie correction and a continuity
  correction (Hollander & Wolfe, *Nonparametric Statistical Methods*, 3rd ed., §4.1).
- ``median_ci``: a distribution-free standard error of one median from two order
  statistics, and ``median_difference_ci`` the interval of a difference of two medians
  built from them (Bonett & Price, "Statistical inference for a linear function of
  medians", Psychological Methods 7(3), 2002). Deterministic and O(n log n): a percentile
  bootstrap of the same interval costs ~1 s per metric at 1,000 runs a side in Python,
  and would need a seeded generator to repeat itself; this needs neither.
- ``fisher_exact``: the two-sided Fisher exact test of two failure counts (error rates).
- ``smallest_p``: the smallest two-sided p-value the rank test can reach with n runs a
  side, which says how many repeats a question needs before the test can answer it.

Ranks, not means: latencies are skewed and carry outliers (one retransmission is a 200 ms
tail), so a mean-based test is led by one run; a rank test is not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

__all__ = [
    "RankTest",
    "fisher_exact",
    "mann_whitney",
    "median",
    "median_difference_ci",
    "median_se",
    "smallest_p",
]

_NORMAL = NormalDist()
#: Both sides at most this long and no ties: the exact null distribution (≤ 625 cells of U
#: times 25 × 25 steps, well under a millisecond). Past it the normal approximation is
#: used: at 25 a side it was within 0.004 of the exact p-value over 300 random pairs of
#: samples (tests/unit/test_change_ranks.py), and it only gets closer as n grows.
EXACT_MAX = 25


@dataclass(frozen=True, slots=True, kw_only=True)
class RankTest:
    """One Mann–Whitney test: U of the first sample, the two-sided p-value, and how."""

    u: float
    p_value: float
    method: str  # "exact" | "normal" | "identical"


def median(values: Sequence[float]) -> float:
    """The middle value (the mean of the two middle ones for an even count)."""
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of an empty sequence")
    mid = n // 2
    return float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def _midranks(pooled: list[tuple[float, int]]) -> tuple[list[float], list[int]]:
    """Ranks 1..N of the pooled sorted values, ties sharing their mean rank; tie group sizes."""
    ranks = [0.0] * len(pooled)
    ties: list[int] = []
    i = 0
    while i < len(pooled):
        j = i
        while j + 1 < len(pooled) and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        rank = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[k] = rank
        if j > i:
            ties.append(j - i + 1)
        i = j + 1
    return ranks, ties


@lru_cache(maxsize=64)
def _exact_counts(n: int, m: int) -> tuple[int, ...]:
    """Number of arrangements of n X's and m Y's giving each U = 0..n·m (no ties)."""
    # counts[j][u] for the current n': arrangements of n' X's and j Y's with U == u.
    prev = [[1] for _ in range(m + 1)]  # n' = 0: U is 0 whatever j is
    for i in range(1, n + 1):
        cur: list[list[int]] = [[1] + [0] * 0]  # j = 0: every X beats no Y, U == 0
        for j in range(1, m + 1):
            size = i * j + 1
            row = [0] * size
            # The largest value is an X (it beats all j Y's) or a Y (it adds nothing).
            for u, c in enumerate(prev[j]):
                row[u + j] += c
            for u, c in enumerate(cur[j - 1]):
                row[u] += c
            cur.append(row)
        prev = cur
    return tuple(prev[m])


def mann_whitney(
    first: Sequence[float], second: Sequence[float], *, exact_max: int = EXACT_MAX
) -> RankTest:
    """Two-sided Mann–Whitney U test of ``first`` against ``second`` (each ≥ 1 value); the
    exact distribution when both are at most ``exact_max`` long and untied."""
    n, m = len(first), len(second)
    if n == 0 or m == 0:
        raise ValueError("mann_whitney needs values on both sides")
    pooled = sorted([(float(v), 0) for v in first] + [(float(v), 1) for v in second])
    ranks, ties = _midranks(pooled)
    r1 = math.fsum(r for r, (_, side) in zip(ranks, pooled, strict=True) if side == 0)
    u = r1 - n * (n + 1) / 2.0
    mean_u = n * m / 2.0
    total = n + m
    tie_term = sum(t**3 - t for t in ties)
    var_u = n * m / 12.0 * ((total + 1) - tie_term / (total * (total - 1) if total > 1 else 1))
    if var_u <= 0.0:
        return RankTest(u=u, p_value=1.0, method="identical")
    if not ties and n <= exact_max and m <= exact_max:
        counts = _exact_counts(n, m)
        whole = math.comb(total, n)
        low = round(min(u, n * m - u))
        tail = sum(counts[: low + 1]) / whole
        return RankTest(u=u, p_value=min(1.0, 2.0 * tail), method="exact")
    z = (abs(u - mean_u) - 0.5) / math.sqrt(var_u)
    p = 2.0 * (1.0 - _NORMAL.cdf(max(0.0, z)))
    return RankTest(u=u, p_value=min(1.0, p), method="normal")


def smallest_p(n: int, m: int) -> float:
    """The smallest two-sided p-value ``mann_whitney`` can give with n and m untied runs:
    every run of one side beyond every run of the other."""
    if n == 0 or m == 0:
        return 1.0
    ways = math.comb(n + m, n)
    # Past ~10^300 arrangements (500 a side) the float is 0: as far as any α is concerned.
    return 0.0 if ways.bit_length() > 1000 else min(1.0, 2.0 / ways)


@lru_cache(maxsize=256)
def _binom_cdf_half(n: int, k: int) -> float:
    """P(Binomial(n, 1/2) ≤ k), summed in floats through log-gamma: math.comb's integers
    for n = 1,000 cost ~40 ms a call."""
    if k < 0:
        return 0.0
    base = math.lgamma(n + 1) - n * math.log(2.0)
    return math.fsum(
        math.exp(base - math.lgamma(i + 1) - math.lgamma(n - i + 1)) for i in range(min(k, n) + 1)
    )


def median_se(values: Sequence[float]) -> float:
    """Distribution-free standard error of a sample's median (Bonett & Price 2002).

    The order statistics x(c) and x(n−c+1), c = round(n/2 − √n) (at least 1), bracket the
    median with a coverage the binomial gives exactly; dividing their distance by twice
    that coverage's normal quantile gives the standard error. One value: 0 (no spread seen).
    """
    n = len(values)
    if n < 2:
        return 0.0
    ordered = sorted(values)
    c = max(1, round(n / 2.0 - math.sqrt(n)))
    coverage = 1.0 - 2.0 * _binom_cdf_half(n, c - 1)
    z = _NORMAL.inv_cdf((1.0 + coverage) / 2.0)
    return (ordered[n - c] - ordered[c - 1]) / (2.0 * z)


def median_difference_ci(
    before: Sequence[float], after: Sequence[float], confidence: float
) -> tuple[float, float]:
    """Interval for median(after) − median(before) at ``confidence`` (Bonett & Price)."""
    delta = median(after) - median(before)
    z = _NORMAL.inv_cdf((1.0 + confidence) / 2.0)
    half = z * math.sqrt(median_se(before) ** 2 + median_se(after) ** 2)
    return delta - half, delta + half


def _log_hyper(k: int, row1: int, row2: int, col1: int) -> float:
    """log P(X = k) for the hypergeometric count in the first cell of a 2×2 table."""
    total = row1 + row2

    def lcomb(a: int, b: int) -> float:
        return math.lgamma(a + 1) - math.lgamma(b + 1) - math.lgamma(a - b + 1)

    return lcomb(row1, k) + lcomb(row2, col1 - k) - lcomb(total, col1)


def fisher_exact(failed_a: int, n_a: int, failed_b: int, n_b: int) -> float:
    """Two-sided Fisher exact p-value of failure counts ``failed_a``/``n_a`` vs ``failed_b``/``n_b``
    (the tables as likely or less likely than the one seen, summed)."""
    if n_a == 0 or n_b == 0:
        return 1.0
    col1 = failed_a + failed_b
    lo, hi = max(0, col1 - n_b), min(n_a, col1)
    seen = _log_hyper(failed_a, n_a, n_b, col1)
    p = 0.0
    for k in range(lo, hi + 1):
        lp = _log_hyper(k, n_a, n_b, col1)
        if lp <= seen + 1e-9:
            p += math.exp(lp)
    return min(1.0, p)
