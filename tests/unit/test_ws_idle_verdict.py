"""The idle-timeout verdict over WebSocket on given watches: open to the cap, cut with pings
that help, cut again at the same threshold with pings, a failed re-test, a failed priming."""

from __future__ import annotations

import pytest

from promptpath.core.findings import Verdict
from promptpath.probes.idle_timeout.ws_verdict import QuietWatch, judge, ping_interval

pytestmark = pytest.mark.unit

S = 1_000_000_000


def watch(
    cut_after_s: float | None, *, every: float | None = None, cap: float = 10.0
) -> QuietWatch:
    return QuietWatch(
        cap_s=cap,
        ping_every_s=every,
        quiet_from_ns=5 * S,
        closed_ns=None if cut_after_s is None else 5 * S + int(cut_after_s * S),
        close_by=None if cut_after_s is None else "eof",
        close_code=None if cut_after_s is None else 1006,
        server="nginx/1.22.1",
    )


def test_a_socket_open_to_the_cap_passes() -> None:
    finding = judge(watch(None), None)
    assert finding.verdict is Verdict.PASS and "10 s" in finding.summary


def test_a_cut_that_pings_prevent_warns_with_the_threshold_and_the_ping_advice() -> None:
    finding = judge(watch(3.0), watch(None, every=1.0, cap=6.0))
    assert finding.verdict is Verdict.WARN
    assert finding.evidence["threshold_s"] == 3.0 and finding.evidence["pings_help"] is True
    assert "after 3.0 s without a Close frame" in finding.summary
    assert "counts pings as activity" in finding.summary
    assert any("shorter than 3 s" in a for a in finding.advice)


def test_a_cut_at_the_same_threshold_despite_pings_fails() -> None:
    finding = judge(watch(3.0), watch(3.2, every=1.0, cap=6.0))
    assert finding.verdict is Verdict.FAIL and finding.evidence["pings_help"] is False
    assert "does not count pings" in finding.summary


def test_a_pinged_socket_that_lasted_well_past_the_threshold_counts_as_helped() -> None:
    finding = judge(watch(3.0), watch(5.9, every=1.0, cap=6.0))
    assert finding.evidence["pings_help"] is True


def test_a_failed_retest_leaves_the_cut_as_a_warning_without_the_ping_answer() -> None:
    failed = QuietWatch(cap_s=6.0, ping_every_s=1.0, error="refused")
    finding = judge(watch(3.0), failed)
    assert finding.verdict is Verdict.WARN and "was not found" in finding.summary
    assert finding.evidence["pings_help"] is None


def test_a_failed_priming_response_is_an_error() -> None:
    finding = judge(QuietWatch(cap_s=10.0, error="WebSocket upgrade refused: 401"), None)
    assert finding.verdict is Verdict.ERROR


@pytest.mark.parametrize(("threshold", "every"), [(0.3, 0.2), (3.0, 1.0), (60.0, 10.0)])
def test_pings_go_a_third_of_the_threshold_apart_within_bounds(
    threshold: float, every: float
) -> None:
    assert ping_interval(threshold) == every
