"""first_output: the first answer text a user sees, beside ttft (the first content of any
kind), from recorded streams fed through the real ingest, one read per event."""

from __future__ import annotations

from pathlib import Path

import pytest

from promptpath.core.analysis import compute, headline, output_note
from promptpath.core.series import sample_of
from promptpath.core.slo import metric_names, parse_slo
from promptpath.core.timeline import Timeline
from promptpath.options import Provider
from promptpath.report.json import timeline_json
from promptpath.tracer.ingest import BodyIngest

STREAMS = Path(__file__).resolve().parent.parent / "data" / "streams"
MS = 1_000_000


def ingested(name: str, provider: Provider, step_ms: float = 100.0) -> Timeline:
    """The recorded stream, one SSE message per read, ``step_ms`` apart from 1 s on."""
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.milestones["request_sent"] = 500 * MS
    ingest = BodyIngest(tl, provider)
    raw = (STREAMS / name).read_bytes().replace(b"\r\n", b"\n")
    pieces = [p + b"\n\n" for p in raw.split(b"\n\n") if p]
    for i, piece in enumerate(pieces):
        ingest.feed(piece, 1000 * MS + int(i * step_ms * MS), i)
        while ingest.backlog:
            ingest.resume()
    ingest.finish(1000 * MS + int(len(pieces) * step_ms * MS))
    return tl


def test_reasoning_first_puts_first_output_after_ttft_by_the_reasoning_s_span() -> None:
    # A comment, the role chunk, two reasoning chunks, a comment, one more (as
    # "reasoning"), then the text (OpenRouter's DeepSeek-R1 shape): pieces 2, 3 and 5 are
    # the reasoning, 6 the answer.
    tl = ingested("openai_chat_reasoning.sse", "openai")
    m = compute(tl)
    assert m.milestones_ms["ttft"] == 1200.0
    assert m.milestones_ms["first_output"] == 1600.0
    assert m.first_output_after_ttft_ms == 400.0
    assert m.first_output_from_request_ms == 1100.0
    assert m.tokens.before_output == "reasoning"
    assert output_note(m) == "first output 1600 ms, 400 ms after the first reasoning"
    assert "first output 1600 ms, 400 ms after the first reasoning" in headline(tl, m)
    body = timeline_json(tl, m)
    assert body["first_output_ms"] == {
        "from_start": 1600.0,
        "from_request": 1100.0,
        "after_ttft": 400.0,
        "after": "reasoning",
    }
    assert body["milestones_ms"]["first_output"] == 1600.0


def test_a_lead_of_a_second_or_more_is_said_in_seconds() -> None:
    tl = ingested("cohere.sse", "cohere", step_ms=600.0)
    m = compute(tl)
    # message-start, content-start(thinking), the thinking delta (piece 2), content-end,
    # content-start(text), the text (piece 5): 3 x 600 ms apart.
    assert m.first_output_after_ttft_ms == 1800.0
    assert output_note(m) == "first output 4000 ms, 1.8 s after the first reasoning"


def test_text_first_makes_the_two_one_and_says_nothing_more() -> None:
    m = compute(ingested("openai_chat.sse", "openai"))
    assert m.milestones_ms["first_output"] == m.milestones_ms["ttft"]
    assert m.first_output_after_ttft_ms == 0.0 and m.tokens.before_output == ""
    assert output_note(m) is None


def test_a_tool_call_alone_has_no_first_output_and_says_so() -> None:
    tl = ingested("openai_chat_tools.sse", "openai")
    m = compute(tl)
    assert "ttft" in m.milestones_ms and "first_output" not in m.milestones_ms
    assert output_note(m) == "no answer text arrived (only tool)"
    out = timeline_json(tl, m)["first_output_ms"]
    assert out == {"from_start": None, "from_request": None, "after_ttft": None, "after": None}


def test_first_output_is_a_series_metric_and_an_slo() -> None:
    tl = ingested("openai_chat_reasoning.sse", "openai")
    assert sample_of(tl, 0).values["first_output"] == 1600.0
    assert {"first_output_p50", "first_output_p95", "first_output_max"} <= set(metric_names())
    slo = parse_slo("first_output_p95<1200ms")
    assert slo.metric == "first_output_p95"


@pytest.mark.parametrize("unit", ["tok/s", "days"])
def test_first_output_takes_only_a_time(unit: str) -> None:
    from promptpath.core.errors import UsageError

    with pytest.raises(UsageError):
        parse_slo(f"first_output_p95<3{unit}")
