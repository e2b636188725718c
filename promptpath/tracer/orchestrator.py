"""The tracer: one orchestrator for every transport (HTTP/1.1, HTTP/2, HTTP/3).

    resolve (dns stage) → Transport.connect (connect+tls, or quic_handshake)
    → Connection.request → status and stream checks → BodyIngest, piece by piece

Stages, the warm request, the deadline, error mapping and body ingest live here once;
a transport (net/http.py, net/quic.py) only stamps and pumps. The read loop stays tight:
nothing here renders.
"""

from __future__ import annotations

import gc
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

import anyio
import anyio.lowlevel

from promptpath.core.errors import (
    ConnectError,
    ErrorStage,
    PromptpathError,
    StreamError,
    TraceTimeout,
    UsageError,
)
from promptpath.core.findings import Finding
from promptpath.core.timeline import DNSAnswer, ErrorInfo, Family, ProxyInfo, Timeline
from promptpath.net import dns
from promptpath.net.tlsinfo import client_cert_refused, finish_tls, pem_cert_info
from promptpath.net.transport import (
    Body,
    BodyPiece,
    Connection,
    ConnectSpec,
    ProxyHop,
    Recorder,
    ResponseHead,
    Transport,
    TransportError,
    WireRequest,
)
from promptpath.options import MAX_TIMEOUT_S, RunOptions
from promptpath.tracer.cleartext import check_cleartext
from promptpath.tracer.ingest import (
    SNIFF_LIMIT,
    BodyIngest,
    is_event_stream,
    not_a_stream_error,
    status_error,
)
from promptpath.tracer.request import key_sent, prepare

#: How long to keep reading after the terminal marker or an error event.
AFTER_END_GRACE_S = 1.0
#: Longest wait for the body of an error answer (it only explains the status).
SNIFF_WAIT_S = 5.0
#: Stages open before the request (the open one is where a failure happened): a load-mode
#: stream's wait for a connection, and those a transport opens while connecting.
_CONNECT_STAGES = (
    "queue",
    "proxy_dns",
    "proxy_connect",
    "proxy_tls",
    "tunnel",
    "dns",
    "connect",
    "tls",
    "quic_handshake",
)


@dataclass(kw_only=True)
class TraceResult:
    """A traced request: its timeline, the error that ended it (if any), and findings."""

    options: RunOptions
    timeline: Timeline
    warm: TraceResult | None = None
    findings: list[Finding] = field(default_factory=list)
    h3: dict[str, Any] | None = None  # HTTP/3 discovery (Alt-Svc, HTTPS RR), TCP runs only

    @property
    def exc(self) -> PromptpathError | None:
        """The error that ended the trace: kept in one place, ``timeline.error``."""
        error = self.timeline.error
        return None if error is None else error.exc

    @property
    def ok(self) -> bool:
        return self.exc is None and (self.warm is None or self.warm.ok)


def new_timeline() -> Timeline:
    return Timeline(t0_ns=time.perf_counter_ns(), t0_unix_ns=time.time_ns())


def ssl_context_for(options: RunOptions) -> ssl.SSLContext:
    """A context of our own (ALPN is set on it per connection); loads the CA store."""
    ctx = ssl.create_default_context(cafile=options.cacert)
    if options.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if options.cert is not None:
        try:  # build_options checked them; a library caller may not have
            ctx.load_cert_chain(options.cert, options.key, password="")  # never prompts
        except (OSError, ssl.SSLError) as exc:
            reason = getattr(exc, "reason", None) or exc.strerror or type(exc).__name__
            raise UsageError(
                f"--cert/--key: cannot load them ({reason})", kind="bad_option"
            ) from exc
    return ctx


def alpn_for(options: RunOptions) -> tuple[str, ...]:
    """What to offer in ALPN for the HTTP version asked for."""
    if options.http == "3":
        return ("h3",)
    if options.http == "1.1":
        return ("http/1.1",)
    return ("http/1.1", "h2")


def transport_for(options: RunOptions) -> Transport:
    """The transport for ``--http`` (built before t0: it loads what it needs)."""
    if options.http == "3":
        from promptpath.net.quic import QuicTransport  # aioquic: only when asked for

        verify = not options.insecure
        client_cert = None if options.cert is None else (options.cert, options.key)
        return QuicTransport(
            options.target.host,
            cacert=options.cacert,
            verify=verify,
            client_cert=client_cert,
            keylog=options.keylog_file,
        )
    from promptpath.net.http import TCPTransport

    if options.http in ("2", "auto"):
        import h2.connection  # noqa: F401  httpcore imports it on the first HTTP/2 connection
    return TCPTransport(h2c=options.http == "2" and options.target.scheme == "http")


class Tracer:
    """Traced requests over one connection: the first opens it, a warm one reuses it.

    Each request gets its own Timeline; the recorder is switched to it, so every stamp a
    transport takes lands on the request it belongs to.
    """

    def __init__(
        self, options: RunOptions, transport: Transport, *, stop_after_tokens: int | None = None
    ) -> None:
        self.options = options
        self.transport = transport
        # Stop reading after this many content tokens and leave the body unread (the
        # ghost-stream probe's client walking away); ``stopped_ns`` says when it did.
        self.stop_after_tokens = stop_after_tokens
        self.stopped_ns: int | None = None
        self.recorder: Recorder | None = None
        self.connection: Connection | None = None
        self._first: Timeline | None = None
        self._ssl = ssl_context_for(options) if options.target.scheme == "https" else None
        https_proxy = options.proxy is not None and options.proxy.scheme == "https"
        # The proxy's own certificate: --proxy-cacert, else the origin's trust (--cacert, or
        # the system store).
        self._proxy_ssl = None
        if https_proxy:
            self._proxy_ssl = ssl.create_default_context(
                cafile=options.proxy_cacert or options.cacert
            )

    async def request(self, timeline: Timeline) -> PromptpathError | None:
        """Run one request into ``timeline``; the error that ended it, if any.

        --timeout counts from the timeline's t0: a load-mode stream that waited for a
        connection has spent that much of it already."""
        self._bind(timeline)
        options = self.options
        # The deadline on the timeline's clock too: the stage it cuts ends exactly there,
        # not at whenever the event loop got round to the cancellation.
        # Capped as check_timeout caps the option: a library caller's 1e300 must not
        # overflow the nanoseconds.
        deadline_ns = timeline.t0_ns + round(min(options.timeout, MAX_TIMEOUT_S) * 1e9)
        left = max(0.0, (deadline_ns - time.perf_counter_ns()) / 1e9)
        try:
            with anyio.fail_after(left):
                await self._exchange(timeline, time.monotonic() + left)
        except TimeoutError:
            exc: PromptpathError = timeout_error(options, phase_of(timeline, options))
            return record_error(timeline, exc, at_ns=deadline_ns)
        except PromptpathError as err:
            exc = err
        except (TransportError, OSError) as err:
            exc = transport_error(err, timeline, options)
        else:
            return None
        return record_error(timeline, exc)

    def _bind(self, timeline: Timeline) -> None:
        """Send the transport's stamps to ``timeline`` (one request at a time)."""
        if self.recorder is None:
            self.recorder = self.transport.recorder(timeline)
        else:
            self.recorder.switch(timeline)

    async def aclose(self) -> None:
        if self.connection is not None:
            with anyio.CancelScope(shield=True):
                await self.connection.aclose()
            self.connection = None

    async def connect(self, timeline: Timeline, deadline: float) -> Connection:
        """The dns stage, then the transport's own (connect+tls, or quic_handshake).

        Through a forward proxy the name resolved is the proxy's (``proxy_dns``): the
        origin's name is the proxy's business."""
        options = self.options
        host, port = options.target.host, options.target.port
        proxy = options.proxy
        # --connect-to: resolve and dial HOST2:PORT2 (--resolve may pin it, as in curl);
        # SNI, Host and certificate checks stay with the URL's host. Through a proxy,
        # CONNECT names HOST2:PORT2, as curl's does.
        rule = options.connect_to_for(host, port)
        dial_host, dial_port = (host, port) if rule is None else rule.destination(host, port)
        hop: ProxyHop | None = None
        addresses: tuple[tuple[str, Family], ...] = ()
        if proxy is not None:
            timeline.proxy = ProxyInfo(
                url=proxy.url, source=proxy.source, authenticated=proxy.username is not None
            )
            answer = await self._resolve(timeline, proxy.host, proxy.port, proxy=True)
            hop = ProxyHop(
                scheme=proxy.scheme,
                host=proxy.host,
                port=proxy.port,
                addresses=answer.addresses,
                authorization=proxy.authorization,
                ssl_context=self._proxy_ssl,
            )
        else:
            addresses = (await self._resolve(timeline, dial_host, dial_port)).addresses
        # Nothing has gone to the target yet: the last moment to keep a key off the wire.
        dialled = addresses if hop is None else hop.addresses
        check_cleartext(options, [ip for ip, _ in dialled])
        spec = ConnectSpec(
            host=host,
            port=port,
            connect_host=None if dial_host == host else dial_host,
            connect_port=None if dial_port == port else dial_port,
            scheme=options.target.scheme,
            addresses=addresses,
            alpn=alpn_for(options),
            ssl_context=self._ssl,
            deadline=deadline,
            proxy=hop,
        )
        assert self.recorder is not None, "request() made the recorder"
        if time.monotonic() >= deadline:
            raise TimeoutError  # the lookup used the time up: do not dial after the deadline
        return await self.transport.connect(spec, self.recorder)

    async def _resolve(
        self, timeline: Timeline, host: str, port: int, *, proxy: bool = False
    ) -> DNSAnswer:
        options = self.options
        return await dns.resolve_stage(
            timeline,
            host,
            port,
            family=options.family,
            override=options.resolve_override(host, port),
            resolver=options.resolver,
            timeout=min(options.timeout, 10.0),
            proxy=proxy,
        )

    async def _exchange(self, timeline: Timeline, deadline: float) -> None:
        conn = self.connection
        if conn is not None and conn.reusable and self._first is not None:
            timeline.reused_connection = True
            first = self._first
            timeline.address, timeline.family, timeline.tls = first.address, first.family, first.tls
        else:
            if time.monotonic() >= deadline:
                # Spent before the first step (a tiny --timeout, a long queue for a
                # connection): nothing is dialled after the deadline.
                raise TimeoutError
            await self.aclose()  # a connection the peer closed is not reused
            conn = self.connection = await self.connect(timeline, deadline)
            self._first = timeline
        if time.monotonic() >= deadline:
            raise TimeoutError  # the time ran out on the way: nothing is sent after it
        await self._send(conn, timeline)

    async def _send(self, conn: Connection, timeline: Timeline) -> None:
        """The request on ``conn`` and its whole response, into ``timeline``."""
        prepared = prepare(self.options)
        head, body = await conn.request(
            WireRequest(
                method=prepared.method,
                path=self.options.target.path,
                headers=tuple(prepared.headers),
                body=prepared.body,
            ),
            timeline,
        )
        try:
            timeline.status = head.status
            timeline.response_headers = list(head.headers)
            timeline.http_version = head.http_version
            if await consume(head, body, timeline, self.options, stop_after=self.stop_after_tokens):
                self.stopped_ns = time.perf_counter_ns()
                return  # the body stays unread: the caller closes the connection its way
        except BaseException:
            await body.aclose()
            raise
        await body.aclose()


async def trace(
    options: RunOptions, *, on_start: Callable[[TraceResult], None] | None = None
) -> TraceResult:
    """Trace one prompt (and, with --warm, a second one over the same connection).

    ``on_start`` receives the result as soon as it exists, so a caller interrupted by
    Ctrl-C can still report the partial timeline."""
    problem = None
    if options.http == "3" and options.target.scheme != "https":
        problem = "HTTP/3 needs an https:// target (QUIC always runs TLS)"
    elif options.http == "3" and options.proxy is not None:
        problem = (
            f"HTTP/3 cannot go through the proxy {options.proxy.url} ({options.proxy.source}):"
            " QUIC does not cross an HTTP CONNECT proxy. Use --http 2, or --noproxy"
            f" {options.target.host} to go direct"
        )
    if problem is not None:
        timeline = new_timeline()
        exc = UsageError(problem, kind="bad_option")
        record_error(timeline, exc)
        return TraceResult(options=options, timeline=timeline)
    if options.resolver is not None:
        from promptpath.net.dnsquery import load_dnspython

        load_dnspython()  # dnspython loads lazily inside the first query: not DNS time
    if options.target.scheme == "https":
        import cryptography.x509  # noqa: F401  the certificate is parsed with it
    transport = transport_for(options)  # imports, CA store: before t0, not the network
    # A full collection in the middle of a stream stalls the read loop for ~20 ms
    # (measured), which would show as a late token. Collect now, then hold the collector
    # off until the trace is done; reference counting still frees what it can.
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return await _trace(options, transport, on_start)
    finally:
        if was_enabled:
            gc.enable()


async def _trace(
    options: RunOptions,
    transport: Transport,
    on_start: Callable[[TraceResult], None] | None,
) -> TraceResult:
    tracer = Tracer(options, transport)  # loads the CA store: before t0, not the network
    timeline = new_timeline()
    result = TraceResult(options=options, timeline=timeline)
    if on_start is not None:
        on_start(result)
    try:
        await tracer.request(timeline)
        if options.warm and result.exc is None:
            warm = TraceResult(options=options, timeline=new_timeline())
            await tracer.request(warm.timeline)
            result.warm = warm
    finally:
        await tracer.aclose()
    finish_tls(timeline.tls)
    tls = timeline.tls
    if tls is not None and tls.client_cert_sent and options.cert is not None:
        tls.client_cert = pem_cert_info(options.cert)  # after the trace: parsing costs ms
    return result


# -- the body -----------------------------------------------------------------------------


async def consume(
    head: ResponseHead,
    body: Body,
    timeline: Timeline,
    options: RunOptions,
    *,
    stop_after: int | None = None,
) -> bool:
    """Judge the response and feed its body to the decoder, piece by piece (every transport).

    True when it stopped early, ``stop_after`` content tokens in: the rest is left unread."""
    if head.status >= 300:
        body_text = await read_limited(body)
        refused = client_cert_status(timeline, body_text)
        if refused is not None:
            raise refused
        raise status_error(
            timeline, body_text, key_env=options.api_key_env, key_sent=key_sent(options)
        )
    if not is_event_stream(timeline):
        raise not_a_stream_error(timeline, await read_limited(body, 2048), options.provider)
    ingest = BodyIngest(timeline, options.provider)
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
    except TransportError as err:
        # A reset after the terminal marker cuts nothing; before it, the stream is truncated.
        reason = network_reason(err.reason, timeline)
        failure = ingest.ended_abruptly(reason, time.perf_counter_ns())
        if failure is not None:
            raise failure from err
        return False
    ingest.finish(last_ns)
    return False


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


# -- errors -------------------------------------------------------------------------------


def network_reason(reason: str, timeline: Timeline) -> str:
    """Words for a transport failure: how the peer closed (seen at the socket), and why."""
    close = timeline.close
    what = {
        "rst": "the peer reset the connection (RST)",
        "fin": "the peer closed the connection (FIN)",
        "tls_close_notify": "the peer closed the TLS session (close_notify)",
    }.get(close.kind if close is not None else "", "")
    return "; ".join(p for p in (what, reason.strip()) if p) or "connection failed"


def transport_error(
    err: TransportError | OSError, timeline: Timeline, options: RunOptions
) -> PromptpathError:
    """The one mapping from a transport's failure to a PromptpathError with its stage."""
    stage = phase_of(timeline, options)
    reason = err.reason if isinstance(err, TransportError) else str(err)
    if isinstance(err, TransportError) and err.protocol:
        return StreamError(
            f"HTTP protocol error in stage {stage!r}: {network_reason(reason, timeline)}",
            stage=stage,
            kind="protocol_error",
        )
    cls = ConnectError if stage in ("dns", "connect", "quic_handshake") else StreamError
    return cls(
        f"network error in stage {stage!r}: {network_reason(reason, timeline)}",
        stage=stage,
        kind="network_error",
    )


def timeout_error(options: RunOptions, stage: ErrorStage) -> TraceTimeout:
    """The error for a trace that --timeout cut short in ``stage`` (naming the proxy when
    the time ran out on the way to it or waiting for its answer)."""
    where = ""
    if options.proxy is not None and stage in ("proxy_dns", "proxy_connect", "proxy_tls", "tunnel"):
        where = f" (the proxy {options.proxy.url})"
    return TraceTimeout(
        f"timed out after {options.timeout:g} s in stage {stage!r}{where}",
        stage=stage,
        kind="timeout",
        timeout_s=options.timeout,
    )


def record_error(
    timeline: Timeline, exc: PromptpathError, *, at_ns: int | None = None
) -> PromptpathError:
    """Close the stages left open at ``at_ns`` (default now) and put ``exc``, stamped with
    that moment, on the timeline; return it."""
    now = time.perf_counter_ns() if at_ns is None else at_ns
    for stage in timeline.stages:
        if stage.end_ns is None:
            # A stage begun after the deadline (the loop was late to cancel) ends as it began.
            stage.end_ns, stage.ok = max(now, stage.start_ns), False
    timeline.error = ErrorInfo.from_error(exc, now)
    return exc


def phase_of(timeline: Timeline, options: RunOptions) -> ErrorStage:
    """The stage a trace was in, from the stage left open or the milestones it reached."""
    open_stage = timeline.current_stage
    if open_stage in _CONNECT_STAGES:
        return cast(ErrorStage, open_stage)  # timeline stage names are plain str
    m = timeline.milestones
    quic = options.http == "3"
    proxied = options.proxy is not None
    if not timeline.reused_connection and "connected" not in m:
        if "dns_done" not in m:
            return "proxy_dns" if proxied else "dns"
        if proxied:
            return "proxy_connect" if timeline.stage("proxy_connect") is None else "tunnel"
        return "quic_handshake" if quic else "connect"
    https_over_tcp = options.target.scheme == "https" and not quic
    if https_over_tcp and not timeline.reused_connection and "tls_done" not in m:
        return "tls"
    if "request_sent" not in m:
        return "request"
    if "ttfb" not in m:
        return "wait"
    if "ttft" not in m:
        return "first_token"
    return "stream"


def pair_options(options: RunOptions) -> tuple[RunOptions, RunOptions]:
    """The same prompt over HTTP/2 and over HTTP/3 (--compare-http)."""
    return replace(options, http="2"), replace(options, http="3")


async def trace_pair(
    options: RunOptions,
    *,
    runs: int = 1,
    on_start: Callable[[TraceResult], None] | None = None,
) -> list[TraceResult]:
    """Trace ``runs`` times over each of HTTP/2 and HTTP/3, each on a fresh connection,
    one after the other (run together they would share the CPU and the path), in the
    order they ran. Rounds alternate which protocol goes first (h2 h3, h3 h2, ...) so a
    drift of the machine or the path lands on both. A failed run ends the rounds once its
    round is done (each protocol then has a run): the failure is the finding, and
    repeating a dead path only multiplies its timeout.
    ``on_start`` gets each result as soon as it exists, as ``trace`` gives it."""
    h2, h3 = pair_options(options)
    results: list[TraceResult] = []
    for i in range(runs):
        for opts in (h2, h3) if i % 2 == 0 else (h3, h2):
            results.append(await trace(opts, on_start=on_start))
        if any(r.timeline.error is not None for r in results[-2:]):
            break
    return results


__all__ = [
    "AFTER_END_GRACE_S",
    "TraceResult",
    "Tracer",
    "new_timeline",
    "pair_options",
    "phase_of",
    "record_error",
    "ssl_context_for",
    "timeout_error",
    "trace",
    "trace_pair",
]
