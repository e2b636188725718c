"""net/h2_internals.py over two real h2 connections (client and server, in memory):
a GOAWAY(NO_ERROR) leaves the client's connection open for the stream it let finish,
a GOAWAY with an error code still closes it, as h2 has it."""

from __future__ import annotations

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import hyperframe.frame
import pytest

from promptpath.net.h2_internals import H2InternalsChanged, keep_open_on_graceful_goaway

pytestmark = pytest.mark.unit

_REQUEST = [(":method", "GET"), (":authority", "x"), (":scheme", "http"), (":path", "/")]


def _pair() -> tuple[h2.connection.H2Connection, h2.connection.H2Connection]:
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    server = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    keep_open_on_graceful_goaway(client)
    client.initiate_connection()
    server.initiate_connection()
    server.receive_data(client.data_to_send())
    client.receive_data(server.data_to_send())
    server.receive_data(client.data_to_send())
    client.send_headers(1, _REQUEST, end_stream=True)
    server.receive_data(client.data_to_send())
    server.send_headers(1, [(":status", "200")])
    client.receive_data(server.data_to_send())
    return client, server


def _goaway(code: int, last: int) -> bytes:
    return bytes(hyperframe.frame.GoAwayFrame(0, last_stream_id=last, error_code=code).serialize())


def test_a_graceful_goaway_and_the_frames_after_it_in_one_read_are_all_parsed() -> None:
    client, server = _pair()
    server.send_data(1, b"after", end_stream=True)
    # One read carrying the GOAWAY and the rest of the stream (the worst case: without the
    # wrapper h2 raises ProtocolError on the DATA frame and the whole read is lost).
    events = client.receive_data(_goaway(0, 1) + server.data_to_send())
    kinds = [type(e) for e in events]
    ended = [h2.events.ConnectionTerminated, h2.events.DataReceived, h2.events.StreamEnded]
    assert kinds == ended
    client.ping(b"12345678")  # and the client can still send on the connection
    assert client.data_to_send().endswith(b"12345678")


def test_a_goaway_with_an_error_code_still_closes_the_connection() -> None:
    client, server = _pair()
    server.send_data(1, b"after")
    with pytest.raises(h2.exceptions.ProtocolError):
        client.receive_data(_goaway(11, 1) + server.data_to_send())


def test_a_changed_h2_fails_loudly() -> None:
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    del conn._frame_dispatch_table[hyperframe.frame.GoAwayFrame]
    with pytest.raises(H2InternalsChanged):
        keep_open_on_graceful_goaway(conn)
