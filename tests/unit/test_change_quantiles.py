"""core/change/quantiles.py: one place against others' percentiles (vantage's judgement)."""

from __future__ import annotations

from promptpath.core.change import judge_quantiles
from promptpath.core.change.metrics import metric


def test_a_median_above_the_others_p95_and_beyond_the_floor_is_called() -> None:
    call = judge_quantiles("connect", 45.0, [5.0, 6.0, 5.5], [8.0, 9.0, 8.5])
    assert call is not None
    assert (call.others_p50_ms, call.others_p95_ms) == (5.5, 8.5)
    assert call.excess_ms == 39.5
    assert call.floor_ms == metric("connect").floor(5.5)


def test_inside_the_others_spread_is_not_called_however_far_the_median() -> None:
    # 30 ms against others whose p95 is 40: its typical run is one they often have.
    assert judge_quantiles("connect", 30.0, [5.0, 6.0], [40.0, 41.0]) is None


def test_beyond_the_spread_but_within_the_floor_is_not_news() -> None:
    # Above every other p95, but 0.4 ms slower: under connect's floor.
    assert judge_quantiles("connect", 1.4, [1.0, 1.0], [1.2, 1.3]) is None


def test_faster_is_never_called_and_nothing_to_compare_is_nothing() -> None:
    assert judge_quantiles("tls", 2.0, [20.0, 21.0], [25.0, 26.0]) is None
    assert judge_quantiles("tls", 90.0, [], []) is None
    assert judge_quantiles("no-such-metric", 90.0, [1.0], [2.0]) is None
