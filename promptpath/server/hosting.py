"""Running the reference endpoint on hypercorn: in the foreground or in a thread.

We bind the sockets ourselves and hand hypercorn their file descriptors, so that with
``port=0`` the TCP listener (h1/h2) and the UDP socket (h3) share one port number, and
so the port is known before the server starts. hypercorn is imported lazily.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promptpath.net import dontfrag
from promptpath.server.app import ReferenceApp
from promptpath.server.behaviour import Behaviour
from promptpath.server.limits import CERT_DAYS_MAX, PORT_MAX
from promptpath.server.sigv4_check import AwsTestKey

DEFAULT_TLS_PORT = 8443
DEFAULT_PLAIN_PORT = 8080
_BACKLOG = 128
_PORT_ATTEMPTS = 50


class ServerSetupError(RuntimeError):
    """The endpoint could not start (port in use, bad certificate files, ...)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    """Everything ``promptpath serve`` accepts, as one value."""

    host: str = "127.0.0.1"
    port: int | None = None  # None: 8443 with TLS, 8080 without; 0: any free port
    certfile: str | None = None
    keyfile: str | None = None
    self_signed: str | None = None  # directory for a generated CA + leaf
    client_ca: str | None = None  # PEM CAs: require a client certificate they signed
    cert_days: int = 90  # a Let's Encrypt lifetime: fresh, it passes the tls probe's 30-day warning
    http3: bool | None = None  # None: on when TLS is on
    behaviour: Behaviour = field(default_factory=Behaviour)
    api_key: str | None = field(default=None, repr=False)
    #: Bedrock requests must carry a SigV4 signature by this key (None: not checked).
    aws_credentials: AwsTestKey | None = field(default=None, repr=False)
    verbose: bool = False

    @property
    def tls(self) -> bool:
        return self.self_signed is not None or self.certfile is not None


@dataclass(slots=True, kw_only=True)
class _Prepared:
    tcp: socket.socket
    udp: socket.socket | None
    host: str
    port: int
    certfile: str | None
    keyfile: str | None
    ca: Path | None
    client_ca: str | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.certfile else 'http'}://{host}:{self.port}"

    def listening(self) -> dict[str, object]:
        """The one line ``serve`` prints on stdout once it accepts connections."""
        return {
            "event": "listening",
            "url": self.url,
            "host": self.host,
            "port": self.port,
            "ca": None if self.ca is None else str(self.ca),
            "http3": self.udp is not None,
            "client_ca": self.client_ca,
        }

    def close(self) -> None:
        for sock in (self.tcp, self.udp):
            if sock is not None and sock.fileno() != -1:
                sock.close()


def _bind(host: str, port: int, *, udp: bool) -> tuple[socket.socket, socket.socket | None]:
    """A listening TCP socket and, if asked, a UDP socket on the same port number."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:  # gaierror; idna rejects a label over 63 chars
        raise ServerSetupError(f"cannot resolve listen address {host!r}: {exc}") from exc
    family, _, _, _, sockaddr = infos[0]
    address = sockaddr[0]
    last_error: OSError | None = None
    for _ in range(_PORT_ATTEMPTS if port == 0 else 1):
        tcp: socket.socket | None = None
        try:
            # Inside the try: socket() itself fails when the address family is disabled.
            tcp = socket.socket(family, socket.SOCK_STREAM)
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            # Every event its own segment.
            tcp.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            tcp.bind((address, port))
            chosen = tcp.getsockname()[1]
            dgram = None
            if udp:
                dgram = socket.socket(family, socket.SOCK_DGRAM)
                # QUIC is never fragmented (RFC 9000 §14), by the reference endpoint either:
                # with DF set it answers like the QUIC servers it stands in for.
                dontfrag.forbid_fragmentation(dgram, "do")
                try:
                    dgram.bind((address, chosen))
                except OSError:
                    dgram.close()
                    raise
            tcp.listen(_BACKLOG)  # connections queue from here on, before hypercorn runs
            tcp.setblocking(False)
            if dgram is not None:
                dgram.setblocking(False)
            return tcp, dgram
        except OSError as exc:
            if tcp is not None:
                tcp.close()
            last_error = exc
            if port != 0 or exc.errno != errno.EADDRINUSE:
                break  # a fixed port, or an error another try will not fix
    what = "TCP+UDP" if udp else "TCP"
    raise ServerSetupError(f"cannot listen on {host}:{port} ({what}): {last_error}") from last_error


def _self_signed(config: ServerConfig, directory: str) -> tuple[str, str, Path]:
    """``make_self_signed`` with its failures (an unwritable DIR, ...) as setup errors."""
    from promptpath.server.certs import make_self_signed

    if not -CERT_DAYS_MAX <= config.cert_days <= CERT_DAYS_MAX:
        raise ServerSetupError(
            f"--cert-days {config.cert_days} is out of range (-{CERT_DAYS_MAX} to {CERT_DAYS_MAX})"
        )
    try:
        paths = make_self_signed(directory, days=config.cert_days)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.filename is not None and str(exc.filename) != directory:
            reason = f"{exc.filename}: {reason}"
        raise ServerSetupError(
            f"--self-signed {directory}: cannot write the CA and certificate files ({reason})"
        ) from exc
    return str(paths.cert), str(paths.key), paths.ca


def _prepare(config: ServerConfig) -> _Prepared:
    if config.port is not None and not 0 <= config.port <= PORT_MAX:
        # socket.bind() would raise OverflowError, which is not an OSError.
        raise ServerSetupError(f"--port {config.port} is out of range (0 to {PORT_MAX})")
    certfile, keyfile, ca = config.certfile, config.keyfile, None
    if config.self_signed is not None:
        if certfile is not None or keyfile is not None:
            raise ServerSetupError("--self-signed and --certfile/--keyfile exclude each other")
        certfile, keyfile, ca = _self_signed(config, config.self_signed)
    if (certfile is None) != (keyfile is None):
        raise ServerSetupError("--certfile and --keyfile go together")
    if certfile is not None and keyfile is not None:
        try:  # fail here, with a readable message, rather than inside hypercorn
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise ServerSetupError(
                f"cannot load certificate {certfile} / {keyfile}: {exc}"
            ) from exc
    tls = certfile is not None
    _check_client_ca(config, tls=tls)
    # hypercorn's QUIC never asks for a client certificate (aioquic's server does not send
    # a CertificateRequest): HTTP/3 next to --client-ca would let any client in.
    http3 = (tls and config.client_ca is None) if config.http3 is None else config.http3
    if http3 and not tls:
        raise ServerSetupError("HTTP/3 needs TLS: give --self-signed DIR or --certfile/--keyfile")
    port = config.port
    if port is None:
        port = DEFAULT_TLS_PORT if tls else DEFAULT_PLAIN_PORT
    tcp, udp = _bind(config.host, port, udp=http3)
    return _Prepared(
        tcp=tcp,
        udp=udp,
        host=config.host,
        port=tcp.getsockname()[1],
        certfile=certfile,
        keyfile=keyfile,
        ca=ca,
        client_ca=config.client_ca,
    )


def _check_client_ca(config: ServerConfig, *, tls: bool) -> None:
    """--client-ca needs TLS over TCP only, and a file of PEM CAs that loads."""
    if config.client_ca is None:
        return
    if not tls:
        raise ServerSetupError(
            "--client-ca needs TLS: give --self-signed DIR or --certfile/--keyfile"
        )
    if config.http3:
        raise ServerSetupError(
            "--client-ca and --http3 exclude each other: hypercorn's HTTP/3 cannot ask for"
            " a client certificate"
        )
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_verify_locations(config.client_ca)
    except (OSError, ssl.SSLError) as exc:
        raise ServerSetupError(
            f"--client-ca {config.client_ca}: not a PEM CA file ({exc})"
        ) from exc


def _stderr_logger(name: str, level: int) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.handlers = [logging.StreamHandler(sys.stderr)]
    logger.handlers[0].setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.setLevel(level)
    logger.propagate = False
    return logger


def _hypercorn_config(config: ServerConfig, prepared: _Prepared) -> Any:
    from hypercorn.config import Config

    hc = Config()
    # fd:// hands hypercorn our sockets; detach so only hypercorn's objects own them.
    hc.bind = [f"fd://{prepared.tcp.detach()}"]
    if prepared.certfile is not None:
        hc.certfile = prepared.certfile
        hc.keyfile = prepared.keyfile
        hc.alpn_protocols = ["h2", "http/1.1"]
    if prepared.client_ca is not None:
        hc.ca_certs = prepared.client_ca
        hc.verify_mode = ssl.CERT_REQUIRED
    if prepared.udp is not None:
        hc.quic_bind = [f"fd://{prepared.udp.detach()}"]
        hc.alt_svc_headers = [f'h3=":{prepared.port}"; ma=86400']
    # A paused stream must not hold up shutdown, and hypercorn's QUIC loop only notices
    # shutdown at this timeout (it blocks on its datagram queue): keep it short.
    hc.graceful_timeout = 0.5
    hc.errorlog = _stderr_logger(
        "promptpath.server", logging.INFO if config.verbose else logging.WARNING
    )
    hc.accesslog = (
        _stderr_logger("promptpath.server.access", logging.INFO) if config.verbose else None
    )
    return hc


async def _serve(
    config: ServerConfig,
    prepared: _Prepared,
    app: ReferenceApp,
    shutdown: asyncio.Event,
) -> None:
    from hypercorn.asyncio import serve

    hc = _hypercorn_config(config, prepared)
    await serve(app, hc, shutdown_trigger=shutdown.wait, mode="asgi")  # type: ignore[arg-type]


def serve_forever(config: ServerConfig, *, announce: Callable[[dict[str, object]], None]) -> None:
    """Run in the foreground until SIGINT/SIGTERM; ``announce`` gets the listening line."""
    prepared = _prepare(config)

    async def main() -> None:
        shutdown = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, shutdown.set)
        app = ReferenceApp(
            config.behaviour,
            api_key=config.api_key,
            aws_credentials=config.aws_credentials,
            on_startup=lambda: announce(prepared.listening()),
        )
        await _serve(config, prepared, app, shutdown)

    try:
        asyncio.run(main())
    finally:
        prepared.close()


class ServerHandle:
    """A reference endpoint running in a background thread (for ``promptpath demo``)."""

    def __init__(self, prepared: _Prepared, app: ReferenceApp) -> None:
        self.url = prepared.url
        self.host = prepared.host
        self.port = prepared.port
        self.ca_path: Path | None = prepared.ca
        self.http3 = prepared.udp is not None
        self.app = app
        self._prepared = prepared
        self._loop: asyncio.AbstractEventLoop | None = None
        self._shutdown: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    @property
    def stats(self) -> dict[str, object]:
        return self.app.stats.snapshot()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and wait for the thread; safe to call twice."""
        if self._loop is not None and self._shutdown is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop already finished
                self._loop.call_soon_threadsafe(self._shutdown.set)
        if self._thread is not None:
            self._thread.join(timeout)
        self._prepared.close()

    def __enter__(self) -> ServerHandle:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_in_thread(config: ServerConfig, *, timeout: float = 15.0) -> ServerHandle:
    """Start serving on a background thread with its own event loop; returns once ready."""
    prepared = _prepare(config)
    handle: ServerHandle

    def ready() -> None:
        handle._ready.set()

    app = ReferenceApp(
        config.behaviour,
        api_key=config.api_key,
        aws_credentials=config.aws_credentials,
        on_startup=ready,
    )
    handle = ServerHandle(prepared, app)

    def run() -> None:
        async def main() -> None:
            handle._loop = asyncio.get_running_loop()
            handle._shutdown = asyncio.Event()
            await _serve(config, prepared, app, handle._shutdown)

        try:
            asyncio.run(main())
        except BaseException as exc:
            handle._error = exc
        finally:
            handle._ready.set()

    handle._thread = threading.Thread(target=run, name="promptpath-serve", daemon=True)
    handle._thread.start()
    if not handle._ready.wait(timeout) or handle._error is not None:
        handle.stop()
        raise ServerSetupError(f"reference endpoint did not start: {handle._error!r}")
    return handle
