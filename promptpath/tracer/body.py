"""The response, judged and read: status and content type first, then the body piece by
piece into the ingest, the same for every transport. The loop stays tight: each piece
is fed as it comes, with the stamp of the read that carried it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import anyio
import anyio.lowlevel

from promptpath.core.errors import HTTPStatusError, PromptpathError, http_status_kind
from promptpath.core.redaction import Redactor
from promptpath.core.timeline import Timeline
from promptpath.net.tlsinfo import client_cert_refused
from promptpath.net.transport import Body, BodyPiece, ResponseHead, TransportError
from promptpath.options import RunOptions
from promptpath.tracer.failure import network_reason
from promptpath.tracer.ingest import (
    SNIFF_LIMIT,
    BodyIngest,
    is_event_stream,
    not_a_stream_error,
    snippet,
    status_error,
)
from promptpath.tracer.request import key_sent

#: How long to keep reading after the terminal marker or an error event.
AFTER_END_GRACE_S = 1.0
#: Longest wait for the body of an error answer (it only explains the status).
SNIFF_WAIT_S = 5.0


def redact_for(options: RunOptions) -> Callable[[str], str]:
    """Takes the run's credentials out of a text before it is cut to a snippet. Lazy: the
    pieces of a long key cost a millisecond to build, which a stream that ends well (and
    the reads right after its head) should not pay."""

    def redact(text: str) -> str:
        from promptpath.options import secret_values

        return _redactor(tuple(secret_values(options))).text(text)

    return redact


@functools.lru_cache(maxsize=8)
def _redactor(values: tuple[str, ...]) -> Redactor:
    return Redactor.of(values)


async def consume(
    head: ResponseHead,
    body: Body,
    timeline: Timeline,
    options: RunOptions,
    *,
    stop_after: int | None = None,
) -> bool:
    """Judge the response and feed its body to the decoder, piece by piece (every transport).

    True when it stopped early, ``stop_after`` content tokens in: the rest is left unread.
    A WebSocket's body is whole messages; after its terminal message nothing more is
    read (the socket stays open for the next request by design)."""
    if head.websocket and head.status != 101:
        raise upgrade_refused(timeline, await read_limited(body), options)
    if not head.websocket and head.status >= 300:
        body_text = await read_limited(body)
        refused = client_cert_status(timeline, body_text)
        if refused is not None:
            raise refused
        sent = timeline.request
        carried = key_sent(options) if sent is None else sent.key_sent
        raise status_error(
            timeline,
            body_text,
            key_env=options.api_key_env,
            key_sent=carried,
            redact=redact_for(options),
        )
    if not head.websocket and not is_event_stream(timeline):
        raise not_a_stream_error(
            timeline, await read_limited(body, 2048), options.provider, redact_for(options)
        )
    ingest = BodyIngest(timeline, options.provider, redact_for(options), messages=head.websocket)
    last_ns = head.t_ns
    try:
        while (piece := await next_piece(ingest, body)) is not None:
            last_ns = piece.t_ns
            if piece.end:
                break
            ingest.feed(piece.data, piece.t_ns, piece.read_index)
            while ingest.backlog:
                # A compressed read decodes in steps: let the deadline (and, in load mode,
                # the other streams) in between them.
                await anyio.lowlevel.checkpoint()
                ingest.resume()
            if stop_after is not None and ingest.tokens >= stop_after:
                return True
            if head.websocket and ingest.terminal:
                break
    except TransportError as err:
        # A reset after the terminal marker cuts nothing; before it, the stream is truncated.
        reason = network_reason(err.reason, timeline)
        failure = ingest.ended_abruptly(reason, time.perf_counter_ns())
        if failure is not None:
            raise failure from err
        return False
    ingest.finish(last_ns)
    return False


def upgrade_refused(timeline: Timeline, body: bytes, options: RunOptions) -> HTTPStatusError:
    """A WebSocket upgrade answered with anything but 101: the status, the server and the
    body's words (redacted), in the ``upgrade`` stage. A 2xx or 3xx is a hop or server
    that took the GET for a plain request (nginx without ``proxy_set_header Upgrade``
    forwards it as one): kind ``upgrade_refused``; 4xx/5xx keep their ``http_<status>``."""
    sent = timeline.request
    carried = key_sent(options) if sent is None else sent.key_sent
    plain = status_error(
        timeline,
        body,
        key_env=options.api_key_env,
        key_sent=carried,
        redact=redact_for(options),
    )
    status = timeline.status or 0
    server = timeline.header("server")
    who = f" (server: {snippet(server, 60, redact_for(options))})" if server else ""
    hint = ""
    if status < 400:
        hint = (
            " — a 101 Switching Protocols was expected: a hop that does not pass the Upgrade"
            " and Connection headers turns the upgrade into a plain GET"
        )
    return HTTPStatusError(
        f"WebSocket upgrade refused{who}: {plain.message}{hint}",
        stage="upgrade",
        kind=http_status_kind(status) if status >= 400 else "upgrade_refused",
        status=status,
        retry_after=timeline.header("retry-after"),
        server=server,
    )


#: nginx (``ssl_verify_client on``) completes the handshake without or with a refused
#: client certificate, then answers 400 "No required SSL certificate was sent" / "The SSL
#: certificate error" (495/496 where an error_page shows its own codes): checked by hand
#: with nginx 1.22. A TLS failure all the same.
_CLIENT_CERT_STATUSES = (400, 495, 496)


def client_cert_status(timeline: Timeline, body: bytes) -> PromptpathError | None:
    """The TLS error for an HTTP answer that refuses the client certificate the server
    asked for, or None when the answer is about something else."""
    tls = timeline.tls
    if (
        tls is None
        or not tls.client_cert_requested
        or timeline.status not in _CLIENT_CERT_STATUSES
        or b"certificate" not in body.lower()
    ):
        return None
    stage = timeline.stage("tls")
    if stage is not None:
        stage.ok = False
    host = tls.sni or "the server"
    how = f"it answered HTTP {timeline.status} after the handshake"
    return client_cert_refused(sent=tls.client_cert_sent, host=host, how=how)


async def next_piece(ingest: BodyIngest, body: Body) -> BodyPiece | None:
    """The next piece of the body, or None when the server kept it open past the end.

    After the terminal marker (or an error event) the body should end at once; a server
    that keeps it open gets AFTER_END_GRACE_S, and must not turn a complete answer into a
    timeout."""
    if not ingest.terminal:  # no cancel scope per piece: with many streams they add up
        try:
            return await body.__anext__()
        except StopAsyncIteration:
            return None
    with anyio.move_on_after(AFTER_END_GRACE_S):
        try:
            return await body.__anext__()
        except StopAsyncIteration:
            return None
    ingest.timeline.close_after_end = (
        f"still open {AFTER_END_GRACE_S:g} s after the end of the stream"
    )
    return None


async def read_limited(body: Body, limit: int = SNIFF_LIMIT) -> bytes:
    """Up to ``limit`` bytes of a body that only explains an error (never waits long)."""
    data = b""
    with anyio.move_on_after(SNIFF_WAIT_S):
        try:
            async for piece in body:
                data += piece.data
                if len(data) >= limit or piece.end:
                    break
        except TransportError:
            pass
    return data[:limit]


__all__ = [
    "AFTER_END_GRACE_S",
    "SNIFF_WAIT_S",
    "client_cert_status",
    "consume",
    "next_piece",
    "read_limited",
]
