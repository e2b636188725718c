"""One session context for every entry point: a single run (and --warm), --count with or
without --reuse, and load mode all set up, hold and finish their runs here.

    refusal(options)               what cannot run at all (HTTP/3 where QUIC cannot go)
    Session(options)               preloads and the transport: before any t0
      await .prepare()             the resolver's first-call costs: before any t0 too
      .new_result(tracer.sent)     a TraceResult whose timeline records the request
      with gc_held(): ...          no full collection inside a stream
      .finish(results)             TLS details parsed once per connection, mTLS included

Which connection each request goes on is the strategy's (tracer/strategy.py: fresh,
reuse; tracer/load.py: a pool of K), passed to the one Tracer (orchestrator.py). What
the set-up loads and what is finished after the runs is written once here, so the entry
points cannot drift apart again.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from promptpath.core.errors import UsageError
from promptpath.core.timeline import CertInfo, SentRequest, Timeline
from promptpath.net import dns
from promptpath.net.rxstamp import keep_stamping_on
from promptpath.net.tlsinfo import finish_tls, pem_cert_info
from promptpath.net.transport import Transport
from promptpath.options import RunOptions
from promptpath.result import TraceResult
from promptpath.tracer.failure import record_error
from promptpath.tracer.request import prepare, sent_request

#: Builds the transport for a run's options (default: ``transport_for``, by --http). Tests
#: pass a scripted one (tests/helpers/scripted.py).
TransportFactory = Callable[[RunOptions], Transport]


def refusal(options: RunOptions) -> UsageError | None:
    """Why these options cannot run at all (HTTP/3 where QUIC cannot go), or None."""
    problem = None
    if options.http == "3" and options.target.scheme != "https":
        problem = "HTTP/3 needs an https:// target (QUIC always runs TLS)"
    elif options.http == "3" and options.proxy is not None:
        problem = (
            f"HTTP/3 cannot go through the proxy {options.proxy.url} ({options.proxy.source}):"
            " QUIC does not cross an HTTP CONNECT proxy. Use --http 2, or --noproxy"
            f" {options.target.host} to go direct"
        )
    return None if problem is None else UsageError(problem, kind="bad_option")


def refused_result(options: RunOptions, exc: UsageError) -> TraceResult:
    """A run that never started: its timeline carries the error and the request that
    would have gone."""
    timeline = new_timeline()
    timeline.request = sent_request(options, prepare(options))
    record_error(timeline, exc)
    return TraceResult(options=options, timeline=timeline)


def preload(options: RunOptions) -> None:
    """What a first run would otherwise load inside its timed stages (the resolver's own
    first-call costs are async: ``Session.prepare``). Nothing over TCP: the certificate is
    read after the trace (``finish``), by the ssl module when it verified it, and by
    cryptography, imported then, when it did not (-k)."""
    return


@contextmanager
def gc_held() -> Iterator[None]:
    """A full collection in the middle of a stream stalls the read loop for ~20 ms
    (measured), which would show as a late token: the collector is held off until the
    block ends; reference counting still frees what it can.

    What is alive when the block starts is frozen out of the collector's view
    (``gc.freeze``) rather than collected: a full collection here cost 10-14 ms of every
    run before t0 and freed nothing the run needed (the objects are the imports'), and with
    the collector off inside the block no collection can land in a stream either way. They
    are unfrozen when the block ends, so a series or an exporter that runs on collects them
    as before. (An A/B of the collection's removal against the capture at load 6-7: the
    wait error read +0.02 to +0.6 ms with it and without it alike.)"""
    gc.freeze()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was_enabled:
            gc.enable()


class Session:
    """What every run of one set of options needs before its t0 and after its end.

    The constructor loads what the first run would otherwise load inside a timed stage
    (dnspython, cryptography, the transport's imports and CA store)."""

    def __init__(
        self, options: RunOptions, *, transport_factory: TransportFactory | None = None
    ) -> None:
        self.options = options
        preload(options)
        self.transport = (transport_factory or transport_for)(options)
        self._finished: set[int] = set()
        self._client_cert: CertInfo | None = None

    async def prepare(self) -> None:
        """Before the first t0: the resolver's first-call costs (dnspython's lazy imports;
        the executor thread, idna codec and glibc configuration of the system's), and the
        kernel's arrival stamping switched on (rxstamp.keep_stamping_on)."""
        keep_stamping_on()
        await dns.prepare(self.options.resolver)

    def new_result(self, sent: SentRequest) -> TraceResult:
        """A result for the next run: t0 is now, and ``sent`` (what the tracer will send)
        is on its timeline whatever becomes of the run."""
        timeline = new_timeline()
        timeline.request = sent
        return TraceResult(options=self.options, timeline=timeline)

    def finish(self, results: Iterable[TraceResult]) -> None:
        """After the runs (parsing certificates costs ms): each connection's TLS details
        once, the warm and reused requests that share them included, and the client
        certificate we sent, read once per session."""
        for result in results:
            for run in (result, result.warm):
                tls = None if run is None else run.timeline.tls
                if tls is None or id(tls) in self._finished:
                    continue
                self._finished.add(id(tls))
                finish_tls(tls)
                cert = self.options.cert
                if tls.client_cert_sent and cert is not None and tls.client_cert is None:
                    if self._client_cert is None:
                        self._client_cert = pem_cert_info(cert)
                    tls.client_cert = self._client_cert


def new_timeline() -> Timeline:
    return Timeline(t0_ns=time.perf_counter_ns(), t0_unix_ns=time.time_ns())


def transport_for(options: RunOptions) -> Transport:
    """The transport for ``--http`` (built before t0: it loads what it needs)."""
    if options.target.websocket:
        from promptpath.net.websocket import WebSocketTransport, WSSettings

        return WebSocketTransport(
            WSSettings(
                # Browsers and the websockets library offer permessage-deflate; the openai
                # SDK turns it off (compression=None, observed: no extension offered).
                deflate=options.client == "browser",
                ping_interval_s=None if options.ws_ping_ms is None else options.ws_ping_ms / 1e3,
                ping_max=options.ws_ping_count,
            )
        )
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
        from promptpath.net.http2 import warm_up

        warm_up()  # h2's imports and first-call costs: before t0, not the request stage
    return TCPTransport(h2c=options.http == "2" and options.target.scheme == "http")


__all__ = [
    "Session",
    "TransportFactory",
    "gc_held",
    "new_timeline",
    "preload",
    "refusal",
    "refused_result",
    "transport_for",
]
