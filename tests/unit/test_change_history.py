"""A watch history read as samples (core/change/history.py) and the headline of a diff
(core/change/headline.py): pure."""

from __future__ import annotations

import json
import random

import pytest

from promptpath.core.change import judge_errors, judge_many
from promptpath.core.change.facts import FactChange
from promptpath.core.change.headline import headline, signed
from promptpath.core.change.history import parse_history, parse_range


def _line(seq: int, at: str, ttft: float = 100.0) -> str:
    run = {"schema": "promptpath.run/1", "ttft_ms": {"from_start": ttft}, "error": None}
    return json.dumps({"schema": "promptpath.watch/1", "seq": seq, "at": at, "run": run})


def test_ranges_are_utc_times_of_day_and_may_wrap_midnight() -> None:
    day = parse_range("10:00-11:00")
    assert day.holds(600) and day.holds(659) and not day.holds(660) and not day.holds(599)
    night = parse_range("22:00-02:00")
    assert night.holds(23 * 60) and night.holds(60) and not night.holds(12 * 60)
    for bad in ("10-11", "25:00-26:00", "10:00", "10:00-10:00"):
        with pytest.raises(ValueError):
            parse_range(bad)


def test_a_history_picks_its_runs_by_their_utc_minute() -> None:
    lines = [
        _line(1, "2026-12-06T10:15:00.000Z"),
        _line(2, "2026-12-06T12:15:00.000+02:00"),  # 10:15 UTC
        _line(3, "2026-12-06T14:00:00.000Z"),
        _line(4, "2026-12-07T10:59:59.999Z"),  # another day, same time of day
    ]
    history = parse_history(lines)
    assert len(history.runs(parse_range("10:00-11:00"))) == 3
    assert len(history.runs(parse_range("14:00-15:00"))) == 1
    assert len(history.runs()) == 4 and not history.truncated_tail


def test_a_cut_last_line_is_skipped_but_a_bad_middle_line_is_an_error() -> None:
    cut = parse_history([_line(1, "2026-12-06T10:00:00.000Z"), '{"schema": "promptpath.wa'])
    assert cut.truncated_tail and len(cut.runs()) == 1
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        parse_history(
            [_line(1, "2026-12-06T10:00:00.000Z"), "{oops", _line(3, "2026-12-06T10:01:00Z")]
        )
    with pytest.raises(ValueError, match="names no time zone"):
        parse_history([_line(1, "2026-12-06T10:00:00")])


def test_signed_changes_read_as_a_person_writes_them() -> None:
    assert signed(412.4, "ms") == "+412 ms"
    assert signed(-3.46, "ms") == "−3.5 ms"
    assert signed(-12.0, "tok/s") == "−12.0 tok/s"
    assert signed(0.4, "share") == "+0.40"


def test_the_headline_puts_the_stage_that_explains_most_first() -> None:
    rng = random.Random(1)

    def around(centre: float) -> list[float]:
        return [rng.gauss(centre, 2) for _ in range(12)]

    metrics = judge_many({
        "dns": (around(5), around(5)),
        "connect": (around(10), around(10)),
        "wait": (around(50), around(150)),  # +100 ms
        "first_token": (around(300), around(600)),  # +300 ms
        "ttft": (around(400), around(800)),
    })  # fmt: skip
    edge = FactChange(name="edge", label="edge", before=("FRA",), after=("AMS",), severity="info",
                      note="")  # fmt: skip
    line = headline(metrics, judge_errors(0, 12, 0, 12), [edge])
    assert line.startswith("TTFT +4")
    first_token, wait = line.index("in first_token"), line.index("in wait")
    assert first_token < wait
    assert line.endswith("; DNS, connect unchanged; edge changed from FRA to AMS")
