"""A content policy that stops the answer: named in every channel, not an in-band error.

google-genai 3.6.1, checked by hand on loopback with a two-event stream ending in
finishReason SAFETY (and RECITATION, PROHIBITED_CONTENT, BLOCKLIST, SPII): it yielded
both chunks, the last with that finish_reason, and raised nothing. So promptpath keeps
exit 0 and says who stopped the answer, in the verdict line, the terminal and the JSON.
"""

from __future__ import annotations

import json

import pytest

from promptpath.core.analysis import compute, headline
from promptpath.core.stopped import policy_stop
from promptpath.core.timeline import Timeline
from promptpath.options import Provider
from promptpath.report.json import timeline_json
from promptpath.tracer.ingest import BodyIngest

MS = 1_000_000


def traced(provider: Provider, events: list[object]) -> Timeline:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    ingest = BodyIngest(tl, provider)
    for i, event in enumerate(events):
        data = event if isinstance(event, str) else json.dumps(event)
        ingest.feed(f"data: {data}\n\n".encode(), (100 + i) * MS, i)
    ingest.finish(200 * MS)  # raises on an error event or a truncated stream
    return tl


def gemini(text: str, reason: str | None = None) -> dict[str, object]:
    candidate: dict[str, object] = {"content": {"parts": [{"text": text}], "role": "model"}}
    if reason:
        candidate["finishReason"] = reason
    return {"candidates": [candidate]}


@pytest.mark.parametrize(
    "reason", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT", "BLOCKLIST", "SPII"]
)
def test_a_gemini_policy_finish_reason_is_named_and_not_an_error(reason: str) -> None:
    tl = traced("gemini", [gemini("Hel"), gemini("lo"), gemini("", reason)])
    assert tl.error is None and tl.stream_end == "marker"
    m = compute(tl)
    assert m.stopped is not None and (m.stopped.reason, m.stopped.tokens_before) == (reason, 2)
    said = f"answer stopped by the provider's content policy (finishReason {reason}) after 2"
    assert headline(tl, m).startswith("OK: ") and said in headline(tl, m)
    assert timeline_json(tl, m)["stream"]["stopped"] == {
        "reason": reason,
        "field": "finishReason",
        "prompt_blocked": False,
        "tokens_before": 2,
    }


def test_stop_and_max_tokens_are_no_policy_stop() -> None:
    for reason in ("STOP", "MAX_TOKENS"):
        tl = traced("gemini", [gemini("Hi"), gemini("", reason)])
        m = compute(tl)
        assert m.stopped is None and "content policy" not in headline(tl, m)


def test_a_blocked_prompt_says_the_prompt_was_refused() -> None:
    tl = traced("gemini", [{"promptFeedback": {"blockReason": "OTHER"}}])
    m = compute(tl)
    assert m.stopped is not None and m.stopped.prompt_blocked
    assert "prompt blocked by the provider's content policy (blockReason OTHER)" in headline(tl, m)


def test_azure_content_filter_finish_reason_is_named() -> None:
    # openai-python's Stream raises only on an "error" object: finish_reason
    # content_filter reaches the application as a normal last chunk.
    chunk = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}
    stop = {"choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]}
    tl = traced("azure", [chunk, stop, "[DONE]"])
    m = compute(tl)
    assert tl.error is None
    assert m.stopped is not None and (m.stopped.field, m.stopped.reason) == (
        "finish_reason",
        "content_filter",
    )


def test_anthropic_refusal_is_named() -> None:
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 3}}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "I"}},
        {"type": "message_delta", "delta": {"stop_reason": "refusal"}, "usage": {}},
        {"type": "message_stop"},
    ]
    stop = policy_stop(traced("anthropic", events).events)
    assert stop is not None and stop.reason == "refusal" and stop.tokens_before == 1
