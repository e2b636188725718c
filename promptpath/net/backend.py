"""TCP and TLS for the HTTP/1.1 and HTTP/2 transport, timed below HTTP.

``connect_tcp`` connects to each resolved address in turn (each attempt recorded; DNS is
the tracer's stage, done before), ``TracedNetworkStream.start_tls`` times the handshake,
and ``StampingStream`` wraps the raw socket so every read *below* TLS is stamped with
``perf_counter_ns`` and the way the peer closed (FIN, RST, close_notify) is kept where it
is seen. The result is an ``httpcore.AsyncNetworkStream``, so httpcore's own HTTP/1.1 and
HTTP/2 connection classes run on it unchanged.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import ssl
import time
from collections.abc import Iterator
from typing import Any, Literal

import anyio
import anyio.abc
import httpcore
from anyio.streams.tls import TLSAttribute, TLSStream

from promptpath.core.addr import fmt_addr
from promptpath.core.errors import ConnectError, ErrorKind, TLSError
from promptpath.core.timeline import ConnectAttempt, Stage, Timeline, TLSInfo
from promptpath.net import dns, flows
from promptpath.net.clientauth import ClientAuth, HandshakeTap
from promptpath.net.rxstamp import RxStampedStream, perf_ns_of
from promptpath.net.tcp import connect_address
from promptpath.net.tlsinfo import (
    cert_info,
    client_cert_refused,
    describe_tls,
    tls_failure,
)
from promptpath.net.transport import Recorder


class StampingStream(anyio.abc.ByteStream):
    """The raw TCP byte stream, stamping each receive and send; the rest passes through."""

    def __init__(self, inner: anyio.abc.SocketStream, recorder: Recorder) -> None:
        self._inner = inner
        self._recorder = recorder
        self.eof_ns: int | None = None
        # Sends are stamped as they begin, when the bytes are handed to the socket: the
        # TLS stage runs from the ClientHello's send to the last handshake send.
        self.send_began_ns: int | None = None
        self.first_send_ns: int | None = None  # see expect_send()
        self._expecting_send = False
        self.tap: HandshakeTap | None = None  # the bytes of a handshake under way

    def expect_send(self) -> None:
        """Keep the start of the next send in ``first_send_ns``: when TLS begins, that
        send carries the ClientHello, and building it is not handshake time."""
        self.first_send_ns = None
        self._expecting_send = True

    async def receive(self, max_bytes: int = 65536) -> bytes:
        try:
            data = await self._inner.receive(max_bytes)
        except anyio.EndOfStream:
            self.eof_ns = self._eof_stamp()
            self._recorder.closed("fin", self.eof_ns)
            raise
        except anyio.BrokenResourceError as exc:
            # How the peer ended the connection is evidence (FIN vs RST): keep it here, at
            # the socket, rather than guessing from the HTTP library's exception types.
            if isinstance(exc.__cause__, ConnectionResetError):
                self._recorder.closed("rst", time.perf_counter_ns())
            raise
        self._recorder.read(self._stamp(), len(data))
        if self.tap is not None:
            self.tap.received += data
        return data

    def prefetch(self) -> None:
        """Take what the socket holds now, stamped, for the next receive (rxstamp.py):
        a reader that cannot run yet keeps its packets from merging in the kernel."""
        inner = self._inner
        if isinstance(inner, RxStampedStream):
            inner.prefetch()

    def _stamp(self) -> int:
        """When the read's bytes arrived: the kernel's receive stamp mapped onto the
        perf_counter clock (rxstamp.py), else now. Never before the previous read's."""
        now = time.perf_counter_ns()
        inner = self._inner
        rx = inner.rx_unix_ns if isinstance(inner, RxStampedStream) else None
        if rx is None:
            return now
        stamp = perf_ns_of(rx, now)
        last = self._recorder.last_read_ns
        return stamp if last is None or stamp >= last else last

    def _eof_stamp(self) -> int:
        """When the FIN arrived: the kernel's word (rxstamp.py), else now; never before
        the last read's stamp (the FIN came after those bytes) nor after now."""
        now = time.perf_counter_ns()
        inner = self._inner
        fin = inner.eof_ns if isinstance(inner, RxStampedStream) else None
        if fin is None:
            return now
        last = self._recorder.last_read_ns
        return min(now, fin if last is None else max(fin, last))

    async def send(self, item: bytes) -> None:
        self.send_began_ns = time.perf_counter_ns()
        if self._expecting_send:
            self._expecting_send = False
            self.first_send_ns = self.send_began_ns
        inner = self._inner
        await inner.send(item)
        sent = inner.sent_ns if isinstance(inner, RxStampedStream) else None
        self._recorder.wrote(time.perf_counter_ns() if sent is None else sent, len(item))
        if self.tap is not None:
            self.tap.sent += item

    async def send_eof(self) -> None:
        await self._inner.send_eof()

    async def aclose(self) -> None:
        await self._inner.aclose()

    @property
    def extra_attributes(self) -> Any:
        # Socket attributes (addresses, the raw socket) pass through to TLS and httpcore.
        return self._inner.extra_attributes


@contextlib.contextmanager
def _map_exceptions(mapping: dict[type[Exception], type[Exception]]) -> Iterator[None]:
    """Translate anyio's exceptions into the httpcore ones its connection code expects."""
    try:
        yield
    except Exception as exc:
        for source, target in mapping.items():
            if isinstance(exc, source):
                cause = exc.__cause__
                if not str(exc) and isinstance(cause, OSError) and cause.errno:
                    raise target(os.strerror(cause.errno)) from exc  # "Connection reset by peer"
                raise target(str(exc)) from exc
        raise


def _is_readable(sock: socket.socket | None) -> bool:
    """An idle pooled connection with something to read has been closed (or spoken to) by
    the peer: httpcore asks before reusing it."""
    if sock is None or sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


_READ_ERRORS: dict[type[Exception], type[Exception]] = {
    TimeoutError: httpcore.ReadTimeout,
    anyio.BrokenResourceError: httpcore.ReadError,
    anyio.ClosedResourceError: httpcore.ReadError,
}
_WRITE_ERRORS: dict[type[Exception], type[Exception]] = {
    TimeoutError: httpcore.WriteTimeout,
    anyio.BrokenResourceError: httpcore.WriteError,
    anyio.ClosedResourceError: httpcore.WriteError,
}


class TracedNetworkStream(httpcore.AsyncNetworkStream):
    """What httpcore reads and writes: the stamping stream, or TLS over it."""

    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        raw: StampingStream,
        recorder: Recorder,
        *,
        pending_auth: tuple[str, ClientAuth] | None = None,
    ) -> None:
        self._stream = stream
        self.raw = raw
        self._recorder = recorder
        # (host, what the handshake showed) while a TLS 1.3 server may still refuse the
        # client certificate it asked for: until the first byte of the response.
        self._pending_auth = pending_auth

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        # No cancel scope without a timeout (httpcore passes none): one per read adds up.
        deadline = contextlib.nullcontext() if timeout is None else anyio.fail_after(timeout)
        with _map_exceptions(_READ_ERRORS), deadline:
            try:
                data = await self._stream.receive(max_bytes)
            except anyio.EndOfStream:
                if self._stream is not self.raw and self.raw.eof_ns is None:
                    # TLS ended with close_notify (in the last read) before any FIN.
                    self._recorder.closed("tls_close_notify", self._recorder.last_read_ns)
                self._auth_refused("it closed the connection right after the handshake")
                return b""
            except (anyio.BrokenResourceError, ssl.SSLError) as exc:
                self._auth_refused(_refusal_words(exc))
                raise
            self._pending_auth = None
            return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        deadline = contextlib.nullcontext() if timeout is None else anyio.fail_after(timeout)
        with _map_exceptions(_WRITE_ERRORS), deadline:
            try:
                await self._stream.send(buffer)
            except (anyio.BrokenResourceError, ssl.SSLError) as exc:
                self._auth_refused(_refusal_words(exc))
                raise

    def _auth_refused(self, how: str) -> None:
        """A TLS 1.3 server checks the client certificate it asked for after the client's
        handshake is over, and says no (an alert, or just a close) on the first read or
        write: that is a TLS failure, reported in the ``tls`` stage, not a network error."""
        pending, self._pending_auth = self._pending_auth, None
        if pending is None:
            return
        host, auth = pending
        stage = self._recorder.timeline.stage("tls")
        if stage is not None:
            stage.ok = False
        raise client_cert_refused(sent=auth.sent, host=host, how=how)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
        *,
        alpn: tuple[str, ...] = (),
        stage_name: Literal["tls", "proxy_tls"] = "tls",
    ) -> TracedNetworkStream:
        """The TLS handshake over this stream, as the ``tls`` stage (``proxy_tls`` with an
        https:// proxy). Over a CONNECT tunnel through an https:// proxy this is TLS inside
        TLS: it wraps whatever this stream is, while reads stay stamped below both.

        ``alpn`` is set on ``ssl_context`` here (an SSLContext keeps no readable list of
        what it offers): use a fresh context per connection."""
        timeline = self._recorder.timeline
        if alpn:
            ssl_context.set_alpn_protocols(list(alpn))
        sni = (
            None
            if server_hostname is None or dns.is_ip_literal(server_hostname)
            else server_hostname
        )
        stage = timeline.begin(stage_name, time.perf_counter_ns(), sni=sni)
        self.raw.expect_send()
        self.raw.tap = tap = HandshakeTap()
        try:
            with anyio.fail_after(timeout):
                tls = await TLSStream.wrap(
                    self._stream,
                    ssl_context=ssl_context,
                    hostname=server_hostname,
                    standard_compatible=False,
                )
        except ssl.SSLError as exc:
            _start_at_client_hello(stage, self.raw, timeline)
            timeline.end(stage_name, time.perf_counter_ns(), ok=False)
            elapsed_ns = _since(stage.start_ns)
            address = self._stream.extra(anyio.abc.SocketAttribute.remote_address, None)
            await self._stream.aclose()
            if stage_name == "tls":
                _raise_if_auth_refused(tap, server_hostname or "", _refusal_words(exc), exc)
            cert = None
            # Through a CONNECT tunnel the socket's peer is the proxy: a second handshake
            # would need a second tunnel, so the failure goes without the certificate.
            if (
                isinstance(exc, ssl.SSLCertVerificationError)
                and stage_name == "tls"
                and timeline.proxy is None
                and isinstance(address, tuple)
            ):
                der = await _unverified_peer_cert(address[0], address[1], server_hostname)
                cert = cert_info(der)
                timeline.tls = TLSInfo(
                    sni=sni,
                    alpn_offered=alpn,
                    verified=False,
                    verify_error=exc.verify_message or exc.reason,
                    cert=cert,
                    cert_der=der,
                )
            error = tls_failure(exc, host=server_hostname or "", elapsed_ns=elapsed_ns, cert=cert)
            error.stage = stage_name
            raise error from exc
        except (anyio.BrokenResourceError, anyio.EndOfStream, OSError) as exc:
            _start_at_client_hello(stage, self.raw, timeline)
            timeline.end(stage_name, time.perf_counter_ns(), ok=False)
            await self._stream.aclose()
            if stage_name == "tls":
                how = "it closed the connection during the handshake"
                _raise_if_auth_refused(tap, server_hostname or "", how, exc)
            whom = "the proxy " if stage_name == "proxy_tls" else ""
            raise TLSError(
                f"TLS: the peer closed the connection during the handshake with {whom}"
                f"{server_hostname} (not a TLS server on this port, or it rejected our"
                " ClientHello)",
                stage=stage_name,
                kind="handshake_closed",
            ) from exc
        finally:
            self.raw.tap = None
        _start_at_client_hello(stage, self.raw, timeline)
        end = _handshake_done(stage, self.raw, self._recorder)
        timeline.end(stage_name, end)
        info = describe_tls(
            tls.extra(TLSAttribute.ssl_object),
            sni=sni,
            alpn_offered=alpn,
            verified=None if ssl_context.verify_mode == ssl.CERT_NONE else True,
        )
        if stage_name == "proxy_tls":
            if timeline.proxy is not None:
                timeline.proxy.tls = info
            return TracedNetworkStream(tls, self.raw, self._recorder)
        timeline.mark("tls_done", end)
        timeline.tls = info
        auth = tap.client_auth(info.version)
        info.client_cert_requested, info.client_cert_sent = auth.requested, auth.sent
        # Only TLS 1.3 leaves the verdict on our certificate for after the handshake.
        pending = (
            (server_hostname or "", auth) if auth.requested and info.version == "TLSv1.3" else None
        )
        return TracedNetworkStream(tls, self.raw, self._recorder, pending_auth=pending)

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._stream.extra(TLSAttribute.ssl_object, None)
        if info == "client_addr":
            return self._stream.extra(anyio.abc.SocketAttribute.local_address, None)
        if info == "server_addr":
            return self._stream.extra(anyio.abc.SocketAttribute.remote_address, None)
        if info == "socket":
            return self._stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        if info == "is_readable":
            sock = self._stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
            return _is_readable(sock)
        return None


def _refusal_words(exc: BaseException) -> str:
    """How the peer ended a TLS session, from the alert it sent or the socket's error."""
    for err in (exc, exc.__cause__, exc.__context__):
        if isinstance(err, ssl.SSLError) and err.reason and "_ALERT_" in err.reason:
            return "alert: " + err.reason.split("_ALERT_", 1)[1].lower().replace("_", " ")
        if isinstance(err, ConnectionResetError):
            return "it reset the connection right after the handshake"
        if isinstance(err, BrokenPipeError):
            return "it closed the connection right after the handshake"
    return "it closed the connection right after the handshake"


def _raise_if_auth_refused(tap: HandshakeTap, host: str, how: str, exc: BaseException) -> None:
    """A handshake that failed after the server asked for a client certificate (TLS 1.2
    decides inside the handshake): say so, rather than a bare "handshake failed"."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return  # we refused the server's certificate, before answering its request
    auth = tap.client_auth(None)
    if auth.requested and auth.sent is not None:
        raise client_cert_refused(sent=auth.sent, host=host, how=how) from exc


def _start_at_client_hello(stage: Stage, raw: StampingStream, timeline: Timeline) -> None:
    # A handshake that failed before anything was sent keeps the stage's own start.
    if raw.first_send_ns is not None:
        if stage.name == "tls":  # the target's ClientHello, not an https:// proxy's
            timeline.client_hello_ns = raw.first_send_ns - stage.start_ns
        stage.start_ns = raw.first_send_ns


def _handshake_done(stage: Stage, raw: StampingStream, recorder: Recorder) -> int:
    """When the handshake was complete: its last input had arrived and its last output
    was handed to the socket (TLS 1.3: the client Finished's send; 1.2: the read of the
    server's Finished). Stamping when wrap() returns also counted that send, and whoever
    it woke (a server on this host) running first: up to 1.7 ms on a busy loopback."""
    return max(stage.start_ns, raw.send_began_ns or 0, recorder.last_read_ns or 0)


#: A bound on the second handshake after a refused certificate: it only reads what the
#: first one already showed, so a server slow to repeat it is not worth waiting for.
CERT_PEEK_TIMEOUT_S = 2.0


async def _unverified_peer_cert(ip: str, port: int, server_hostname: str | None) -> bytes | None:
    """The certificate a server presents, read by a second handshake with verification off,
    done only after the first refused it (Python before 3.13 keeps no peer certificate
    from a failed handshake). It carries no request and ends at the handshake."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with anyio.fail_after(CERT_PEEK_TIMEOUT_S):
            stream = await anyio.connect_tcp(ip, port)
            flows.note_socket(stream.extra(anyio.abc.SocketAttribute.raw_socket), flows.TCP)
            try:
                tls = await TLSStream.wrap(
                    stream,
                    ssl_context=context,
                    hostname=server_hostname,
                    standard_compatible=False,
                )
                return tls.extra(TLSAttribute.ssl_object).getpeercert(binary_form=True)
            finally:
                await anyio.aclose_forcefully(stream)
    except (OSError, ssl.SSLError, TimeoutError, anyio.BrokenResourceError, anyio.EndOfStream):
        return None


def _since(start_ns: int) -> int:
    return time.perf_counter_ns() - start_ns


#: Per-address connect budget when another address is left to try.
ATTEMPT_TIMEOUT_S = 3.0

_CONNECT_KINDS: dict[int, ErrorKind] = {
    errno.ECONNREFUSED: "refused",
    errno.EHOSTUNREACH: "host_unreachable",
    errno.ENETUNREACH: "network_unreachable",
    errno.ETIMEDOUT: "timeout",
    errno.EADDRNOTAVAIL: "address_not_available",
}


async def connect_tcp(
    host: str,
    port: int,
    addresses: tuple[tuple[str, dns.Family], ...],
    recorder: Recorder,
    *,
    stage_name: Literal["connect", "proxy_connect"] = "connect",
    milestone: str | None = "connected",
) -> TracedNetworkStream:
    """The ``connect`` stage (``proxy_connect`` to a proxy): each resolved address in turn
    until one accepts (each attempt recorded); the failed ones are listed apart from the
    stage, which is the handshake. ``milestone`` is marked when it completes."""
    timeline = recorder.timeline
    recorder.connects += 1
    stage = timeline.begin(stage_name, time.perf_counter_ns())
    failures: list[str] = []
    last_kind: ErrorKind = "refused"
    for n, (ip, fam) in enumerate(addresses):
        start = time.perf_counter_ns()
        # With more addresses to try, one that does not answer gets a bounded attempt
        # (like happy eyeballs, but sequential so each attempt is timed on its own).
        limit = ATTEMPT_TIMEOUT_S if n + 1 < len(addresses) else None
        try:
            sock, start, end = await connect_address(ip, port, timeout=limit)
        except anyio.get_cancelled_exc_class():
            # The run's deadline cut the handshake: the attempt was made all the same, and
            # the report (and the path probe, which traces toward it) needs its address.
            timeline.attempts.append(
                ConnectAttempt(
                    ip=ip,
                    port=port,
                    family=fam,
                    start_ns=start,
                    end_ns=time.perf_counter_ns(),
                    error="timed out (the run's deadline)",
                )
            )
            raise
        except TimeoutError:
            end = time.perf_counter_ns()
            timeline.attempts.append(
                ConnectAttempt(
                    ip=ip, port=port, family=fam, start_ns=start, end_ns=end, error="timed out"
                )
            )
            # The limit, or the kernel's own SYN retries (ETIMEDOUT) on the last address.
            waited_s = (end - start) / 1e9
            failures.append(f"{fmt_addr(ip, port)}: timed out after {waited_s:.3g} s")
            flows.note_endpoints(flows.TCP, None, (ip, port))
            last_kind = "timeout"
            continue
        except OSError as exc:
            end = time.perf_counter_ns()
            # anyio wraps the socket error ("All connection attempts failed"): use the cause.
            cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
            # asyncio's wrapper says "Connect call failed (...)"; the errno says why.
            reason = os.strerror(cause.errno) if cause.errno else str(cause)
            last_kind = _CONNECT_KINDS.get(cause.errno or 0, "connect_failed")
            timeline.attempts.append(
                ConnectAttempt(
                    ip=ip, port=port, family=fam, start_ns=start, end_ns=end, error=reason
                )
            )
            failures.append(f"{fmt_addr(ip, port)}: {reason}")
            flows.note_endpoints(flows.TCP, None, (ip, port))  # its SYNs, for --pcap
            continue
        local_port = sock.extra(anyio.abc.SocketAttribute.local_port)
        flows.note_socket(sock.extra(anyio.abc.SocketAttribute.raw_socket), flows.TCP)
        timeline.attempts.append(
            ConnectAttempt(
                ip=ip, port=port, family=fam, start_ns=start, end_ns=end, local_port=local_port
            )
        )
        # The stage is the successful handshake; failed attempts are listed on their own.
        stage.start_ns, stage.end_ns = start, end
        stage.detail["attempts"] = len(timeline.attempts)
        if milestone is not None:
            timeline.mark(milestone, end)
        if stage_name == "connect":
            timeline.address = (ip, port)
            timeline.family = fam
        raw = StampingStream(sock, recorder)
        return TracedNetworkStream(raw, raw, recorder)
    timeline.end(stage_name, time.perf_counter_ns(), ok=False)
    proxy = stage_name == "proxy_connect"
    raise ConnectError(
        f"TCP connect to {'the proxy ' if proxy else ''}{host} port {port} failed: "
        + "; ".join(failures),
        stage="proxy_connect" if proxy else "connect",
        kind=last_kind,
        host=host,
        port=port,
    )
