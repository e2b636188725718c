"""The rolling band (core/change/band.py): median ± k·MAD, held for two values."""

from __future__ import annotations

import random
import statistics

import pytest

from promptpath.core.change.band import (
    MAD_TO_SIGMA,
    P10_P90_SIGMAS,
    BandRule,
    BandTracker,
    band_of,
)


def test_band_is_median_plus_minus_k_scaled_mads() -> None:
    values = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0, 100.0, 18.0, 13.0]
    band = band_of(values, BandRule(k=3.0, floor=0.0, share=0.0))
    assert band is not None
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    assert band.median == median == 14.0
    assert band.mad == mad == 2.0
    # p10 = 11, p90 = 18 by nearest rank: (18 - 11) / 2.5631 = 2.73 < 1.4826 * 2 = 2.97
    assert band.sigma == pytest.approx(MAD_TO_SIGMA * mad)
    assert band.high == pytest.approx(median + 3.0 * MAD_TO_SIGMA * mad)
    assert band.low == pytest.approx(median - 3.0 * MAD_TO_SIGMA * mad)


def test_a_bimodal_window_is_not_judged_by_its_collapsed_mad() -> None:
    # 60 % at 0.1 ms, 40 % at 5-12 ms: the loaded machine's loopback connect.
    values = [0.1] * 18 + [5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 6.5, 7.5, 8.5, 9.5]
    band = band_of(values, BandRule(k=4.0, floor=0.0, share=0.0))
    assert band is not None and band.mad == 0.0
    p10, p90 = sorted(values)[2], sorted(values)[26]
    assert band.sigma == pytest.approx((p90 - p10) / P10_P90_SIGMAS)
    assert band.high > 12.0  # the slow mode is inside the band


def test_band_never_narrower_than_its_floors() -> None:
    flat = [0.4] * 10
    band = band_of(flat, BandRule(floor=10.0, share=0.0))
    assert band is not None and band.high == pytest.approx(10.4)
    big = [1000.0] * 10
    band = band_of(big, BandRule(floor=10.0, share=0.1))
    assert band is not None and band.high == pytest.approx(1100.0)


def test_no_band_before_min_samples() -> None:
    assert band_of([1.0] * 7, BandRule(min_samples=8)) is None
    tracker = BandTracker(BandRule(min_samples=8), window=10)
    assert all(tracker.feed(v) is None for v in [1.0] * 7 + [500.0])


def _steady(tracker: BandTracker, n: int, rng: random.Random) -> list[object]:
    return [c for c in (tracker.feed(rng.gauss(100.0, 3.0)) for _ in range(n)) if c]


def test_one_outlier_is_noise_two_in_a_row_a_change() -> None:
    rng = random.Random(1)
    tracker = BandTracker(window=30)
    assert _steady(tracker, 30, rng) == []
    assert tracker.feed(400.0) is None  # one slow trace: not yet
    assert tracker.feed(100.0) is None  # and back: nothing is called
    assert tracker.feed(400.0) is None
    crossing = tracker.feed(410.0)
    assert crossing is not None and crossing.change == "above"
    assert crossing.held == (400.0, 410.0) and crossing.band.high < 400.0
    assert tracker.state == 1
    assert tracker.feed(420.0) is None  # held: not called again


def test_change_comes_back_against_the_band_it_left() -> None:
    rng = random.Random(2)
    tracker = BandTracker(window=30)
    _steady(tracker, 30, rng)
    tracker.feed(400.0)
    left = tracker.feed(400.0)
    assert left is not None and left.change == "above"
    assert tracker.feed(101.0) is None
    back = tracker.feed(99.0)
    assert back is not None and back.change == "back" and back.band == left.band
    assert tracker.state == 0


def test_a_lasting_change_settles_after_a_window() -> None:
    rng = random.Random(3)
    tracker = BandTracker(window=20)
    _steady(tracker, 20, rng)
    calls = [c for c in (tracker.feed(rng.gauss(300.0, 3.0)) for _ in range(25)) if c]
    assert [c.change for c in calls] == ["above", "settled"]
    assert calls[1].band.low < 300.0 < calls[1].band.high
    assert _steady_at(tracker, 300.0, 30, rng) == []


def _steady_at(tracker: BandTracker, mean: float, n: int, rng: random.Random) -> list[object]:
    return [c for c in (tracker.feed(rng.gauss(mean, 3.0)) for _ in range(n)) if c]


def test_drop_below_is_called_too() -> None:
    tracker = BandTracker(window=10)
    for _ in range(10):
        tracker.feed(500.0)
    tracker.feed(100.0)
    crossing = tracker.feed(100.0)
    assert crossing is not None and crossing.change == "below"


def test_steady_noise_calls_nothing_in_10000_values() -> None:
    # Heavy-tailed noise: 3% of values 5x the median (a busy core), alone each time.
    rng = random.Random(4)
    tracker = BandTracker(window=30)
    calls = 0
    for i in range(10_000):
        value = rng.gauss(50.0, 2.0)
        if rng.random() < 0.03 and i % 2 == 0:
            value *= 5
        calls += tracker.feed(value) is not None
    assert calls == 0
    assert len(tracker.values) == 30


def test_reset_forgets_the_window_and_state() -> None:
    tracker = BandTracker(window=10)
    for _ in range(10):
        tracker.feed(1.0)
    tracker.feed(900.0)
    tracker.feed(900.0)
    assert tracker.state == 1
    tracker.reset()
    assert tracker.state == 0 and len(tracker.values) == 0 and tracker.band() is None


def test_rule_refuses_nonsense() -> None:
    with pytest.raises(ValueError):
        BandRule(k=0)
    with pytest.raises(ValueError):
        BandTracker(BandRule(min_samples=8), window=5)


def test_only_the_worse_side_is_a_change_when_asked() -> None:
    times = BandTracker(BandRule(worse=1), window=30)
    for _ in range(30):
        times.feed(500.0)
    assert times.feed(100.0) is None and times.feed(100.0) is None  # faster: good news
    times.feed(900.0)
    crossing = times.feed(900.0)
    assert crossing is not None and crossing.change == "above"
    rate = BandTracker(BandRule(worse=-1, floor=2.0), window=30)
    for _ in range(30):
        rate.feed(200.0)
    assert rate.feed(2000.0) is None and rate.feed(2000.0) is None
    rate.feed(20.0)
    dropped = rate.feed(20.0)
    assert dropped is not None and dropped.change == "below"
