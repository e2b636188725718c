"""One traced request: resolve → connect → TLS → request → stream, appended to a Timeline.

This module drives httpcore with our timing backend and feeds the body, read by read,
to the sans-IO stream decoder. The read loop stays tight: nothing here renders.
"""

from __future__ import annotations

import json
import ssl
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpcore

from promptpath.errors import (
    ConnectError,
    HTTPStatusError,
    PromptpathError,
    StreamError,
    TraceTimeout,
)
from promptpath.findings import Finding
from promptpath.net.backend import Recorder, TracingBackend
from promptpath.options import RunOptions
from promptpath.providers import PreparedRequest, prepare
from promptpath.streams.decoder import StreamDecoder
from promptpath.timeline import BodyChunk, ErrorInfo, StreamEvent, Timeline

#: Bytes of an error or non-stream body we read to explain it (never more).
SNIFF_LIMIT = 64 * 1024

STREAM_TYPES = {
    "text/event-stream": "sse",
    "application/x-ndjson": "ndjson",
    "application/ndjson": "ndjson",
    "application/jsonl": "ndjson",
    "application/json-lines": "ndjson",
}


@dataclass(kw_only=True)
class TraceResult:
    """A traced request: its timeline, the error that ended it (if any), and findings."""

    options: RunOptions
    timeline: Timeline
    exc: PromptpathError | None = None
    warm: TraceResult | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.exc is None and (self.warm is None or self.warm.ok)


def new_timeline() -> Timeline:
    return Timeline(t0_ns=time.perf_counter_ns(), t0_unix_ns=time.time_ns())


def ssl_context_for(options: RunOptions) -> ssl.SSLContext:
    """A fresh context per run: httpcore sets ALPN on the context it is given."""
    ctx = ssl.create_default_context(cafile=options.cacert)
    if options.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def pool_for(
    options: RunOptions, recorder: Recorder, ctx: ssl.SSLContext
) -> httpcore.AsyncConnectionPool:
    http2 = options.http in ("2", "auto")
    http1 = True
    if options.http == "2" and options.target.scheme == "http":
        http1 = False  # h2c with prior knowledge: there is no ALPN on cleartext
    alpn = ["http/1.1", "h2"] if http2 else ["http/1.1"]
    ctx._promptpath_alpn = alpn  # type: ignore[attr-defined]
    return httpcore.AsyncConnectionPool(
        ssl_context=ctx,
        http1=http1,
        http2=http2,
        retries=0,
        max_connections=1,
        network_backend=TracingBackend(options, recorder),
    )


def _preload(options: RunOptions) -> None:
    """Import what the request path would import lazily, so t0 starts a clean clock.

    httpcore imports h2 on the first HTTP/2 connection and we parse the certificate with
    cryptography right after the handshake: tens of milliseconds that are not the network.
    """
    if options.http in ("2", "auto"):
        import h2.connection  # noqa: F401
    if options.target.scheme == "https":
        import cryptography.x509  # noqa: F401


async def trace(options: RunOptions) -> TraceResult:
    """Trace one prompt (and, with --warm, a second one over the same connection)."""
    if options.http == "3":
        from promptpath.net.quic import trace_h3  # aioquic: only when asked for

        return await trace_h3(options)
    _preload(options)
    ctx = ssl_context_for(options)  # loading the system CA store takes ~50 ms: not the network
    timeline = new_timeline()
    recorder = Recorder(timeline)
    result = TraceResult(options=options, timeline=timeline)
    async with pool_for(options, recorder, ctx) as pool:
        result.exc = await traced_request(pool, options, recorder)
        if options.warm and result.exc is None:
            warm_tl = new_timeline()
            recorder.timeline = warm_tl
            connects_before = recorder.connects
            warm = TraceResult(options=options, timeline=warm_tl)
            warm.exc = await traced_request(pool, options, recorder)
            warm_tl.reused_connection = recorder.connects == connects_before
            if warm_tl.reused_connection:
                warm_tl.address = timeline.address
                warm_tl.family = timeline.family
                warm_tl.tls = timeline.tls
            result.warm = warm
    return result


async def traced_request(
    pool: httpcore.AsyncConnectionPool, options: RunOptions, recorder: Recorder
) -> PromptpathError | None:
    """Run one request into ``recorder.timeline``; return the error that ended it, if any."""
    timeline = recorder.timeline
    prepared = prepare(options)
    try:
        with anyio.fail_after(options.timeout):
            await _exchange(pool, options, prepared, recorder)
    except TimeoutError:
        stage = phase_of(timeline, options)
        exc: PromptpathError = TraceTimeout(
            f"timed out after {options.timeout:g} s in stage {stage!r}",
            stage=stage,
            kind="timeout",
            timeout_s=options.timeout,
        )
    except PromptpathError as err:
        exc = err
    except httpcore.ProtocolError as err:
        stage = phase_of(timeline, options)
        exc = StreamError(
            f"HTTP protocol error in stage {stage!r}: {err}", stage=stage, kind="protocol_error"
        )
    except (httpcore.NetworkError, OSError) as err:
        stage = phase_of(timeline, options)
        cls = ConnectError if stage in ("dns", "connect") else StreamError
        exc = cls(f"network error in stage {stage!r}: {err}", stage=stage, kind="network_error")
    else:
        return None
    _close_open_stages(timeline)
    timeline.error = ErrorInfo(
        stage=exc.stage, kind=exc.kind, message=exc.message, detail=exc.detail
    )
    return exc


def phase_of(timeline: Timeline, options: RunOptions) -> str:
    """The stage a trace was in, from the milestones it reached."""
    open_stage = timeline.current_stage
    if open_stage in ("dns", "connect", "tls"):
        return open_stage
    m = timeline.milestones
    if not timeline.reused_connection and "connected" not in m and not timeline.stages:
        return "dns"
    if "dns_done" in m and "connected" not in m:
        return "connect"
    if options.target.scheme == "https" and "connected" in m and "tls_done" not in m:
        return "tls"
    if "request_sent" not in m:
        return "request"
    if "ttfb" not in m:
        return "wait"
    if "ttft" not in m:
        return "first_token"
    return "stream"


def _close_open_stages(timeline: Timeline) -> None:
    now = time.perf_counter_ns()
    for stage in timeline.stages:
        if stage.end_ns is None:
            stage.end_ns, stage.ok = now, False


async def _exchange(
    pool: httpcore.AsyncConnectionPool,
    options: RunOptions,
    prepared: PreparedRequest,
    recorder: Recorder,
) -> None:
    timeline = recorder.timeline

    async def on_trace(name: str, info: dict[str, Any]) -> None:
        # Stamps come from the socket wrapper, not from now(): the trace callback runs
        # after httpcore has parsed what the read brought.
        tl = recorder.timeline
        if name.endswith("send_request_headers.started"):
            tl.mark("request_start", time.perf_counter_ns())
        elif name.endswith("send_request_body.complete"):
            tl.mark("request_sent", recorder.last_write_ns or time.perf_counter_ns())
        elif name.endswith("receive_response_headers.complete"):
            tl.mark("ttfb", recorder.last_read_ns or time.perf_counter_ns())

    host = options.target.host
    if ":" in host:
        host = f"[{host}]"
    default_port = 443 if options.target.scheme == "https" else 80
    authority = host if options.target.port == default_port else f"{host}:{options.target.port}"
    request = httpcore.Request(
        prepared.method,
        options.target.url,
        headers=[
            ("host", authority),
            ("content-length", str(len(prepared.body))),
            *prepared.headers,
        ],
        content=prepared.body,
        extensions={"trace": on_trace, "timeout": {"connect": options.timeout}},
    )
    response = await pool.handle_async_request(request)
    try:
        timeline.status = response.status
        timeline.response_headers = [
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers
        ]
        version = response.extensions.get("http_version", b"HTTP/1.1")
        timeline.http_version = version.decode() if isinstance(version, bytes) else str(version)
        if options.target.scheme == "https" and timeline.tls is None:
            timeline.reused_connection = True
        await _consume(response, options, prepared, recorder)
    finally:
        with anyio.CancelScope(shield=True):
            await response.aclose()


async def _read_limited(response: httpcore.Response, limit: int = SNIFF_LIMIT) -> bytes:
    body = b""
    try:
        with anyio.fail_after(5):
            async for chunk in response.aiter_stream():
                body += chunk
                if len(body) >= limit:
                    break
    except (TimeoutError, httpcore.ProtocolError, httpcore.NetworkError):
        pass
    return body[:limit]


def _error_message(body: bytes) -> str:
    """The human part of an API error body: error.message, message, or a cleaned snippet."""
    text = body.decode("utf-8", "replace").strip()
    try:
        obj = json.loads(text)
    except ValueError:
        return _snippet(text)
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("type")
            if msg:
                return _snippet(str(msg))
        elif isinstance(err, str):
            return _snippet(err)
        if "message" in obj:
            return _snippet(str(obj["message"]))
    return _snippet(text)


def _snippet(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


_STATUS_HINTS = {
    401: "check the API key ({env})",
    403: "the key is not allowed to use this model or endpoint",
    404: "check the URL path and --model",
    429: "rate limited",
    529: "the provider is overloaded",
}


async def _consume(
    response: httpcore.Response,
    options: RunOptions,
    prepared: PreparedRequest,
    recorder: Recorder,
) -> None:
    timeline = recorder.timeline
    status = response.status
    if status >= 300:
        body = await _read_limited(response)
        retry_after = timeline.header("retry-after")
        hint = _STATUS_HINTS.get(status, "")
        if status == 401:
            hint = hint.format(env=options.api_key_env or "the Authorization header")
        parts = [f"HTTP {status}", _error_message(body) or "(empty body)"]
        if retry_after:
            parts.append(f"Retry-After: {retry_after}")
        if hint:
            parts.append(hint)
        raise HTTPStatusError(
            " — ".join(parts),
            stage="response",
            kind=f"http_{status}",
            status=status,
            retry_after=retry_after,
        )

    content_type = (timeline.header("content-type") or "").split(";")[0].strip().lower()
    framing = STREAM_TYPES.get(content_type)
    if framing is None:
        body = await _read_limited(response, 2048)
        what = content_type or "no content-type"
        raise StreamError(
            f"expected an event stream, got {what}: "
            f"{_snippet(body.decode('utf-8', 'replace'), 80)!r}",
            stage="response",
            kind="not_event_stream",
            content_type=content_type,
        )

    encoding = (timeline.header("content-encoding") or "identity").strip().lower()
    inflate: Any = None
    if encoding != "identity":
        timeline.extra["compressed"] = encoding
        if encoding in ("gzip", "x-gzip", "deflate"):
            inflate = zlib.decompressobj(wbits=47 if encoding != "deflate" else 15)
        else:
            raise StreamError(
                f"the event stream is compressed with {encoding!r}, which promptpath cannot decode"
                " (we asked for identity: a hop recompresses it)",
                stage="stream",
                kind="unsupported_encoding",
            )

    decoder = StreamDecoder(options.provider)
    events = timeline.events
    chunks = timeline.chunks
    try:
        async for data in response.aiter_stream():
            t_ns = recorder.last_read_ns or time.perf_counter_ns()
            idx = recorder.read_index
            chunks.append(BodyChunk(t_ns=t_ns, nbytes=len(data), read_index=idx))
            if inflate is not None:
                data = inflate.decompress(data)
            new = decoder.feed(data, t_ns, idx)
            if new:
                _note(timeline, new)
                events.extend(new)
    except (httpcore.ProtocolError, httpcore.NetworkError) as err:
        timeline.closed_ns = time.perf_counter_ns()
        timeline.stream_end = "truncated"
        raise StreamError(
            f"stream truncated after {_count_content(events)} tokens: the connection ended"
            f" without the terminal marker ({_snippet(str(err), 80)})",
            stage="stream",
            kind="truncated",
        ) from err
    except StreamError as err:
        # Events decoded before the bad one in the same read still happened.
        earlier = getattr(err, "events", None)
        if earlier:
            _note(timeline, earlier)
            events.extend(earlier)
        timeline.stream_end = "error"
        raise
    timeline.closed_ns = recorder.last_read_ns or time.perf_counter_ns()
    tail = decoder.close(timeline.closed_ns)
    if tail:
        _note(timeline, tail)
        events.extend(tail)
    if timeline.stream_end == "error":
        err_event = next(e for e in events if e.kind == "error")
        raise StreamError(
            f"the server sent an error event after {_count_content(events)} tokens:"
            f" {err_event.error}",
            stage="stream",
            kind="error_event",
            server_error=err_event.error,
        )
    if timeline.stream_end is None:
        timeline.stream_end = "truncated"
        raise StreamError(
            f"stream truncated after {_count_content(events)} tokens: the body ended without"
            " the terminal marker",
            stage="stream",
            kind="truncated",
        )


def _count_content(events: list[StreamEvent]) -> int:
    return sum(1 for e in events if e.kind == "content")


def _note(timeline: Timeline, new: list[StreamEvent]) -> None:
    """Milestones from freshly decoded events (first event, first token, last token, end)."""
    for ev in new:
        timeline.mark("first_event", ev.t_ns)
        if ev.kind == "content":
            timeline.mark("ttft", ev.t_ns)
            timeline.milestones["last_token"] = ev.t_ns
        elif ev.kind == "end":
            timeline.mark("end", ev.t_ns)
            timeline.stream_end = "marker"
        elif ev.kind == "error" and timeline.stream_end is None:
            timeline.mark("end", ev.t_ns)
            timeline.stream_end = "error"
