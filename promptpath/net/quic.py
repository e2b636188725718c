"""One traced request over HTTP/3: resolve → QUIC handshake → request → stream.

The entry points are ``trace_h3`` (what ``promptpath.trace.trace`` runs for ``--http 3``)
and ``measure_resumption``. This module sends the request and hands the response, stamped
datagram by datagram, to ingest.py: the status checks, stream decoder, milestones and
verdicts are the ones the TCP tracer uses. Reaching the server is quic_connect's job,
pumping datagrams quic_protocol's, checking the certificate quic_verify's.

The request is never sent as 0-RTT early data: no session ticket is offered to a traced
connection, and nothing is written on a stream before the handshake has completed.

aioquic is imported only inside functions of those modules, and ``promptpath.trace``
imports this module only for ``--http 3``: an HTTP/2 run never pays for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import anyio

from promptpath.errors import (
    ConnectError,
    ErrorStage,
    PromptpathError,
    StreamError,
    UsageError,
)
from promptpath.ingest import (
    SNIFF_LIMIT,
    BodyIngest,
    is_event_stream,
    not_a_stream_error,
    status_error,
)
from promptpath.net.quic_connect import HANDSHAKE_TIMEOUT_S, Session, connect, handshake, preload
from promptpath.net.quic_protocol import Arrival, QuicRecorder
from promptpath.net.quic_verify import CertVerifier
from promptpath.options import RunOptions
from promptpath.providers import PreparedRequest, prepare
from promptpath.timeline import Timeline
from promptpath.trace import (
    TraceResult,
    new_timeline,
    next_chunk,
    phase_of,
    record_error,
    timeout_error,
)

#: Request headers that are connection-specific and forbidden in HTTP/3 (RFC 9114 §4.2).
_FORBIDDEN = frozenset(
    {"host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"}
)


# -- the request ------------------------------------------------------------------------


def _request_headers(options: RunOptions, prepared: PreparedRequest) -> list[tuple[bytes, bytes]]:
    host = options.target.host
    if ":" in host:
        host = f"[{host}]"
    authority = host if options.target.port == 443 else f"{host}:{options.target.port}"
    headers = [
        (b":method", prepared.method.encode()),
        (b":scheme", b"https"),
        (b":authority", authority.encode()),
        (b":path", options.target.path.encode()),
    ]
    for name, value in prepared.headers:
        lname = name.lower()
        if lname not in _FORBIDDEN:
            headers.append((lname.encode(), value.encode()))
    headers.append((b"content-length", str(len(prepared.body)).encode()))
    return headers


class _Broken(Exception):
    """The request stream ended abnormally (reset, connection closed)."""


async def _body(queue: asyncio.Queue[Arrival], first: Arrival) -> AsyncIterator[Arrival]:
    """The DATA arrivals of a response, until the stream ends; _Broken if it dies."""
    arrival = first
    while not arrival.ended:
        arrival = await queue.get()
        if arrival.broken is not None:
            raise _Broken(arrival.broken)
        if arrival.data:
            yield arrival


async def _read_limited(
    queue: asyncio.Queue[Arrival], first: Arrival, limit: int = SNIFF_LIMIT
) -> bytes:
    body = b""
    try:
        with anyio.fail_after(5):
            async for arrival in _body(queue, first):
                body += arrival.data
                if len(body) >= limit:
                    break
    except (TimeoutError, _Broken):
        pass
    return body[:limit]


async def _exchange(session: Session, options: RunOptions, timeline: Timeline) -> None:
    prepared = prepare(options)
    queue = session.protocol.send_request(
        _request_headers(options, prepared), prepared.body, timeline
    )
    while True:  # skip informational (1xx) responses
        head = await queue.get()
        if head.broken is not None:
            raise StreamError(
                f"no response: {head.broken}", stage=phase_of(timeline, options), kind="no_response"
            )
        if head.headers is None:
            continue
        status = next((int(v) for k, v in head.headers if k == b":status"), 0)
        if status >= 200:
            break
    timeline.mark("ttfb", head.t_ns)
    timeline.status = status
    timeline.http_version = "HTTP/3"
    timeline.response_headers = [
        (k.decode("latin-1"), v.decode("latin-1"))
        for k, v in head.headers
        if not k.startswith(b":")
    ]
    await _consume(queue, head, options, timeline)


async def _consume(
    queue: asyncio.Queue[Arrival], head: Arrival, options: RunOptions, timeline: Timeline
) -> None:
    """The same checks, decoding and verdicts as over TCP (ingest.py), fed from datagrams."""
    if (timeline.status or 0) >= 300:
        raise status_error(timeline, options, await _read_limited(queue, head))
    if not is_event_stream(timeline):
        raise not_a_stream_error(timeline, await _read_limited(queue, head, 2048))
    ingest = BodyIngest(timeline, options)
    last_ns = head.t_ns
    arrivals = _body(queue, head).__aiter__()
    try:
        while (arrival := await next_chunk(ingest, arrivals)) is not None:
            last_ns = arrival.t_ns
            ingest.feed(arrival.data, arrival.t_ns, arrival.read_index)
    except _Broken as err:
        # A reset after the terminal marker cuts nothing; before it, the stream is truncated.
        failure = ingest.ended_abruptly(str(err), time.perf_counter_ns())
        if failure is not None:
            raise failure from err
        return
    ingest.finish(last_ns)


# -- the trace ---------------------------------------------------------------------------


def _stage_of(timeline: Timeline, options: RunOptions) -> ErrorStage:
    open_stage = timeline.current_stage
    if open_stage in ("dns", "quic_handshake"):
        return cast(ErrorStage, open_stage)  # timeline stage names are plain str
    if "connected" not in timeline.milestones and not timeline.reused_connection:
        return "quic_handshake" if "dns_done" in timeline.milestones else "dns"
    return phase_of(timeline, options)


async def _traced(
    options: RunOptions,
    recorder: QuicRecorder,
    session: Session | None,
    box: list[Session],
    verifier: CertVerifier | None,
) -> PromptpathError | None:
    """Run one request (connecting first unless ``session`` is given); the error, if any."""
    timeline = recorder.timeline
    deadline = time.monotonic() + options.timeout
    try:
        with anyio.fail_after(options.timeout):
            if session is None:
                session = await connect(options, recorder, deadline, verifier)
                box.append(session)
            await _exchange(session, options, timeline)
    except TimeoutError:
        exc: PromptpathError = timeout_error(options, _stage_of(timeline, options))
    except PromptpathError as err:
        exc = err
    except OSError as err:
        stage = _stage_of(timeline, options)
        cls = ConnectError if stage in ("dns", "quic_handshake") else StreamError
        exc = cls(f"network error in stage {stage!r}: {err}", stage=stage, kind="network_error")
    else:
        return None
    return record_error(timeline, exc)


async def trace_h3(
    options: RunOptions, *, on_start: Callable[[TraceResult], None] | None = None
) -> TraceResult:
    """Trace one prompt over HTTP/3 (and, with --warm, a second on the same connection).

    ``on_start`` receives the result as soon as it exists (for reporting after Ctrl-C)."""
    if options.target.scheme != "https":
        timeline = new_timeline()
        exc = UsageError(
            "HTTP/3 needs an https:// target (QUIC always runs TLS)", kind="bad_option"
        )
        return TraceResult(options=options, timeline=timeline, exc=record_error(timeline, exc))
    preload()
    verifier = None if options.insecure else CertVerifier(options)  # CA store: before t0
    timeline = new_timeline()
    recorder = QuicRecorder(timeline)
    result = TraceResult(options=options, timeline=timeline)
    if on_start is not None:
        on_start(result)
    box: list[Session] = []
    try:
        result.exc = await _traced(options, recorder, None, box, verifier)
        if options.warm and result.exc is None and box:
            warm_tl = new_timeline()
            recorder.timeline = warm_tl
            recorder.reset_stats()
            warm_tl.reused_connection = True
            warm_tl.address, warm_tl.family, warm_tl.tls = (
                timeline.address,
                timeline.family,
                timeline.tls,
            )
            warm = TraceResult(options=options, timeline=warm_tl)
            warm.exc = await _traced(options, recorder, box[0], box, verifier)
            result.warm = warm
    finally:
        for session in box:
            session.protocol.close()
    return result


async def measure_resumption(options: RunOptions) -> dict[str, Any]:
    """Two bare QUIC handshakes: a full one, then one resuming its TLS session ticket.

    No request is sent on either connection: a resumed connection may carry 0-RTT data,
    and a prompt must never travel as replayable early data. Returns ``{"full_ms",
    "resumed_ms", "ticket", "resumed", "error"}``; ``ticket`` is False when the server
    issued none (then there is nothing to resume).
    """
    preload()
    verifier = None if options.insecure else CertVerifier(options)
    out: dict[str, Any] = {
        "full_ms": None,
        "resumed_ms": None,
        "ticket": False,
        "resumed": False,
        "error": None,
    }
    first = QuicRecorder(new_timeline())
    deadline = time.monotonic() + options.timeout
    sessions: list[Session] = []
    try:
        with anyio.fail_after(options.timeout):
            session = await connect(options, first, deadline, verifier)
            sessions.append(session)
            stage = first.timeline.stage("quic_handshake")
            if stage is not None and stage.duration_ns is not None:
                out["full_ms"] = round(stage.duration_ns / 1e6, 3)
            # Tickets come after the handshake, in 1-RTT packets.
            with anyio.move_on_after(min(1.0, max(0.0, deadline - time.monotonic() - 0.5))):
                await session.protocol.tickets.arrived.wait()
            session.protocol.close()
            tickets = session.protocol.tickets.items
            address, family = first.timeline.address, first.timeline.family
            if not tickets or address is None or family is None:
                return out
            out["ticket"] = True
            second = QuicRecorder(new_timeline())
            second.timeline.begin("quic_handshake", time.perf_counter_ns())
            budget = min(HANDSHAKE_TIMEOUT_S, deadline - time.monotonic() - 0.1)
            sessions.append(
                await handshake(
                    options,
                    second,
                    address[0],
                    family,
                    budget,
                    verifier=verifier,
                    session_ticket=tickets[-1],
                )
            )
            attempt = second.timeline.attempts[-1]
            out["resumed_ms"] = round((attempt.end_ns - attempt.start_ns) / 1e6, 3)
            tls = second.timeline.tls
            out["resumed"] = bool(tls is not None and tls.resumed)
    except TimeoutError:
        out["error"] = f"timed out after {options.timeout:g} s"
    except PromptpathError as exc:
        out["error"] = exc.message
    finally:
        for each in sessions:
            each.protocol.close()
    return out
