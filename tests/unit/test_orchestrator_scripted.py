"""The orchestrator's stage and error logic, over a scripted transport (no socket at all).

Each test plays one connection's behaviour (tests/helpers/scripted.py) through the real
``trace()``: the stage a failure or a timeout lands in (phase_of), the error it becomes
(transport_error), how the body's end is judged (consume), and which connection each
request goes on (the strategies). The same paths over real sockets are in
tests/integration (test_trace.py, test_stream_endings.py, test_timeout_time.py).
"""

from __future__ import annotations

import json
import time
from dataclasses import replace

import anyio
import pytest

from promptpath.core.errors import ConnectError, HTTPStatusError, StreamError, TraceTimeout
from promptpath.options import RunOptions, parse_target
from promptpath.result import TraceResult
from promptpath.tracer.load import run_concurrent
from promptpath.tracer.orchestrator import Tracer, trace
from promptpath.tracer.repeat import trace_repeated
from promptpath.tracer.session import new_timeline
from promptpath.tracer.strategy import fresh
from tests.helpers.scripted import Fail, Hang, Piece, Script, Scripted, chat_chunk, sse

pytestmark = pytest.mark.unit

#: Nothing is dialled: the scripted transport never opens a socket (an IP literal also
#: keeps the dns stage off the network).
URL = "http://127.0.0.1:9/v1/chat/completions"
TIMEOUT_S = 0.3
TOKENS = sse(chat_chunk("Hel"), chat_chunk("lo"), "[DONE]")


def options(url: str = URL, **kw: object) -> RunOptions:
    kw.setdefault("timeout", TIMEOUT_S)
    return RunOptions(
        target=parse_target(url),
        provider="openai",
        model="m",
        **kw,  # type: ignore[arg-type]
    )


def run(script: Script, opts: RunOptions | None = None) -> tuple[TraceResult, Scripted]:
    factory = Scripted(script)
    result = anyio.run(lambda: trace(opts or options(), transport_factory=factory))
    return result, factory


# -- a clean run ------------------------------------------------------------------------


def test_a_clean_stream_reaches_every_milestone_and_records_what_was_sent() -> None:
    result, factory = run(Script(body=TOKENS))
    tl = result.timeline
    assert result.exc is None and tl.status == 200 and tl.stream_end == "marker"
    milestones = ("dns_done", "connected", "request_sent", "ttfb", "first_event", "ttft", "end")
    assert all(m in tl.milestones for m in milestones)
    assert [e.text for e in tl.events if e.kind == "content"] == ["Hel", "lo"]
    # The record on the timeline is the request the transport was handed.
    [wire] = factory.transport.sent
    assert tl.request is not None
    assert (
        (tl.request.method, tl.request.path)
        == (wire.method, wire.path)
        == (
            "POST",
            "/v1/chat/completions",
        )
    )
    assert tl.request.body_bytes == len(wire.body) and json.loads(wire.body)["stream"] is True
    assert [n for n, _ in tl.request.headers] == [n for n, _ in wire.headers]


def test_a_key_is_sent_but_its_record_is_redacted() -> None:
    opts = options("http://localhost:9/v1/chat/completions", api_key="sk-scripted-0123456789")
    result, factory = run(Script(body=TOKENS), opts)
    assert result.exc is None
    [wire] = factory.transport.sent
    assert ("authorization", "Bearer sk-scripted-0123456789") in wire.headers
    sent = result.timeline.request
    assert sent is not None and sent.key_sent
    assert sent.header("authorization") == "[redacted]"
    assert "sk-scripted" not in repr(sent)


# -- phase_of: where --timeout cuts ------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "stage"),
    [
        (Script(hang_at="connect"), "connect"),
        (Script(stages=("connect", "tls"), hang_at="tls"), "tls"),
        (Script(hang_at="request"), "request"),
        (Script(hang_at="wait"), "wait"),
        (Script(body=(Hang(),)), "first_token"),
        (Script(body=(*sse(chat_chunk("a")), Hang())), "stream"),
    ],
)
def test_a_timeout_is_reported_in_the_stage_it_cut(script: Script, stage: str) -> None:
    url = URL.replace("http:", "https:") if "tls" in script.stages else URL
    result, _ = run(script, options(url, insecure=True))
    exc = result.exc
    assert isinstance(exc, TraceTimeout) and exc.stage == stage and exc.kind == "timeout"
    error = result.timeline.error
    assert error is not None and error.t_ns is not None
    # Stamped at the deadline itself, not when the event loop got round to it.
    assert error.t_ns - result.timeline.t0_ns == round(TIMEOUT_S * 1e9)
    assert all(s.end_ns is not None for s in result.timeline.stages)  # none left open


# -- transport_error: a transport's failure, mapped once ---------------------------------


@pytest.mark.parametrize(
    ("point", "cls", "stage"),
    [
        ("connect", ConnectError, "connect"),
        ("tls", StreamError, "tls"),
        ("request", StreamError, "request"),
        ("wait", StreamError, "wait"),
    ],
)
def test_a_network_failure_becomes_an_error_of_its_stage(
    point: str, cls: type[Exception], stage: str
) -> None:
    script = Script(stages=("connect", "tls"), fail_at=point)  # type: ignore[arg-type]
    result, _ = run(script, options(URL.replace("http:", "https:"), insecure=True))
    exc = result.exc
    assert type(exc) is cls and exc.stage == stage and exc.kind == "network_error"
    assert f"network error in stage {stage!r}" in exc.message
    assert "connection refused" in exc.message


def test_a_framing_error_before_the_head_is_a_protocol_error() -> None:
    from promptpath.net.transport import TransportError

    result, _ = run(Script(fail_at="wait", error=TransportError("bad frame", protocol=True)))
    exc = result.exc
    assert isinstance(exc, StreamError) and exc.kind == "protocol_error" and exc.stage == "wait"
    assert "bad frame" in exc.message


# -- consume: the status, the content type, and how the body ended ------------------------


def test_an_error_status_is_an_http_status_error_with_the_servers_words() -> None:
    body = (Piece(b'{"error": {"message": "slow down"}}'),)
    result, _ = run(Script(status=429, headers=(("content-type", "application/json"),), body=body))
    exc = result.exc
    assert isinstance(exc, HTTPStatusError) and exc.stage == "response"
    assert "slow down" in exc.message and result.timeline.status == 429


def test_a_body_that_is_not_a_stream_is_refused() -> None:
    script = Script(headers=(("content-type", "application/json"),), body=(Piece(b"{}"),))
    result, _ = run(script)
    exc = result.exc
    assert isinstance(exc, StreamError) and exc.kind == "not_event_stream"


def test_a_reset_before_the_terminal_marker_truncates_the_stream() -> None:
    result, _ = run(Script(body=(*sse(chat_chunk("a")), Fail())))
    exc, tl = result.exc, result.timeline
    assert isinstance(exc, StreamError) and exc.stage == "stream"
    assert tl.stream_end == "truncated" and "reset the connection (RST)" in exc.message


def test_a_body_that_just_ends_without_the_marker_is_truncated() -> None:
    result, _ = run(Script(body=sse(chat_chunk("a")), end=False, close="fin"))
    exc = result.exc
    assert isinstance(exc, StreamError) and result.timeline.stream_end == "truncated"
    assert result.timeline.close is not None and result.timeline.close.kind == "fin"


def test_a_reset_after_the_terminal_marker_cuts_nothing() -> None:
    result, _ = run(Script(body=(*TOKENS, Fail())))
    assert result.exc is None and result.timeline.stream_end == "marker"


def test_a_server_that_keeps_the_stream_open_after_the_end_is_not_a_timeout() -> None:
    opts = options(timeout=5.0)
    result, _ = run(Script(body=(*TOKENS, Hang())), opts)
    assert result.exc is None and result.timeline.stream_end == "marker"
    assert result.timeline.close_after_end is not None


def test_gaps_follow_the_pieces_stamps() -> None:
    body = (Piece(sse(chat_chunk("a"))[0].data), Piece(sse(chat_chunk("b"))[0].data, 0.05))
    result, _ = run(Script(body=(*body, *sse("[DONE]"))))
    first, second = (e for e in result.timeline.events if e.kind == "content")
    assert second.t_ns - first.t_ns >= 50_000_000


def test_stop_after_leaves_the_rest_unread() -> None:
    factory = Scripted(Script(body=sse(*(chat_chunk(str(i)) for i in range(5)), "[DONE]")))

    async def main() -> tuple[Tracer, TraceResult]:
        opts = options()
        tracer = Tracer(opts, factory(opts), stop_after_tokens=2)
        result = TraceResult(options=opts, timeline=new_timeline())
        await tracer.request(result.timeline)
        await tracer.aclose()
        return tracer, result

    tracer, result = anyio.run(main)
    assert tracer.stopped_ns is not None and result.exc is None
    assert sum(1 for e in result.timeline.events if e.kind == "content") == 2


# -- strategies: which connection each request goes on -----------------------------------


def test_warm_reuses_the_connection_while_the_peer_keeps_it() -> None:
    result, factory = run(Script(body=TOKENS), options(warm=True))
    assert result.warm is not None and result.warm.exc is None
    assert factory.transport.connects == 1 and result.warm.timeline.reused_connection
    assert result.warm.timeline.request == result.timeline.request


def test_warm_opens_a_new_connection_when_the_peer_will_not_reuse_it() -> None:
    result, factory = run(Script(body=TOKENS, reusable=False), options(warm=True))
    assert result.warm is not None and not result.warm.timeline.reused_connection
    assert factory.transport.connects == 2


def run_fresh(factory: Scripted, count: int) -> list[TraceResult]:
    """``count`` requests, one after the other, each on a connection of its own."""

    async def main() -> list[TraceResult]:
        opts = options()
        tracer = Tracer(opts, factory(opts), strategy=fresh())
        results = [TraceResult(options=opts, timeline=new_timeline()) for _ in range(count)]
        for r in results:
            await tracer.request(r.timeline)
        await tracer.aclose()
        return results

    return anyio.run(main)


def test_the_fresh_strategy_opens_a_connection_per_request() -> None:
    factory = Scripted(Script(body=TOKENS))
    results = run_fresh(factory, 3)
    assert all(r.ok and not r.timeline.reused_connection for r in results)
    assert factory.transport.connects == 3 and factory.transport.closed == 3


def test_repeated_runs_with_reuse_share_one_connection() -> None:
    factory = Scripted(Script(body=TOKENS))
    results = anyio.run(
        lambda: trace_repeated(options(), count=3, reuse=True, transport_factory=factory)
    )
    assert [r.timeline.reused_connection for r in results] == [False, True, True]
    assert len(factory.built) == 1 and factory.transport.connects == 1
    assert all(r.timeline.request is not None for r in results)


def test_repeated_runs_without_reuse_each_get_a_session() -> None:
    factory = Scripted(Script(body=TOKENS))
    results = anyio.run(lambda: trace_repeated(options(), count=2, transport_factory=factory))
    assert all(r.ok for r in results) and len(factory.built) == 2


@pytest.mark.parametrize(("http", "connections", "opened"), [("2", 2, 2), ("1.1", 0, 3)])
def test_load_spreads_streams_over_the_pool(http: str, connections: int, opened: int) -> None:
    # h2c by prior knowledge multiplexes (round robin over 2); HTTP/1.1 opens one per
    # stream in flight (concurrency 3) and reuses them.
    factory = Scripted(Script(body=TOKENS, multiplexed=http == "2"))
    started: list[int] = []
    done: list[int] = []
    results = anyio.run(
        lambda: run_concurrent(
            options(http=http),
            count=9,
            concurrency=3,
            connections=connections,
            on_run=lambda i, _: done.append(i),
            on_start=lambda i, r: started.append(i),
            transport_factory=factory,
        )
    )
    assert started == list(range(9))  # each stream handed over as it begins, in order
    assert sorted(done) == list(range(9)) and all(r.ok for r in results)
    assert factory.transport.connects == opened
    assert sum(not r.timeline.reused_connection for r in results) == opened
    assert all(r.timeline.request is not None for r in results)


# -- the first request, handed to the connection it opens ---------------------------------
# A transport may send ConnectSpec.first_request with its handshake (HTTP/3 does, with our
# Finished: tests/integration/test_http3.py); the scripted one sends every request from
# Connection.request, so what the tracer hands over and then sends can be compared.


def test_the_first_connection_is_handed_the_request_it_then_sends() -> None:
    result, factory = run(Script(body=TOKENS), options(warm=True))
    assert result.ok and result.warm is not None and result.warm.ok
    transport = factory.transport
    [spec] = transport.specs
    first, warm = transport.sent
    assert spec.first_request is first  # the very object: QuicConnection matches by identity
    assert warm is not first  # a later request is prepared as it is sent, never handed over
    assert "first_request" not in repr(spec)  # its headers carry the key


def test_a_probes_own_connect_is_never_handed_the_prompt() -> None:
    # The probes connect through the tracer for requests of their own (an OPTIONS, an
    # upgrade): a transport handed the prompt there would send a POST nobody asked for.
    factory = Scripted(Script(body=TOKENS))

    async def main() -> TraceResult:
        opts = options()
        tracer = Tracer(opts, factory(opts), strategy=fresh())
        timeline = new_timeline()
        recorder = tracer.transport.recorder(timeline)
        conn = await tracer.connect(timeline, time.monotonic() + 5, recorder)
        await conn.aclose()
        result = TraceResult(options=opts, timeline=new_timeline())
        await tracer.request(result.timeline)  # the prompt, on a connection of its own
        await tracer.aclose()
        return result

    result = anyio.run(main)
    probe, traced = factory.transport.specs
    assert result.ok and probe.first_request is None
    assert traced.first_request is factory.transport.sent[0]


def test_a_failed_connect_leaves_the_first_request_for_the_next_connection() -> None:
    factory = Scripted(Script(fail_at="connect"), Script(body=TOKENS))
    failed, ok = run_fresh(factory, 2)
    assert isinstance(failed.exc, ConnectError) and ok.ok
    refused, opened = factory.transport.specs
    # The same request prepared before t0 (not prepared again), sent on the connection
    # that opened.
    assert refused.first_request is not None and opened.first_request == refused.first_request
    assert opened.first_request is factory.transport.sent[0]


def test_load_hands_the_first_request_to_one_connection_which_sends_it_once() -> None:
    factory = Scripted(Script(body=TOKENS, multiplexed=True))
    results = anyio.run(
        lambda: run_concurrent(
            options(http="2"),
            count=6,
            concurrency=3,
            connections=3,
            on_run=lambda i, _: None,
            transport_factory=factory,
        )
    )
    transport = factory.transport
    assert all(r.ok for r in results) and transport.connects == 3
    handed = [(i, s.first_request) for i, s in enumerate(transport.specs) if s.first_request]
    assert len(handed) == 1, handed
    index, first = handed[0]
    assert len(transport.sent) == 6  # no stream's request went twice
    [sent_as] = [i for i, w in enumerate(transport.sent) if w is first]
    assert transport.sent_on[sent_as] == index  # on the connection it was handed to


def test_a_refused_http3_run_still_records_what_it_would_have_sent() -> None:
    result, factory = run(Script(), replace(options(), http="3"))
    exc = result.exc
    assert exc is not None and exc.kind == "bad_option" and factory.built == []
    assert result.timeline.request is not None and result.timeline.request.method == "POST"
