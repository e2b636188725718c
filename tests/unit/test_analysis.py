"""Metrics from synthetic timelines: pure, exact."""

from __future__ import annotations

import dataclasses

from promptpath.core.analysis import compute, reported_usage, token_metrics
from promptpath.core.timeline import Read, StreamEvent, Timeline, Usage

MS = 1_000_000


def timeline(
    gaps_ms: list[float], *, usage: Usage | None = None, same_read: bool = False
) -> Timeline:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    t = 100 * MS
    for i, gap in enumerate([0.0, *gaps_ms]):
        t += int(gap * MS)
        tl.events.append(
            StreamEvent(
                t_ns=t,
                kind="content",
                content_type="text",
                text=f"t{i}",
                read_index=0 if same_read else i,
            )
        )
    tl.events.append(StreamEvent(t_ns=t, kind="end", usage=usage))
    tl.milestones.update({"ttft": 100 * MS, "last_token": t, "request_sent": 10 * MS})
    return tl


def test_gaps_rate_and_count_from_events() -> None:
    tok = token_metrics(timeline([20, 20, 20, 40]))
    assert tok.gaps == [20, 20, 20, 40] and tok.count == 5 and tok.count_source == "events"
    assert tok.mean_itl_ms == 25 and tok.per_second == 40
    assert tok.gap_summary is not None and tok.gap_summary.p50 == 20 and tok.gap_summary.max == 40


def test_server_count_wins_and_hidden_reasoning_is_left_out_of_the_rate() -> None:
    tok = token_metrics(timeline([10] * 4, usage=Usage(output_tokens=105, reasoning_tokens=100)))
    assert tok.count == 5 and tok.hidden_reasoning == 100 and tok.count_source == "usage"
    assert tok.mean_itl_ms == 10


def test_coalesced_events_are_counted_and_flagged() -> None:
    tl = timeline([0, 0, 0, 0], same_read=True)
    # The one read came 90 ms after the headers' read: the path held the five events.
    tl.reads += [Read(10 * MS, 200), Read(100 * MS, 1500)]
    for i, e in enumerate(tl.events):
        tl.events[i] = dataclasses.replace(e, read_index=1)
    m = compute(tl)
    assert m.tokens.coalesced == 4 and m.tokens.read_batched == 0 and m.mostly_coalesced


def test_events_our_read_loop_caught_together_are_not_coalesced() -> None:
    tl = timeline([0, 0, 0, 0], same_read=True)
    tl.reads += [Read(99 * MS, 300), Read(100 * MS, 1500)]  # 1 ms after the previous read
    for i, e in enumerate(tl.events):
        tl.events[i] = dataclasses.replace(e, read_index=1)
    m = compute(tl)
    assert m.tokens.coalesced == 0 and m.tokens.read_batched == 4 and not m.mostly_coalesced


def test_ttft_from_request_sent() -> None:
    assert compute(timeline([5])).ttft_from_request_ms == 90


def test_a_last_usage_count_that_is_impossible_is_untrusted_and_not_the_count() -> None:
    # An earlier event's count is superseded by the last word on it, impossible or not:
    # the rate comes from the events, and the report names the count as untrusted.
    tl = timeline([20, 20], usage=Usage(input_tokens=3, untrusted=("output_tokens",)))
    tl.events.insert(0, StreamEvent(t_ns=50 * MS, kind="meta", usage=Usage(output_tokens=900)))
    tok = token_metrics(tl)
    assert tok.count == 3 and tok.count_source == "events" and tok.per_second == 50
    assert tok.usage_untrusted == ("output_tokens",)
    assert reported_usage(tl) == Usage(input_tokens=3, untrusted=("output_tokens",))
    # A later possible count is believed again.
    tl.events.append(
        StreamEvent(t_ns=tl.events[-1].t_ns, kind="meta", usage=Usage(output_tokens=7))
    )
    assert token_metrics(tl).count == 7 and token_metrics(tl).usage_untrusted == ()
