"""Pure statistics: percentiles, summaries, intervals, sparkline."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from promptpath.core.stats import (
    Summary,
    intervals_ms,
    percentile,
    sparkline,
    summarize,
)

MS = 1_000_000
#: Timing deadlines flake on a shared machine, and numpy's first import is slow.
NO_DEADLINE = settings(deadline=None)


# -- percentile ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([1, 2, 3, 4], 50, 2.5),  # rank 1.5 -> halfway between 2 and 3
        ([1, 2, 3, 4], 25, 1.75),  # rank 0.75
        ([1, 2, 3, 4], 90, 3.7),  # rank 2.7
        ([15, 20, 35, 40, 50], 40, 29.0),  # rank 1.6 -> 20 + 0.6 * 15
        ([10], 99, 10.0),
        ([3, 1, 2], 0, 1.0),  # unsorted input
        ([3, 1, 2], 100, 3.0),
        ([0, 10], 95, 9.5),
    ],
)
def test_percentile_hand_computed(values: list[float], q: float, expected: float) -> None:
    assert percentile(values, q) == pytest.approx(expected)


def test_percentile_rejects_empty_and_out_of_range() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)
    with pytest.raises(ValueError):
        percentile([1.0], -1)


@NO_DEADLINE
@given(
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=50),
    st.floats(0, 100),
)
def test_percentile_matches_numpy_linear(values: list[float], q: float) -> None:
    np = pytest.importorskip("numpy")
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)), abs=1e-6)


# -- summarize -------------------------------------------------------------------------
def test_summarize_hand_computed() -> None:
    s = summarize([10.0, 20.0, 30.0, 40.0, 100.0])
    assert s is not None
    # nearest rank of 5 values: p50 = ceil(2.5) = 3rd -> 30; p90, p95, p99 = 5th -> 100
    assert (s.count, s.min, s.p50, s.max, s.mean) == (5, 10.0, 30.0, 100.0, 40.0)
    assert (s.p90, s.p95, s.p99) == (100.0, 100.0, 100.0)
    assert isinstance(s, Summary)


def test_summarize_empty_is_none() -> None:
    assert summarize([]) is None


def test_summarize_single_value() -> None:
    s = summarize([7])
    assert s is not None
    assert (s.count, s.min, s.p50, s.p99, s.max, s.mean) == (1, 7.0, 7.0, 7.0, 7.0, 7.0)


# -- intervals -------------------------------------------------------------------------
def test_intervals_ms() -> None:
    assert intervals_ms([0, 1 * MS, 3 * MS, 3 * MS + 500_000]) == [1.0, 2.0, 0.5]
    assert intervals_ms([5]) == []
    assert intervals_ms([]) == []


# -- sparkline -------------------------------------------------------------------------
def test_sparkline_one_char_per_value_up_to_width() -> None:
    assert sparkline([0, 7], 10) == "▁█"
    assert sparkline([0, 1, 2, 3, 4, 5, 6, 7], 8) == "▁▂▃▄▅▆▇█"


@pytest.mark.parametrize("width", [1, 5, 17, 80])
def test_sparkline_never_exceeds_width(width: int) -> None:
    assert len(sparkline([float(i % 13) for i in range(1000)], width)) == width


def test_sparkline_keeps_a_single_stall_visible_when_downsampling() -> None:
    values = [1.0] * 999 + [500.0]
    line = sparkline(values, 10)
    assert line[-1] == "█" and set(line[:-1]) == {"▁"}


def test_sparkline_degenerate_inputs() -> None:
    assert sparkline([], 10) == ""
    assert sparkline([1, 2], 0) == ""
    assert sparkline([0, 0, 0], 3) == "▁▁▁"
    assert sparkline([5, 5], 2) == "██"


@pytest.mark.parametrize(
    ("values", "p50", "p90", "p99"),
    [
        ([1, 2, 3, 4], 2.0, 4.0, 4.0),  # p50: ceil(0.5 * 4) = rank 2, not 2.5
        ([20] * 30 + [10_000], 20.0, 20.0, 10_000.0),  # a lone pause is the p99, not 7027
        ([3, 1, 2], 2.0, 3.0, 3.0),
    ],
)
def test_summary_percentiles_are_observed_values(
    values: list[float], p50: float, p90: float, p99: float
) -> None:
    s = summarize(values)
    assert s is not None and (s.p50, s.p90, s.p99) == (p50, p90, p99)


@NO_DEADLINE
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=50))
def test_summary_percentiles_match_numpy_inverted_cdf(values: list[float]) -> None:
    np = pytest.importorskip("numpy")
    s = summarize(values)
    assert s is not None
    for q, got in ((50, s.p50), (90, s.p90), (95, s.p95), (99, s.p99)):
        expected = float(np.percentile(values, q, method="inverted_cdf"))
        assert got == pytest.approx(expected, abs=1e-6)
