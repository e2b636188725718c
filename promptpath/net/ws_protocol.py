"""WebSocket's client side, sans-IO: the upgrade (RFC 6455 §4) on h11, messages on wsproto.

Bytes in, events out; stamps come in with the bytes, nothing here reads a clock or a
socket (``net/websocket.py`` pumps it). Two parts:

    Upgrade    the HTTP/1.1 GET with ``Upgrade: websocket`` and the answer to it: a 101
               checked as RFC 6455 §4.1 says (Sec-WebSocket-Accept, the subprotocol and
               extensions we offered), or any other status with its body
    Messages   frames after the 101 (wsproto's post-handshake ``Connection``): whole
               messages however they were fragmented, each with the stamp of the read
               that carried its last frame; pings answered, pongs matched, the close

The handshake is ours rather than wsproto's ``WSConnection`` so that every header of
the answer is kept (wsproto keeps only the ones it does not consume) and a refusal's
status, headers and body reach the report. wsproto documents ``Connection`` for
exactly this: a connection whose handshake was done elsewhere.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import h11
from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    TextMessage,
)
from wsproto.extensions import Extension
from wsproto.utilities import generate_accept_token, generate_nonce

from promptpath.core.wsclose import CLOSE_CODES, close_words
from promptpath.net.ws_deflate import BoundedDeflate

#: Longest message kept (fragments included): as the SSE/NDJSON framers' line cap.
MAX_MESSAGE_BYTES = 16 << 20
#: Most bytes of a refusal's body kept to explain it.
MAX_REFUSAL_BODY = 64 * 1024
#: Most bytes of an answer's head before it is not an HTTP answer at all.
MAX_HEAD_BYTES = 64 * 1024


class UpgradeFailed(ValueError):
    """The answer to the upgrade is a 101 that breaks RFC 6455 §4.1, or no HTTP at all."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UpgradeAnswer:
    """The final answer to the upgrade request (a 101, or the refusal)."""

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]  # every header, in the order sent
    http_version: str  # "1.1", "1.0"
    subprotocol: str | None = None  # the one the server chose (101 only)
    extensions: tuple[str, ...] = ()  # the extensions it accepted, as it spelt them
    trailing: bytes = b""  # bytes after a 101's head: the first frames already

    @property
    def accepted(self) -> bool:
        return self.status == 101


def _header(headers: Sequence[tuple[str, str]], name: str) -> str | None:
    values = [v for k, v in headers if k.lower() == name]
    return ", ".join(values) if values else None


def _tokens(value: str | None) -> list[str]:
    return [t.strip().lower() for t in (value or "").split(",") if t.strip()]


class Upgrade:
    """One upgrade exchange: ``request()`` bytes out, ``receive()`` until an answer, then
    (for a refusal) ``body()`` until its end."""

    def __init__(
        self,
        *,
        authority: str,
        target: str,
        headers: Sequence[tuple[str, str]] = (),
        subprotocols: Sequence[str] = (),
        deflate: bool = False,
        nonce: bytes | None = None,
    ) -> None:
        self._authority = authority
        self._target = target
        self._headers = list(headers)
        self.subprotocols = tuple(subprotocols)
        self.key = nonce or generate_nonce()
        # Inflated within the message cap (Messages sets it): a bomb never grows past it.
        self.deflate = BoundedDeflate(MAX_MESSAGE_BYTES) if deflate else None
        self._h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_BYTES)
        self.answer: UpgradeAnswer | None = None
        self._body = bytearray()
        self.body_done = False

    @property
    def offered_extensions(self) -> tuple[str, ...]:
        if self.deflate is None:
            return ()
        offer = self.deflate.offer()
        return (f"{self.deflate.name}; {offer}" if isinstance(offer, str) else self.deflate.name,)

    def request(self) -> bytes:
        """The GET that asks for the upgrade (the key and version ours, the rest given)."""
        own = {"host", "upgrade", "connection", "content-length", "transfer-encoding"}
        own |= {"sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions"}
        headers = [
            ("Host", self._authority),
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Key", self.key.decode("ascii")),
            ("Sec-WebSocket-Version", "13"),
        ]
        if self.subprotocols:
            headers.append(("Sec-WebSocket-Protocol", ", ".join(self.subprotocols)))
        for offer in self.offered_extensions:
            headers.append(("Sec-WebSocket-Extensions", offer))
        headers += [(k, v) for k, v in self._headers if k.lower() not in own]
        data = self._h11.send(h11.Request(method="GET", target=self._target, headers=headers))
        return (data or b"") + (self._h11.send(h11.EndOfMessage()) or b"")

    def receive(self, data: bytes) -> UpgradeAnswer | None:
        """Feed bytes read; the answer once its head is complete (None: need more).

        ``b""`` is the peer's EOF. Raises UpgradeFailed for an answer that is not HTTP,
        ends early, or a 101 that breaks the handshake's rules."""
        if self.answer is not None:
            raise RuntimeError("the answer is in: read the refusal's body with body()")
        try:
            self._h11.receive_data(data)
            while True:
                event = self._h11.next_event()
                if event is h11.NEED_DATA:
                    return None
                if isinstance(event, h11.InformationalResponse):
                    if event.status_code == 101:
                        self.answer = self._accepted(event)
                        return self.answer
                    continue  # 100 Continue, 103 Early Hints: not the answer
                if isinstance(event, h11.Response):
                    self.answer = _answer(event)
                    return self.answer
                if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                    raise UpgradeFailed("the connection closed before any answer to the upgrade")
        except h11.RemoteProtocolError as exc:
            raise UpgradeFailed(f"the answer to the upgrade is not HTTP/1.1: {exc}") from exc

    def body(self, data: bytes | None = None) -> bytes:
        """A refusal's body bytes in ``data`` (``b""``: EOF; None: only what the head's
        read carried after it); ``body_done`` at its end."""
        out = bytearray()
        try:
            if data is not None:
                self._h11.receive_data(data)
            while not self.body_done:
                event = self._h11.next_event()
                if event is h11.NEED_DATA:
                    break
                if isinstance(event, h11.Data):
                    out += event.data
                elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
                    self.body_done = True
        except h11.RemoteProtocolError:
            self.body_done = True  # a body cut short still explains what it can
        room = MAX_REFUSAL_BODY - len(self._body)
        self._body += out[: max(0, room)]
        return bytes(out)

    def _accepted(self, event: h11.InformationalResponse) -> UpgradeAnswer:
        answer = _answer(event)
        headers = answer.headers
        if "websocket" not in _tokens(_header(headers, "upgrade")):
            raise UpgradeFailed("the 101 does not say Upgrade: websocket")
        if "upgrade" not in _tokens(_header(headers, "connection")):
            raise UpgradeFailed("the 101 does not say Connection: Upgrade")
        accept = _header(headers, "sec-websocket-accept")
        if accept is None or accept.strip().encode() != generate_accept_token(self.key):
            raise UpgradeFailed(
                "the 101's Sec-WebSocket-Accept does not answer our key"
                " (a hop that answered the upgrade itself, or a cache?)"
            )
        chosen = _header(headers, "sec-websocket-protocol")
        if chosen is not None and chosen.strip() not in self.subprotocols:
            raise UpgradeFailed(
                f"the server chose the subprotocol {chosen!r}, which we never offered"
            )
        accepted: list[str] = []
        for offer in [
            x.strip() for x in (_header(headers, "sec-websocket-extensions") or "").split(",")
        ]:
            if not offer:
                continue
            name = offer.split(";", 1)[0].strip()
            if self.deflate is None or name != self.deflate.name:
                raise UpgradeFailed(
                    f"the server accepted the extension {name!r}, which we never offered"
                )
            self.deflate.finalize(offer)
            accepted.append(offer)
        trailing, _closed = self._h11.trailing_data
        return UpgradeAnswer(
            status=101,
            reason=answer.reason,
            headers=headers,
            http_version=answer.http_version,
            subprotocol=None if chosen is None else chosen.strip(),
            extensions=tuple(accepted),
            trailing=bytes(trailing),
        )

    @property
    def refusal_body(self) -> bytes:
        return bytes(self._body)

    def extensions(self) -> list[Extension]:
        """The extensions in force after a 101 (those the server accepted)."""
        answer = self.answer
        if answer is None or not answer.extensions or self.deflate is None:
            return []
        return [self.deflate]


def _answer(event: h11.Response | h11.InformationalResponse) -> UpgradeAnswer:
    return UpgradeAnswer(
        status=event.status_code,
        reason=event.reason.decode("latin-1"),
        headers=tuple((k.decode("latin-1"), v.decode("latin-1")) for k, v in event.headers),
        http_version=event.http_version.decode("ascii"),
    )


# -- messages ----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class MessageReceived:
    """One whole message; stamped with the read that carried its last frame."""

    data: bytes  # a text message's UTF-8, or a binary message's bytes
    text: bool
    t_ns: int
    read_index: int
    frames: int  # frames it came in (more than 1: fragmented)


@dataclass(frozen=True, slots=True, kw_only=True)
class PongReceived:
    payload: bytes
    t_ns: int
    read_index: int


@dataclass(frozen=True, slots=True, kw_only=True)
class PingReceived:
    payload: bytes
    t_ns: int


@dataclass(frozen=True, slots=True, kw_only=True)
class CloseReceived:
    """The connection's close as the frames said it."""

    code: int | None
    reason: str
    t_ns: int
    #: "server": its Close frame; "protocol": our parser refused a frame (the code is the
    #: one we send back, 1002/1007/1009); "eof": the TCP connection ended without one.
    by: Literal["server", "protocol", "eof"]


WSItem = MessageReceived | PongReceived | PingReceived | CloseReceived


@dataclass(slots=True)
class _Partial:
    data: bytearray = field(default_factory=bytearray)
    frames: int = 0
    text: bool = True


class Messages:
    """Frames after the 101: ``feed(bytes, t_ns, read_index) -> [WSItem]``; what must go
    back (pongs, the close reply) collects in ``outgoing()``.

    Nothing a peer sends raises: a message past ``max_message`` (its fragments together,
    or inflated) is a protocol close with 1009 like any frame the parser refuses, and
    after it nothing more is parsed. Frames that arrive after our own Close (a ping that
    crossed it, the rest of a message) are read, never answered: RFC 6455 §5.5.1 lets
    nothing follow our Close, and wsproto refuses to send it.

    ``trailing``: bytes the 101's read carried after its head (the first frames), with
    that read's stamp."""

    def __init__(
        self,
        extensions: list[Extension] | None = None,
        *,
        max_message: int = MAX_MESSAGE_BYTES,
    ) -> None:
        for extension in extensions or ():
            if isinstance(extension, BoundedDeflate):
                extension.max_message = max_message
        self._conn = Connection(ConnectionType.CLIENT, extensions=extensions)
        self._max = max_message
        self._refused = False  # we closed for a protocol error: the rest goes unread
        self._partial = _Partial()
        self._out = bytearray()
        self.control_frames = 0  # pings and pongs received
        self.fragmented = 0  # messages that came in more than one frame
        self.messages = 0

    @property
    def open(self) -> bool:
        return self._conn.state is ConnectionState.OPEN

    def feed(self, data: bytes, t_ns: int, read_index: int) -> list[WSItem]:
        """The items completed by ``data`` (nothing for ``b""``: see ``eof``)."""
        if not data or self._refused or self._conn.state is ConnectionState.CLOSED:
            return []
        return self._process(data, t_ns, read_index)

    def eof(self, t_ns: int) -> list[WSItem]:
        """The TCP connection ended (FIN or RST): a close without a Close frame (1006)
        unless the close handshake was done already."""
        if self._refused or self._conn.state is ConnectionState.CLOSED:
            return []
        return self._process(None, t_ns, -1)

    def _process(self, data: bytes | None, t_ns: int, read_index: int) -> list[WSItem]:
        self._conn.receive_data(data)
        items: list[WSItem] = []
        for event in self._conn.events():
            if isinstance(event, (TextMessage, BytesMessage)):
                done = self._fragment(event, t_ns, read_index)
                if isinstance(done, CloseReceived):
                    items.append(done)
                    break
                if done is not None:
                    items.append(done)
            elif isinstance(event, Ping):
                self.control_frames += 1
                if self.open:  # after our Close, no pong (see the class's docstring)
                    self._out += self._conn.send(event.response())
                items.append(PingReceived(payload=bytes(event.payload), t_ns=t_ns))
            elif isinstance(event, Pong):
                self.control_frames += 1
                items.append(
                    PongReceived(payload=bytes(event.payload), t_ns=t_ns, read_index=read_index)
                )
            elif isinstance(event, CloseConnection):
                items.append(self._closed(event, t_ns, eof=data is None))
        return items

    def _fragment(
        self, event: TextMessage | BytesMessage, t_ns: int, read_index: int
    ) -> MessageReceived | CloseReceived | None:
        part = self._partial
        if not part.data and not part.frames:
            part.text = isinstance(event, TextMessage)
        chunk = event.data.encode("utf-8") if isinstance(event.data, str) else bytes(event.data)
        if len(part.data) + len(chunk) > self._max:
            self._partial = _Partial()
            too_big = CloseConnection(
                code=1009, reason=f"a WebSocket message longer than {self._max} bytes"
            )
            return self._closed(too_big, t_ns, eof=False)
        part.data += chunk
        if event.frame_finished:
            part.frames += 1
        if not event.message_finished:
            return None
        self._partial = _Partial()
        self.messages += 1
        frames = max(1, part.frames)
        if frames > 1:
            self.fragmented += 1
        return MessageReceived(
            data=bytes(part.data), text=part.text, t_ns=t_ns, read_index=read_index, frames=frames
        )

    def _closed(self, event: CloseConnection, t_ns: int, *, eof: bool) -> CloseReceived:
        if eof:
            return CloseReceived(code=1006, reason="", t_ns=t_ns, by="eof")
        if self._conn.state is ConnectionState.REMOTE_CLOSING:
            self._out += self._conn.send(event.response())  # the close handshake's reply
            return CloseReceived(
                code=int(event.code), reason=event.reason or "", t_ns=t_ns, by="server"
            )
        if self._conn.state is ConnectionState.CLOSED:  # the reply to our own close
            return CloseReceived(
                code=int(event.code), reason=event.reason or "", t_ns=t_ns, by="server"
            )
        # Our parser refused a frame: tell the peer why, as RFC 6455 §7.1.7 asks (unless
        # our Close went already), and read nothing more: the frames are out of step.
        self._refused = True
        reason = event.reason or ""
        if event.code == 1009:  # wsproto says "error in extension" for a deflate bomb
            reason = f"a WebSocket message longer than {self._max} bytes"
        if self.open:
            self._out += self._conn.send(CloseConnection(code=event.code, reason=reason))
        return CloseReceived(code=int(event.code), reason=reason, t_ns=t_ns, by="protocol")

    def send_text(self, text: str) -> bytes:
        return self._conn.send(TextMessage(data=text))

    def ping(self, number: int) -> bytes:
        """A ping whose payload is ``number`` (8 bytes): its pong names it back."""
        return self._conn.send(Ping(payload=struct.pack("!Q", number)))

    def close(self, code: int = 1000, reason: str = "") -> bytes:
        """Our Close frame (b"" when the connection is closing or closed already)."""
        if self._conn.state is not ConnectionState.OPEN:
            return b""
        return self._conn.send(CloseConnection(code=code, reason=reason))

    def outgoing(self) -> bytes:
        out, self._out = bytes(self._out), bytearray()
        return out


def ping_number(payload: bytes) -> int | None:
    """The number a pong echoes from our ``ping()``, or None for a pong we did not ask for."""
    return struct.unpack("!Q", payload)[0] if len(payload) == 8 else None


__all__ = [
    "CLOSE_CODES",
    "MAX_MESSAGE_BYTES",
    "CloseReceived",
    "MessageReceived",
    "Messages",
    "PingReceived",
    "PongReceived",
    "Upgrade",
    "UpgradeAnswer",
    "UpgradeFailed",
    "WSItem",
    "close_words",
    "ping_number",
]
