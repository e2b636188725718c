"""The WebSocket client core (net/ws_protocol.py), bytes in and events out.

The server's side of every exchange is built by wsproto's own server ``Connection`` (a
real frame encoder, masking and permessage-deflate included), so these tests feed what a
server really sends: at every split point, fragmented, with control frames between
fragments, compressed, cut short.
"""

from __future__ import annotations

import base64
import struct
import tracemalloc
import zlib

import h11
import pytest
from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, Pong, TextMessage
from wsproto.extensions import PerMessageDeflate
from wsproto.utilities import generate_accept_token

from promptpath.net.ws_protocol import (
    CloseReceived,
    MessageReceived,
    Messages,
    PingReceived,
    PongReceived,
    Upgrade,
    UpgradeFailed,
    ping_number,
)

NONCE = base64.b64encode(b"0123456789abcdef")


def answer(
    status: int = 101, headers: list[tuple[str, str]] | None = None, body: bytes = b""
) -> bytes:
    """An HTTP/1.1 answer to the upgrade, as raw bytes."""
    if headers is None:
        headers = [
            ("Upgrade", "websocket"),
            ("Connection", "Upgrade"),
            ("Sec-WebSocket-Accept", generate_accept_token(NONCE).decode()),
        ]
    lines = [f"HTTP/1.1 {status} {'Switching Protocols' if status == 101 else 'No'}"]
    lines += [f"{k}: {v}" for k, v in headers]
    if status != 101:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def upgrade(**kwargs: object) -> Upgrade:
    return Upgrade(authority="example.test", target="/v1/responses", nonce=NONCE, **kwargs)  # type: ignore[arg-type]


def test_the_upgrade_request_is_a_get_that_h11_parses_with_our_key_and_headers() -> None:
    up = upgrade(headers=[("authorization", "Bearer k"), ("Host", "ignored")], subprotocols=["a"])
    server = h11.Connection(h11.SERVER)
    server.receive_data(up.request())
    request = server.next_event()
    assert isinstance(request, h11.Request)
    assert request.method == b"GET" and request.target == b"/v1/responses"
    headers = {k.decode(): v.decode() for k, v in request.headers}
    assert headers["host"] == "example.test"  # ours; the -H Host copy is not sent twice
    assert headers["upgrade"] == "websocket" and headers["connection"] == "Upgrade"
    assert headers["sec-websocket-key"] == NONCE.decode()
    assert headers["sec-websocket-version"] == "13"
    assert headers["sec-websocket-protocol"] == "a"
    assert headers["authorization"] == "Bearer k"
    assert "sec-websocket-extensions" not in headers  # deflate not offered unless asked


def test_a_101_split_anywhere_is_accepted_with_every_header_and_the_frames_behind_it() -> None:
    frames = Connection(ConnectionType.SERVER).send(TextMessage(data='{"type":"x"}'))
    wire = (
        answer(
            headers=[
                ("Upgrade", "WebSocket"),  # hypercorn spells it so
                ("Connection", "Upgrade"),
                ("Sec-WebSocket-Accept", generate_accept_token(NONCE).decode()),
                ("Server", "test"),
                ("X-Request-Id", "req_1"),
            ]
        )
        + frames
    )
    for cut in range(1, len(wire)):
        up = upgrade()
        up.request()
        got = up.receive(wire[:cut])
        rest = wire[cut:]  # the next read: the transport hands it to the messages
        if got is None:
            got, rest = up.receive(wire[cut:]), b""
        assert got is not None and got.accepted, cut
        assert ("x-request-id", "req_1") in got.headers and ("server", "test") in got.headers
        messages = Messages(up.extensions())
        items = messages.feed(got.trailing, 5, 0) + messages.feed(rest, 6, 1)
        got_messages = [i.data for i in items if isinstance(i, MessageReceived)]
        assert got_messages == [b'{"type":"x"}'], cut


@pytest.mark.parametrize(
    ("headers", "words"),
    [
        ([("Upgrade", "websocket"), ("Connection", "Upgrade")], "Sec-WebSocket-Accept"),
        (
            [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", "x")],
            "does not answer our key",
        ),
        ([("Connection", "Upgrade")], "Upgrade: websocket"),
    ],
)
def test_a_101_that_breaks_the_handshake_rules_is_refused(
    headers: list[tuple[str, str]], words: str
) -> None:
    up = upgrade()
    up.request()
    with pytest.raises(UpgradeFailed, match=words):
        up.receive(answer(headers=headers))


def test_an_extension_or_subprotocol_we_never_offered_is_refused() -> None:
    accept = ("Sec-WebSocket-Accept", generate_accept_token(NONCE).decode())
    base = [("Upgrade", "websocket"), ("Connection", "Upgrade"), accept]
    up = upgrade()
    up.request()
    with pytest.raises(UpgradeFailed, match="permessage-deflate"):
        up.receive(answer(headers=[*base, ("Sec-WebSocket-Extensions", "permessage-deflate")]))
    up = upgrade()
    up.request()
    with pytest.raises(UpgradeFailed, match="subprotocol"):
        up.receive(answer(headers=[*base, ("Sec-WebSocket-Protocol", "chat")]))


def test_a_refusal_comes_back_with_its_status_headers_and_body() -> None:
    up = upgrade()
    up.request()
    wire = answer(403, [("Server", "nginx")], b'{"error":{"message":"no"}}')
    got = up.receive(wire[:40]) or up.receive(wire[40:])
    assert got is not None and got.status == 403 and not got.accepted
    body = up.body()
    while not up.body_done:
        body += up.body(b"")
    assert body == b'{"error":{"message":"no"}}'


def test_eof_before_any_answer_is_an_upgrade_failure() -> None:
    up = upgrade()
    up.request()
    up.receive(b"HTTP/1.1 10")
    with pytest.raises(UpgradeFailed):
        up.receive(b"")


# -- messages ---------------------------------------------------------------------------
def server_stream() -> tuple[bytes, list[bytes]]:
    """Three messages as a server sends them: one whole, one in three fragments with a
    ping and a pong between them, a binary one; then a Close 1011 with a reason."""
    server = Connection(ConnectionType.SERVER)
    wire = server.send(TextMessage(data='{"type":"a"}'))
    wire += server.send(TextMessage(data='{"type":', message_finished=False))
    wire += server.send(Ping(payload=b"srv"))
    wire += server.send(TextMessage(data='"b","delta":"é', message_finished=False))
    wire += server.send(Pong(payload=(0).to_bytes(8, "big")))
    wire += server.send(TextMessage(data='"}', message_finished=True))
    wire += server.send(BytesMessage(data=b"\x00\x01"))
    wire += server.send(CloseConnection(code=1011, reason="boom"))
    return wire, [b'{"type":"a"}', '{"type":"b","delta":"é"}'.encode()]


def feed_all(messages: Messages, parts: list[bytes]) -> list[object]:
    items: list[object] = []
    for n, part in enumerate(parts):
        items += messages.feed(part, 100 + n, n)
    return items


def test_messages_at_every_split_point_are_whole_and_stamped_with_the_read_that_ended_them() -> (
    None
):
    wire, texts = server_stream()
    for cut in range(1, len(wire)):
        messages = Messages()
        items = feed_all(messages, [wire[:cut], wire[cut:]])
        got = [i for i in items if isinstance(i, MessageReceived)]
        assert [m.data for m in got if m.text] == texts, cut
        assert [m.frames for m in got] == [1, 3, 1]
        assert not got[2].text and got[2].data == b"\x00\x01"
        # The fragmented message completes with its last frame: in the second read unless
        # the whole of it (up to its last byte) was in the first.
        end_of_b = wire.index(b'\x80\x02"}') + 4  # FIN, continuation, 2 bytes: '"}'
        assert got[1].read_index == (0 if cut >= end_of_b else 1)
        assert got[1].t_ns == 100 + got[1].read_index
        close = [i for i in items if isinstance(i, CloseReceived)]
        assert [(c.code, c.reason, c.by) for c in close] == [(1011, "boom", "server")]
        assert close[0].t_ns == 101  # the Close frame's last byte is always in the second read
        assert messages.fragmented == 1 and messages.messages == 3
        assert messages.control_frames == 2


def test_control_frames_between_fragments_are_answered_and_matched() -> None:
    wire, _ = server_stream()
    messages = Messages()
    items = messages.feed(wire, 7, 3)
    pings = [i for i in items if isinstance(i, PingReceived)]
    pongs = [i for i in items if isinstance(i, PongReceived)]
    assert [p.payload for p in pings] == [b"srv"]
    assert [ping_number(p.payload) for p in pongs] == [0]
    # What goes back: the pong for the server's ping and the close handshake's reply,
    # both frames the server's own Connection reads.
    server = Connection(ConnectionType.SERVER)
    server.send(TextMessage(data="x"))  # any state is fine: the server reads client frames
    back = messages.outgoing()
    server.receive_data(back)
    events = list(server.events())
    assert any(isinstance(e, Pong) and e.payload == b"srv" for e in events)
    assert any(isinstance(e, CloseConnection) and e.code == 1011 for e in events)


def test_the_connection_ending_without_a_close_frame_is_1006() -> None:
    server = Connection(ConnectionType.SERVER)
    messages = Messages()
    messages.feed(server.send(TextMessage(data="{}")), 1, 0)
    assert messages.eof(9) == [CloseReceived(code=1006, reason="", t_ns=9, by="eof")]


def test_a_frame_that_breaks_the_protocol_closes_with_the_code_we_send_back() -> None:
    messages = Messages()
    # An unmasked text frame with reserved bit RSV1 set and no extension negotiated.
    items = messages.feed(b"\xc1\x02{}", 4, 0)
    assert len(items) == 1 and isinstance(items[0], CloseReceived)
    assert items[0].by == "protocol" and items[0].code == 1002
    assert messages.outgoing()  # our Close 1002 goes back


def test_a_message_past_the_cap_is_a_1009_close_instead_of_growing() -> None:
    server = Connection(ConnectionType.SERVER)
    messages = Messages(max_message=10)
    wire = server.send(TextMessage(data="x" * 6, message_finished=False))
    wire += server.send(TextMessage(data="y" * 6, message_finished=True))
    items = messages.feed(wire, 1, 0)
    assert [(i.by, i.code) for i in items if isinstance(i, CloseReceived)] == [("protocol", 1009)]
    assert "longer than 10 bytes" in items[-1].reason  # type: ignore[union-attr]
    assert messages.outgoing()  # our Close 1009 goes back
    # The rest of the message (and anything after it) is not read: nothing more grows.
    assert messages.feed(server.send(TextMessage(data="z" * 6)), 2, 1) == []
    assert not messages.open


def deflate_pair() -> tuple[Upgrade, Connection]:
    """A client upgrade that offered permessage-deflate, and the server (wsproto's own
    Connection) that accepted it: what the server sends is really compressed."""
    up = upgrade(deflate=True)
    request = up.request()
    assert b"Sec-WebSocket-Extensions: permessage-deflate" in request
    server_ext = PerMessageDeflate()
    offer = next(
        line.split(b": ", 1)[1].decode()
        for line in request.split(b"\r\n")
        if line.startswith(b"Sec-WebSocket-Extensions")
    )
    accepted = server_ext.accept(offer)
    assert isinstance(accepted, str)
    got = up.receive(
        answer(
            headers=[
                ("Upgrade", "websocket"),
                ("Connection", "Upgrade"),
                ("Sec-WebSocket-Accept", generate_accept_token(NONCE).decode()),
                ("Sec-WebSocket-Extensions", f"permessage-deflate; {accepted}".rstrip("; ")),
            ]
        )
    )
    assert got is not None and got.extensions and got.extensions[0].startswith("permessage-deflate")
    return up, Connection(ConnectionType.SERVER, extensions=[server_ext])


def test_permessage_deflate_negotiated_and_decoded() -> None:
    up, server = deflate_pair()
    text = '{"type":"response.output_text.delta","delta":"' + "token " * 50 + '"}'
    wire = server.send(TextMessage(data=text))
    assert len(wire) < len(text)  # it really was compressed
    messages = Messages(up.extensions())
    items = messages.feed(wire, 1, 0)
    assert [i.data for i in items if isinstance(i, MessageReceived)] == [text.encode()]


def test_a_compressed_message_with_a_ping_between_its_fragments_at_every_split() -> None:
    # RFC 6455 §5.4 lets a control frame sit between the fragments of a message; the
    # message's compression (RSV1 on its first frame) goes on after it.
    _up, server = deflate_pair()
    head = '{"type":"a","delta":"' + "x" * 300
    wire = server.send(TextMessage(data=head, message_finished=False))
    wire += server.send(Ping(payload=b"mid"))
    wire += server.send(TextMessage(data="y" * 300 + '"}', message_finished=True))
    wire += server.send(TextMessage(data='{"type":"b"}'))
    want = [('{"type":"a","delta":"' + "x" * 300 + "y" * 300 + '"}').encode(), b'{"type":"b"}']
    for cut in range(1, len(wire), 7):
        messages = Messages(deflate_pair()[0].extensions())
        items = feed_all(messages, [wire[:cut], wire[cut:]])
        assert [i.data for i in items if isinstance(i, MessageReceived)] == want, cut
        assert [i.payload for i in items if isinstance(i, PingReceived)] == [b"mid"]


def test_a_deflate_bomb_is_refused_before_it_inflates_past_the_cap() -> None:
    up, _server = deflate_pair()
    # 64 MiB of "a" as one compressed text frame: 64 KiB on the wire (a socket read's worth).
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    payload = deflater.compress(b"a" * (64 << 20)) + deflater.flush(zlib.Z_SYNC_FLUSH)[:-4]
    size = struct.pack("!BH", 126, len(payload)) if len(payload) < 1 << 16 else None
    size = size or struct.pack("!BQ", 127, len(payload))
    wire = b"\xc1" + size + payload  # FIN, RSV1, text
    assert len(wire) < 80_000
    messages = Messages(up.extensions(), max_message=1 << 20)
    tracemalloc.start()
    try:
        items = messages.feed(wire, 1, 0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(i.by, i.code) for i in items if isinstance(i, CloseReceived)] == [("protocol", 1009)]
    assert "longer than 1048576 bytes" in items[-1].reason  # type: ignore[union-attr]
    # Inflated no further than the 1 MiB cap (and its copies): wsproto's own extension
    # inflated the whole 64 MiB before the cap could look at it.
    assert peak < 8 << 20, peak


def test_frames_after_our_close_are_read_and_never_answered() -> None:
    # A ping that crossed our Close on the wire: wsproto refuses to send its pong after our
    # Close (LocalProtocolError), and RFC 6455 §5.5.1 lets nothing follow our Close.
    server = Connection(ConnectionType.SERVER)
    messages = Messages()
    assert messages.close(1000)
    items = messages.feed(server.send(Ping(payload=b"late")), 5, 0)
    assert [i.payload for i in items if isinstance(i, PingReceived)] == [b"late"]
    assert messages.outgoing() == b""
    reply = server.send(CloseConnection(code=1000))
    items = messages.feed(reply, 6, 1)
    assert [(i.by, i.code) for i in items if isinstance(i, CloseReceived)] == [("server", 1000)]


def test_a_frame_refused_after_our_close_raises_nothing_and_sends_nothing() -> None:
    messages = Messages()
    assert messages.close(1000)
    items = messages.feed(b"\xc1\x02{}", 4, 0)  # RSV1 with no extension negotiated
    assert [(i.by, i.code) for i in items if isinstance(i, CloseReceived)] == [("protocol", 1002)]
    assert messages.outgoing() == b""
    # And a message past the cap after our Close: a close, not an exception.
    big = Messages(max_message=4)
    assert big.close(1000)
    items = big.feed(Connection(ConnectionType.SERVER).send(TextMessage(data="x" * 9)), 5, 0)
    assert [(i.by, i.code) for i in items if isinstance(i, CloseReceived)] == [("protocol", 1009)]
