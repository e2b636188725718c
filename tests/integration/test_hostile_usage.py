"""Usage counts no request can have (issue 30, item 5): untrusted, never a figure.

A server (or a hop that rewrites its body) names its own token counts; promptpath divides
by them for the rate and the mean inter-token latency. Before: ``10**400`` ended the run
with OverflowError (exit 70) once the events were apart in time, ``-5`` made the JSON fail
the project's own schema (``tokens.count`` -5), and Cohere's ``1e308`` became the count.
Each case here is a real origin on loopback whose events arrive 15 ms apart, read by the
real CLI: the run exits 0, its JSON is schema-valid, the count and the rate come from the
events seen, and the impossible count is named in ``tokens.usage.untrusted``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.hostile import hostile_origin, paced

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
HUGE = "1" + "0" * 400  # 10**400: a JSON integer Python reads whole, no float holds


#: Where the raw count goes: json.dumps cannot write 10**400's digits as a number for us.
RAW = "@count@"


def _sse(*objs: dict[str, object] | str, count: str, names: tuple[str, ...] = ()) -> list[bytes]:
    out = []
    for n, obj in enumerate(objs):
        data = obj if isinstance(obj, str) else json.dumps(obj).replace(f'"{RAW}"', count)
        event = f"event: {names[n]}\n" if names else ""
        out.append(f"{event}data: {data}\n\n".encode())
    return out


def openai(count: str) -> list[bytes]:
    deltas = [
        {"choices": [{"index": 0, "delta": {"content": t}, "finish_reason": None}]} for t in "abc"
    ]
    usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": RAW}}
    return _sse(*deltas, usage, "[DONE]", count=count)


def cohere(count: str) -> list[bytes]:
    start = {"type": "message-start", "delta": {"message": {"role": "assistant"}}}
    deltas = [
        {"type": "content-delta", "index": 0, "delta": {"message": {"content": {"text": t}}}}
        for t in "abc"
    ]
    usage = {"tokens": {"input_tokens": 3, "output_tokens": RAW}}
    end = {"type": "message-end", "delta": {"finish_reason": "COMPLETE", "usage": usage}}
    names = ("message-start", *["content-delta"] * 3, "message-end")
    return _sse(start, *deltas, end, count=count, names=names)


def anthropic(count: str) -> list[bytes]:
    usage = {"input_tokens": 3, "output_tokens": 1}
    start = {"type": "message_start", "message": {"model": "claude", "usage": usage}}
    block = {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}
    deltas = [
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}
        for t in "abc"
    ]
    stop = {"type": "content_block_stop", "index": 0}
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": "end_turn"},
        "usage": {"output_tokens": RAW},
    }
    names = (
        "message_start",
        "content_block_start",
        *["content_block_delta"] * 3,
        "content_block_stop",
        "message_delta",
        "message_stop",
    )
    end = {"type": "message_stop"}
    return _sse(start, block, *deltas, stop, delta, end, count=count, names=names)


def gemini(count: str) -> list[bytes]:
    def part(text: str, **more: object) -> dict[str, object]:
        candidate = {"content": {"parts": [{"text": text}], "role": "model"}, "index": 0}
        return {"candidates": [candidate | more]}

    usage = {"promptTokenCount": 3, "candidatesTokenCount": RAW}
    last = part("c", finishReason="STOP") | {"usageMetadata": usage}
    return _sse(part("a"), part("b"), last, count=count)


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    path: str
    events: list[bytes]


CASES = [
    Case("openai_10e400", "/v1/chat/completions", openai(HUGE)),  # before: exit 70
    Case("openai_negative", "/v1/chat/completions", openai("-5")),  # before: schema fails
    Case("openai_fraction", "/v1/chat/completions", openai("2.5")),
    Case("cohere_1e308", "/v2/chat", cohere("1e308")),  # before: the count was 10**308
    Case("anthropic_negative", "/v1/messages", anthropic("-5")),  # before: schema fails
    Case(
        "gemini_10e400",
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
        gemini(HUGE),  # before: exit 70
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_impossible_usage_count_is_untrusted_and_the_rate_comes_from_the_events(
    case: Case,
) -> None:
    pieces = paced("200 OK", [("content-type", "text/event-stream")], case.events)
    with hostile_origin(lambda _request: pieces, gap_s=0.015) as port:
        result = run_cli("run", f"http://127.0.0.1:{port}{case.path}", "--json")
    assert result.exit_code == ExitCode.OK, result.stderr[-2000:]
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    tokens = report["tokens"]
    assert tokens["usage"]["untrusted"] == ["output_tokens"]
    assert tokens["usage"]["output_tokens"] is None
    assert tokens["usage"]["input_tokens"] == 3  # the possible counts are kept
    assert tokens["count_source"] == "events" and tokens["count"] == tokens["events"] == 3
    # Three events 15 ms apart: a rate from them, a finite number (the machine's load
    # stretches the gaps, never shrinks them below the server's sleeps).
    assert tokens["per_second"] is not None and math.isfinite(tokens["per_second"])
    assert 0 < tokens["per_second"] <= 1000 / 15 * 1.05
    assert "Traceback" not in result.stderr


def test_the_terminal_says_the_count_was_untrusted() -> None:
    pieces = paced("200 OK", [("content-type", "text/event-stream")], openai(HUGE))
    with hostile_origin(lambda _request: pieces, gap_s=0.015) as port:
        result = run_cli("run", f"http://127.0.0.1:{port}/v1/chat/completions")
    assert result.exit_code == ExitCode.OK, result.stderr[-2000:]
    assert "tokens 3 (counted by events)" in result.stderr
    assert "impossible counts (output_tokens): untrusted, ignored" in result.stderr
    assert HUGE[:50] not in result.stderr
