"""The tracer: one orchestrator for every transport (HTTP/1.1, HTTP/2, HTTP/3).

    resolve (dns stage) → Transport.connect (connect+tls, or quic_handshake)
    → Connection.request → status and stream checks → BodyIngest, piece by piece

Stages, the deadline and the request live here once; which connection a request goes
on is a strategy's (tracer/strategy.py), the set-up and finish every entry point shares
is tracer/session.py, the body is tracer/body.py and the error mapping tracer/failure.py.
A transport (net/http.py, net/quic.py) only stamps and pumps. The read loop stays tight:
nothing here renders.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from dataclasses import replace

import anyio

from promptpath.core.errors import PromptpathError, UsageError
from promptpath.core.timeline import DNSAnswer, Family, ProxyInfo, Timeline
from promptpath.net import dns, flows
from promptpath.net.transport import (
    Connection,
    ConnectSpec,
    ProxyHop,
    Recorder,
    Transport,
    TransportError,
    WireRequest,
)
from promptpath.options import MAX_TIMEOUT_S, RunOptions
from promptpath.result import TraceResult
from promptpath.tracer.body import AFTER_END_GRACE_S, consume
from promptpath.tracer.cleartext import check_cleartext
from promptpath.tracer.failure import (
    phase_of,
    record_error,
    timeout_error,
    transport_error,
)
from promptpath.tracer.request import PreparedRequest, prepare, sent_request
from promptpath.tracer.session import (
    Session,
    TransportFactory,
    gc_held,
    new_timeline,
    refusal,
    refused_result,
    transport_for,
)
from promptpath.tracer.strategy import ConnectionStrategy, OneConnection


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


class Tracer:
    """Traced requests, each into its own Timeline, over the connections ``strategy``
    gives (default: one connection, reused while the peer keeps it open, as --warm does).

    Built before t0: it prepares the request and loads the CA store."""

    def __init__(
        self,
        options: RunOptions,
        transport: Transport,
        *,
        stop_after_tokens: int | None = None,
        strategy: ConnectionStrategy | None = None,
    ) -> None:
        self.options = options
        self._transport = transport
        self.strategy: ConnectionStrategy = strategy or OneConnection(reuse=True)
        # Stop reading after this many content tokens and leave the body unread (the
        # ghost-stream probe's client walking away); ``stopped_ns`` says when it did.
        self.stop_after_tokens = stop_after_tokens
        self.stopped_ns: int | None = None
        # What these options send, recorded on each timeline from its start, so a run that
        # fails before its request still says what it would have sent. Prepared here,
        # before t0, the first request goes as it is: its body and headers depend on the
        # options alone, so building them once the connection is ready would put our own
        # CPU inside the request stage (issue 25).
        self._first: PreparedRequest | None = prepare(options)
        self.sent = sent_request(options, self._first)
        # The first connection a request of ours opens is handed the first request, to
        # send with its handshake's last flight where the transport can (HTTP/3: with our
        # Finished); it belongs to the request whose timeline opened that connection, which
        # sends it (``_send``). A probe's own connect (``connect`` called directly, for an
        # OPTIONS or an upgrade of its own) is never handed the prompt.
        self._early: tuple[Timeline, WireRequest] | None = None
        self._requesting: set[int] = set()  # id() of the timelines ``request`` is running
        self._ssl = ssl_context_for(options) if options.target.scheme == "https" else None
        https_proxy = options.proxy is not None and options.proxy.scheme == "https"
        # The proxy's own certificate: --proxy-cacert, else the origin's trust (--cacert, or
        # the system store).
        self._proxy_ssl = None
        if https_proxy:
            self._proxy_ssl = ssl.create_default_context(
                cafile=options.proxy_cacert or options.cacert
            )

    @property
    def transport(self) -> Transport:
        return self._transport

    @property
    def connection(self) -> Connection | None:
        """The connection the last request used (the strategy's), for a caller going on."""
        return self.strategy.connection

    @property
    def recorder(self) -> Recorder | None:
        return self.strategy.recorder

    async def request(
        self, timeline: Timeline, *, index: int | None = None
    ) -> PromptpathError | None:
        """Run one request into ``timeline``; the error that ended it, if any.

        --timeout counts from the timeline's t0: a load-mode stream that waited for a
        connection has spent that much of it already. ``index``: the stream's number,
        for a strategy that places streams by it."""
        # --pcap DIR: the sockets this request opens belong to its run's file.
        with flows.tagged(id(timeline)):
            return await self._request(timeline, index)

    async def _request(self, timeline: Timeline, index: int | None) -> PromptpathError | None:
        timeline.request = self.sent
        options = self.options
        # The deadline on the timeline's clock too: the stage it cuts ends exactly there,
        # not at whenever the event loop got round to the cancellation.
        # Capped as check_timeout caps the option: a library caller's 1e300 must not
        # overflow the nanoseconds.
        deadline_ns = timeline.t0_ns + round(min(options.timeout, MAX_TIMEOUT_S) * 1e9)
        left = max(0.0, (deadline_ns - time.perf_counter_ns()) / 1e9)
        deadline = time.monotonic() + left
        self._requesting.add(id(timeline))
        try:
            with anyio.fail_after(left):
                lease = await self.strategy.acquire(self, timeline, deadline, index)
                try:
                    if time.monotonic() >= deadline:
                        # The time ran out on the way (or before: a tiny --timeout, a long
                        # queue for a reused connection): nothing is sent after it (a first
                        # request that left with the handshake went before it).
                        raise TimeoutError
                    await self._send(lease.connection, timeline)
                finally:
                    lease.release(timeline)
        except TimeoutError:
            exc: PromptpathError = timeout_error(options, phase_of(timeline, options))
            return record_error(timeline, exc, at_ns=deadline_ns)
        except PromptpathError as err:
            exc = err
        except (TransportError, OSError) as err:
            exc = transport_error(err, timeline, options)
        else:
            return None
        finally:
            self._requesting.discard(id(timeline))
        return record_error(timeline, exc)

    async def aclose(self) -> None:
        await self.strategy.aclose()

    async def connect(self, timeline: Timeline, deadline: float, recorder: Recorder) -> Connection:
        """The dns stage, then the transport's own (connect+tls, or quic_handshake).

        Through a forward proxy the name resolved is the proxy's (``proxy_dns``): the
        origin's name is the proxy's business."""
        options = self.options
        if time.monotonic() >= deadline:
            raise TimeoutError  # spent before the first step: nothing is dialled after it
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
        if time.monotonic() >= deadline:
            raise TimeoutError  # the lookup used the time up: do not dial after the deadline
        prepared = self._first
        if prepared is None or id(timeline) not in self._requesting:
            return await self.transport.connect(spec, recorder)
        first = self._wire(prepared)
        self._first, self._early = None, (timeline, first)
        try:
            return await self.transport.connect(replace(spec, first_request=first), recorder)
        except BaseException:
            # No connection: the next one is handed the request prepared before t0, as it
            # would have been had this one never been tried.
            self._first, self._early = prepared, None
            raise

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

    def _wire(self, prepared: PreparedRequest) -> WireRequest:
        return WireRequest(
            method=prepared.method,
            path=self.options.target.path,
            headers=tuple(prepared.headers),
            body=prepared.body,
            messages=prepared.messages,
        )

    async def _send(self, conn: Connection, timeline: Timeline) -> None:
        """The request on ``conn`` and its whole response, into ``timeline``."""
        # The first request as prepared before t0 (handed to the connection this timeline
        # opened, or not yet claimed); each later one prepared again, as sent (a SigV4
        # signature carries its time; a test may vary it): the record follows what went.
        early = self._early
        if early is not None and early[0] is timeline:
            self._early = None
            wire = early[1]  # the very object the connection was handed
            timeline.request = self.sent
        elif self._first is not None:
            wire, self._first = self._wire(self._first), None
            timeline.request = self.sent
        else:
            prepared = prepare(self.options)
            wire = self._wire(prepared)
            timeline.request = sent_request(self.options, prepared)
        head, body = await conn.request(wire, timeline)
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
    options: RunOptions,
    *,
    on_start: Callable[[TraceResult], None] | None = None,
    transport_factory: TransportFactory | None = None,
) -> TraceResult:
    """Trace one prompt (and, with --warm, a second one over the same connection).

    ``on_start`` receives the result as soon as it exists, so a caller interrupted by
    Ctrl-C can still report the partial timeline. ``transport_factory`` builds the
    transport instead of --http's (a test's scripted one)."""
    refused = refusal(options)
    if refused is not None:
        return refused_result(options, refused)
    # Imports, the transport, the CA store, the request: before t0, not the network.
    session = Session(options, transport_factory=transport_factory)
    await session.prepare()
    tracer = Tracer(options, session.transport, strategy=OneConnection(reuse=options.warm))
    with gc_held():
        result = session.new_result(tracer.sent)
        if on_start is not None:
            on_start(result)
        try:
            await tracer.request(result.timeline)
            if options.warm and result.exc is None:
                warm = session.new_result(tracer.sent)
                await tracer.request(warm.timeline)
                result.warm = warm
        finally:
            await tracer.aclose()
    session.finish([result])
    return result


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
    "ConnectionStrategy",
    "Tracer",
    "consume",
    "new_timeline",
    "pair_options",
    "phase_of",
    "record_error",
    "ssl_context_for",
    "timeout_error",
    "trace",
    "trace_pair",
    "transport_error",
    "transport_for",
]
