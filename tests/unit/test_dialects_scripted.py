"""Every dialect the reference endpoint speaks, decoded and staged over no socket at all.

For each dialect in the server's registry: the request our client would send for it
(``prepare``) is handed to the reference endpoint's ASGI app in memory, and the bytes its
emulation writes (each ``http.response.body`` message one piece, as its writer hands
them to hypercorn) are played back through the scripted transport (tests/helpers/
scripted.py) into the real ``trace()``. So each dialect's decoder and its stage mapping
(first event, ttft, each token, last token, end marker, usage) is checked in a unit
test, from bytes captured now, not stored fixtures: a change to the emulation or to a
decoder shows here at once. The same streams over real loopback sockets stay in
tests/integration (test_server_dialects.py, test_google_azure_trace.py,
test_bedrock_trace.py, test_trace.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, MutableMapping
from typing import Any
from urllib.parse import unquote

import anyio
import pytest

from promptpath.core.analysis import compute
from promptpath.core.timeline import StreamEvent
from promptpath.options import RunOptions
from promptpath.result import TraceResult
from promptpath.server.app import ReferenceApp
from promptpath.server.behaviour import Behaviour
from promptpath.server.routing import DIALECTS  # the plug-ins' HTTP dialects, by name
from promptpath.server.tokens import answer_tokens
from promptpath.tracer.orchestrator import trace
from promptpath.tracer.request import prepare
from tests.helpers.dialectsamples import SAMPLES, Provider, sample_options
from tests.helpers.scripted import Piece, Script, Scripted

pytestmark = pytest.mark.unit

#: Nothing is dialled: the scripted transport opens no socket, and the IP literal keeps
#: the dns stage off the network.
BASE = "http://127.0.0.1:9"
TOKENS = 5


def test_every_registered_dialect_has_a_sample_here() -> None:
    # A new dialect in the registry fails here until it is played below too.
    assert sorted(SAMPLES) == sorted(DIALECTS)


class Answer:
    """What the reference endpoint's app wrote for one request, ASGI message by message."""

    def __init__(self) -> None:
        self.status = 0
        self.headers: tuple[tuple[str, str], ...] = ()
        self.writes: list[bytes] = []  # each non-empty http.response.body, in order
        self.ended = False  # the last body message said more_body False

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = tuple(
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in message["headers"]
            )
        elif message["type"] == "http.response.body":
            if message.get("body"):
                self.writes.append(bytes(message["body"]))
            self.ended = not message.get("more_body", False)


async def reference_answer(opts: RunOptions, app: ReferenceApp) -> Answer:
    """The request ``opts`` makes, answered by ``app`` in memory (no socket, no server)."""
    prepared = prepare(opts)
    raw_path, _, query = opts.target.path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": prepared.method,
        "scheme": "http",
        "path": unquote(raw_path),
        "raw_path": raw_path.encode(),
        "query_string": query.encode(),
        "headers": [(n.lower().encode(), v.encode()) for n, v in prepared.headers],
    }
    request = [{"type": "http.request", "body": prepared.body, "more_body": False}]
    client_stays = asyncio.Event()  # never set: the client never leaves

    async def receive() -> dict[str, Any]:
        if request:
            return request.pop()
        await client_stays.wait()
        raise AssertionError("unreachable")

    answer = Answer()
    await app(scope, receive, answer.send)
    return answer


def play(dialect: Provider) -> tuple[TraceResult, Answer, ReferenceApp]:
    """The reference endpoint's bytes for ``dialect``, traced through the scripted transport."""
    opts = sample_options(BASE, dialect, timeout=5.0)
    # As fast as it goes: no first-token delay, no pacing; each event its own write.
    app = ReferenceApp(Behaviour(tokens=TOKENS, rate=0.0))

    async def both() -> tuple[TraceResult, Answer]:
        answer = await reference_answer(opts, app)
        script = Script(
            status=answer.status,
            headers=answer.headers,
            body=tuple(Piece(data) for data in answer.writes),
            end=answer.ended,
        )
        return await trace(opts, transport_factory=Scripted(script)), answer

    result, answer = anyio.run(both)
    return result, answer, app


def content(events: list[StreamEvent]) -> Iterator[StreamEvent]:
    return (e for e in events if e.kind == "content")


@pytest.mark.parametrize("dialect", sorted(SAMPLES))
def test_the_reference_stream_decodes_into_every_stage(dialect: Provider) -> None:
    result, answer, app = play(dialect)
    # The emulation answered this dialect's request as a whole stream, routed by its path.
    assert answer.status == 200 and answer.ended
    recent = app.stats.snapshot()["recent"]
    assert isinstance(recent, list) and [r["dialect"] for r in recent] == [DIALECTS[dialect].name]
    assert len(answer.writes) > TOKENS  # an opening or a closing beside the tokens

    tl = result.timeline
    assert result.exc is None and tl.error is None, tl.error
    assert tl.status == 200 and tl.stream_end == "marker"
    # Each token the emulation wrote, decoded as one content event, in order.
    tokens = list(content(tl.events))
    assert "".join(e.text for e in tokens) == "".join(answer_tokens(TOKENS))
    assert len(tokens) == TOKENS
    # One write per event: each token reached the decoder in a read of its own.
    reads = [e.read_index for e in tokens]
    assert reads == sorted(set(reads))
    # The stages come from the decoded events: first_event the first of them, ttft the
    # first token, last_token the last one, end the terminal marker.
    m = tl.milestones
    assert m["request_sent"] <= m["ttfb"] <= m["first_event"] <= m["ttft"]
    assert m["first_event"] == tl.events[0].t_ns
    assert m["ttft"] == tokens[0].t_ns
    assert m["last_token"] == tokens[-1].t_ns
    [end] = [e for e in tl.events if e.kind == "end"]
    assert m["end"] == end.t_ns >= m["last_token"]
    assert not [e for e in tl.events if e.kind == "error"]
    # The usage the emulation reported is read: the count is the server's own.
    metrics = compute(tl)
    assert metrics.tokens.count == TOKENS and metrics.tokens.count_source == "usage"
    assert metrics.tokens.events == TOKENS
    assert {"request", "wait", "first_token", "streaming"} <= set(metrics.stages_ms)
