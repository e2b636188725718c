"""One traced request: resolve → connect → TLS → request → stream, appended to a Timeline.

This module drives httpcore with our timing backend and feeds the body, read by read,
to the sans-IO stream decoder. The read loop stays tight: nothing here renders.
"""

from __future__ import annotations

import gc
import os
import ssl
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import anyio
import httpcore

from promptpath.errors import (
    ConnectError,
    ErrorStage,
    PromptpathError,
    StreamError,
    TraceTimeout,
)
from promptpath.findings import Finding
from promptpath.ingest import (
    SNIFF_LIMIT,
    BodyIngest,
    is_event_stream,
    not_a_stream_error,
    status_error,
)
from promptpath.net.backend import Recorder, TracingBackend
from promptpath.net.tlsinfo import finish_tls
from promptpath.options import RunOptions
from promptpath.providers import PreparedRequest, prepare
from promptpath.timeline import ErrorInfo, Timeline

T = TypeVar("T")

#: How long to keep reading after the terminal marker or an error event.
AFTER_END_GRACE_S = 1.0


@dataclass(kw_only=True)
class TraceResult:
    """A traced request: its timeline, the error that ended it (if any), and findings."""

    options: RunOptions
    timeline: Timeline
    exc: PromptpathError | None = None
    warm: TraceResult | None = None
    findings: list[Finding] = field(default_factory=list)
    h3: dict[str, Any] | None = None  # HTTP/3 discovery (Alt-Svc, HTTPS RR), TCP runs only

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


async def trace(
    options: RunOptions, *, on_start: Callable[[TraceResult], None] | None = None
) -> TraceResult:
    """Trace one prompt (and, with --warm, a second one over the same connection).

    ``on_start`` receives the result as soon as it exists, so a caller interrupted by
    Ctrl-C can still report the partial timeline."""
    if options.resolver is not None:
        from promptpath.net.dnsquery import load_dnspython

        load_dnspython()  # dnspython loads lazily inside the first query: not DNS time
    # A full collection in the middle of a stream stalls the read loop for ~20 ms
    # (measured), which would show as a late token. Collect now, then hold the collector
    # off until the trace is done; reference counting still frees what it can.
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        if options.http == "3":
            from promptpath.net.quic import trace_h3  # aioquic: only when asked for

            return await trace_h3(options, on_start=on_start)
        return await _trace_tcp(options, on_start)
    finally:
        if was_enabled:
            gc.enable()


async def _trace_tcp(
    options: RunOptions, on_start: Callable[[TraceResult], None] | None
) -> TraceResult:
    _preload(options)
    ctx = ssl_context_for(options)  # loading the system CA store takes ~50 ms: not the network
    timeline = new_timeline()
    recorder = Recorder(timeline)
    result = TraceResult(options=options, timeline=timeline)
    if on_start is not None:
        on_start(result)
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
    finish_tls(timeline.tls)
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
        exc: PromptpathError = timeout_error(options, phase_of(timeline, options))
    except PromptpathError as err:
        exc = err
    except httpcore.ProtocolError as err:
        stage = phase_of(timeline, options)
        exc = StreamError(
            f"HTTP protocol error in stage {stage!r}: {network_reason(err, timeline)}",
            stage=stage,
            kind="protocol_error",
        )
    except (httpcore.NetworkError, OSError) as err:
        stage = phase_of(timeline, options)
        cls = ConnectError if stage in ("dns", "connect") else StreamError
        exc = cls(
            f"network error in stage {stage!r}: {network_reason(err, timeline)}",
            stage=stage,
            kind="network_error",
        )
    else:
        return None
    return record_error(timeline, exc)


async def next_chunk(ingest: BodyIngest, chunks: AsyncIterator[T]) -> T | None:
    """The next piece of the body, or None when it ended (every transport).

    After the terminal marker (or an error event) the body should end at once; a server
    that keeps it open gets AFTER_END_GRACE_S, and must not turn a complete answer into a
    timeout."""
    with anyio.move_on_after(AFTER_END_GRACE_S if ingest.terminal else None):
        try:
            return await chunks.__anext__()
        except StopAsyncIteration:
            return None
    ingest.timeline.extra["close_after_end"] = (
        f"still open {AFTER_END_GRACE_S:g} s after the end of the stream"
    )
    return None


def network_reason(err: BaseException, timeline: Timeline) -> str:
    """Words for a transport failure: httpcore's own text is often empty."""
    closed = timeline.extra.get("transport_close")
    if closed == "rst":
        what = "the peer reset the connection (RST)"
    elif closed == "fin":
        what = "the peer closed the connection (FIN)"
    elif closed == "tls_close_notify":
        what = "the peer closed the TLS session (close_notify)"
    else:
        what = ""
    text = str(err).strip()
    cause: BaseException | None = err.__cause__ or err.__context__
    while not text and cause is not None:
        if isinstance(cause, OSError) and cause.errno:
            text = os.strerror(cause.errno)
        else:
            text = str(cause).strip()
        cause = cause.__cause__ or cause.__context__
    if not text and not what:
        text = type(err).__name__
    parts = [p for p in (what, text) if p]
    return "; ".join(parts) or type(err).__name__


def timeout_error(options: RunOptions, stage: ErrorStage) -> TraceTimeout:
    """The error for a trace that --timeout cut short in ``stage`` (every transport)."""
    return TraceTimeout(
        f"timed out after {options.timeout:g} s in stage {stage!r}",
        stage=stage,
        kind="timeout",
        timeout_s=options.timeout,
    )


def record_error(timeline: Timeline, exc: PromptpathError) -> PromptpathError:
    """Close the stages left open and put ``exc`` on the timeline; return it (every transport)."""
    _close_open_stages(timeline)
    timeline.error = ErrorInfo.from_error(exc)
    return exc


def phase_of(timeline: Timeline, options: RunOptions) -> ErrorStage:
    """The stage a trace was in, from the milestones it reached."""
    open_stage = timeline.current_stage
    if open_stage in ("dns", "connect", "tls"):
        return cast(ErrorStage, open_stage)  # timeline stage names are plain str
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
        if name.endswith("send_request_body.complete"):
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


async def _consume(
    response: httpcore.Response,
    options: RunOptions,
    prepared: PreparedRequest,
    recorder: Recorder,
) -> None:
    timeline = recorder.timeline
    if response.status >= 300:
        raise status_error(timeline, options, await _read_limited(response))
    if not is_event_stream(timeline):
        raise not_a_stream_error(timeline, await _read_limited(response, 2048))
    ingest = BodyIngest(timeline, options)
    chunks = response.aiter_stream().__aiter__()
    try:
        while (data := await next_chunk(ingest, chunks)) is not None:
            # The stamp of the socket read that brought these bytes, not of this moment.
            ingest.feed(data, recorder.last_read_ns or time.perf_counter_ns(), recorder.read_index)
    except (httpcore.ProtocolError, httpcore.NetworkError) as err:
        failure = ingest.ended_abruptly(network_reason(err, timeline), time.perf_counter_ns())
        if failure is not None:
            raise failure from err
        return
    ingest.finish(recorder.last_read_ns or time.perf_counter_ns())


__all__ = [
    "TraceResult",
    "new_timeline",
    "phase_of",
    "record_error",
    "ssl_context_for",
    "timeout_error",
    "trace",
]
