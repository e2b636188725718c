"""The reference endpoint as a subprocess, for tests (and a tiny HTTP/3 client to poke it).

A separate process keeps the server's CPU work off the measuring client's GIL, so
timings measured in the test process mean what they say.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

STARTUP_TIMEOUT_S = 15.0
_ENV_DROP = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@dataclass(frozen=True, slots=True)
class RefServer:
    """A running reference endpoint."""

    url: str  # https://127.0.0.1:PORT or http://127.0.0.1:PORT
    host: str
    port: int
    ca: str | None  # CA file that verifies its certificate (None without TLS)
    http3: bool
    process: subprocess.Popen[str] = field(repr=False)
    stderr: Path = field(repr=False)  # the file the server's stderr (its log) goes to

    def path(self, path: str) -> str:
        return self.url + path


def _stderr_text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-4000:]
    except OSError:
        return "<no stderr>"


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    if process.stdout is not None:
        process.stdout.close()


def _wait_listening(process: subprocess.Popen[str], stderr: Path) -> dict[str, Any]:
    assert process.stdout is not None
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no listening line within {STARTUP_TIMEOUT_S:g} s")
            if not selector.select(remaining):
                continue
            line = process.stdout.readline()
            if not line:
                raise RuntimeError(f"server exited with status {process.wait(5)}")
            with contextlib.suppress(ValueError):
                info = json.loads(line)
                if isinstance(info, dict) and info.get("event") == "listening":
                    return info


@contextlib.contextmanager
def reference_server(
    *,
    tls: bool = True,
    http3: bool = False,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    tmp_path: Path,
    host: str = "127.0.0.1",
    command_prefix: Sequence[str] = (),
) -> Iterator[RefServer]:
    """Run ``python -m promptpath.server --port 0 ...`` on ``host`` until the block ends;
    ``env`` adds variables to the server's environment (e.g. the key it demands);
    ``command_prefix`` wraps the command (``ip netns exec NS`` for the impairer lab)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    args = [*command_prefix, sys.executable, "-m", "promptpath.server", "--host", host]
    args += ["--port", "0"]
    if tls:
        args += ["--self-signed", str(tmp_path / "certs")]
    args.append("--http3" if http3 else "--no-http3")
    args += list(extra_args)
    server_env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP} | dict(env or {})
    stderr_path = tmp_path / f"refserver-{time.monotonic_ns()}.stderr"
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            text=True,
            env=server_env,
        )
    try:
        try:
            info = _wait_listening(process, stderr_path)
        except (TimeoutError, RuntimeError) as exc:
            _stop(process)
            pytest.fail(
                f"reference server did not start: {exc}\n"
                f"command: {' '.join(args)}\nstderr:\n{_stderr_text(stderr_path)}"
            )
        yield RefServer(
            url=str(info["url"]),
            host=str(info["host"]),
            port=int(info["port"]),
            ca=None if info.get("ca") is None else str(info["ca"]),
            http3=bool(info.get("http3")),
            process=process,
            stderr=stderr_path,
        )
    finally:
        _stop(process)


def sdk_http_client(sdk: Any, server: RefServer, *, http2: bool = False) -> Any:
    """An HTTP client for the ``openai`` or ``anthropic`` SDK that trusts the server's CA.

    Both SDKs now ship their own HTTP package (httpx2) and reject plain ``httpx`` clients,
    so use each SDK's ``DefaultHttpxClient`` factory.

    It keeps no idle connection: each request opens its own. hypercorn closes a connection
    5 s after its last stream ended (keep_alive_timeout), counted while the client may still
    be parsing that stream: beside six CPU hogs a request on a reused connection met the close
    4 times in 29 ("Server disconnected"; by hand, reading 5 s late: reused 4 of 4 failed,
    fresh 0 of 4). These tests prove the SDK reads our bytes, not the pool's timing.
    """
    import ssl

    import httpx2

    assert server.ca is not None, "the SDK client needs a TLS server"
    context = ssl.create_default_context(cafile=server.ca)
    fresh = httpx2.Limits(max_keepalive_connections=0)
    return sdk.DefaultHttpxClient(verify=context, http2=http2, timeout=10.0, limits=fresh)


# -- reading what it sends (deliberately simple: our server frames with LF only) -------


@dataclass(frozen=True, slots=True)
class Message:
    """One SSE message, comment, or NDJSON line, with when its last byte arrived."""

    t: float  # time.perf_counter() at the read that completed it
    data: str  # the data field(s) joined by LF, or the NDJSON line, or the comment text
    event: str | None = None
    comment: bool = False

    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def is_json(self) -> bool:
        try:
            json.loads(self.data)
        except ValueError:
            return False
        return True


class StreamCollector:
    """Incrementally splits SSE (``sse=True``) or NDJSON bytes into timed messages."""

    def __init__(self, *, sse: bool = True) -> None:
        self.sse = sse
        self.buffer = b""
        self.messages: list[Message] = []
        self.reads: list[tuple[float, int]] = []

    def feed(self, chunk: bytes, t: float | None = None) -> list[Message]:
        t = time.perf_counter() if t is None else t
        self.reads.append((t, len(chunk)))
        self.buffer += chunk
        sep = b"\n\n" if self.sse else b"\n"
        new: list[Message] = []
        while sep in self.buffer:
            block, self.buffer = self.buffer.split(sep, 1)
            message = self._parse(block.decode(), t)
            if message is not None:
                new.append(message)
        self.messages.extend(new)
        return new

    def _parse(self, block: str, t: float) -> Message | None:
        if not self.sse:
            return Message(t=t, data=block) if block.strip() else None
        event, data, comments = None, [], []
        for line in block.split("\n"):
            if line.startswith(":"):
                comments.append(line[1:].strip())
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            return Message(t=t, data="\n".join(data), event=event)
        if comments:
            return Message(t=t, data="\n".join(comments), comment=True)
        return None

    @property
    def data_messages(self) -> list[Message]:
        return [m for m in self.messages if not m.comment]

    @property
    def comments(self) -> list[Message]:
        return [m for m in self.messages if m.comment]


@dataclass(slots=True)
class Collected:
    """A streamed response as the test saw it."""

    status: int
    headers: Any  # httpx.Headers
    http_version: str
    stream: StreamCollector
    t_request: float  # perf_counter() just before the request was sent
    error: Exception | None = None  # what ended the read early, if anything


def collect(
    client: Any,  # httpx.Client
    url: str,
    body: dict[str, Any],
    headers: dict[str, str] | None = None,
    *,
    sse: bool = True,
    stop_after: int | None = None,
) -> Collected:
    """POST ``body`` and read the whole response, stamping each read.

    ``stop_after``: close the response after that many data messages (a client leaving).
    Transport errors (a truncated body) are caught and returned in ``error``.
    """
    import httpx

    stream = StreamCollector(sse=sse)
    t_request = time.perf_counter()
    with client.stream("POST", url, json=body, headers=headers or {}) as response:
        result = Collected(
            status=response.status_code,
            headers=response.headers,
            http_version=response.http_version,
            stream=stream,
            t_request=t_request,
        )
        try:
            for chunk in response.iter_raw():
                stream.feed(chunk)
                if stop_after is not None and len(stream.data_messages) >= stop_after:
                    break
        except httpx.TransportError as exc:
            result.error = exc
    return result


# -- a minimal HTTP/3 client (aioquic), enough to prove the endpoint speaks h3 ------------


@dataclass(slots=True)
class H3Response:
    status: int = 0
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""


async def h3_request(
    port: int,
    path: str,
    *,
    body: bytes = b"",
    method: str = "POST",
    headers: Sequence[tuple[str, str]] = (),
    ca: str | None,
    timeout: float = 10.0,
    body_after_s: float = 0.0,
) -> H3Response:
    """One HTTP/3 request to 127.0.0.1:port (SNI localhost), verified with ``ca``;
    ``body_after_s`` sends the body that long after the headers."""
    from aioquic.asyncio.protocol import QuicConnectionProtocol
    from aioquic.h3.connection import H3_ALPN, H3Connection
    from aioquic.h3.events import DataReceived, HeadersReceived
    from aioquic.quic.configuration import QuicConfiguration
    from aioquic.quic.connection import QuicConnection

    response = H3Response()
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    class Client(QuicConnectionProtocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.h3 = H3Connection(self._quic)

        def quic_event_received(self, event: Any) -> None:
            for h3_event in self.h3.handle_event(event):
                if isinstance(h3_event, HeadersReceived):
                    for name, value in h3_event.headers:
                        if name == b":status":
                            response.status = int(value)
                        else:
                            response.headers.append((name.decode(), value.decode()))
                elif isinstance(h3_event, DataReceived):
                    response.body += h3_event.data
                if getattr(h3_event, "stream_ended", False) and not done.done():
                    done.set_result(None)

    config = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    if ca is not None:
        config.load_verify_locations(ca)
    quic = QuicConnection(configuration=config)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_datagram_endpoint(lambda: Client(quic), sock=sock)
    try:
        protocol.connect(("127.0.0.1", port))
        await asyncio.wait_for(protocol.wait_connected(), timeout)
        stream_id = quic.get_next_available_stream_id()
        request_headers = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", f"localhost:{port}".encode()),
            (b":path", path.encode()),
            *((k.lower().encode(), v.encode()) for k, v in headers),
        ]
        protocol.h3.send_headers(stream_id, request_headers, end_stream=not body)
        if body and body_after_s > 0:
            protocol.transmit()
            await asyncio.sleep(body_after_s)
        if body:
            protocol.h3.send_data(stream_id, body, end_stream=True)
        protocol.transmit()
        await asyncio.wait_for(done, timeout)
        return response
    finally:
        protocol.close()
        transport.close()
