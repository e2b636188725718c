"""A straight line through (input tokens, network-adjusted TTFT), with t-based intervals.

Pure arithmetic, no numpy: ordinary least squares, the slope's and intercept's standard
errors from the residuals, and 95 % intervals from Student's t with n − 2 degrees of
freedom (the repeats at each size are what the residuals measure).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Line", "fit_line", "t95"]

#: Student's t, two-sided 95 %, by degrees of freedom (1-30); past 30, 1.96 + 2.4/df.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t95(df: int) -> float:
    """The two-sided 95 % quantile of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        return math.inf
    return _T95[df - 1] if df <= len(_T95) else 1.96 + 2.4 / df


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """y = intercept + slope × x, with each one's 95 % half-width and the fit's R²."""

    intercept: float
    slope: float
    intercept_hw: float  # ± this, 95 %
    slope_hw: float
    r2: float | None  # None when y does not vary at all
    residual_sd: float
    n: int


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Line | None:
    """Least squares through the points; None with fewer than 3 points or one x only."""
    n = len(xs)
    if n != len(ys) or n < 3:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = my - slope * mx
    sse = sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    syy = sum((y - my) ** 2 for y in ys)
    s2 = sse / (n - 2) if n > 2 else math.inf
    se_slope = math.sqrt(s2 / sxx)
    se_intercept = math.sqrt(s2 * (1 / n + mx * mx / sxx))
    t = t95(n - 2)
    return Line(
        intercept=intercept,
        slope=slope,
        intercept_hw=t * se_intercept,
        slope_hw=t * se_slope,
        r2=None if syy <= 0 else 1 - sse / syy,
        residual_sd=math.sqrt(s2),
        n=n,
    )
