"""A server that brings its stream one byte per packet: more socket reads than the cap of
kept reads (lowered to 50 here), over a real loopback socket. The run succeeds, the JSON
passes the schema, socket_reads and bytes are the true counts, the lists stay at the cap.

Checked by hand (benchmarks/bench_trickle.py): one byte per send with TCP_NODELAY, a
fraction of a millisecond apart, arrives on loopback as mostly one read per byte (1 s at
10 µs: 19,374 reads for 99,883 bytes; at 40 µs nearly one read per byte).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import anyio
import jsonschema
import pytest

from promptpath.core import timeline as timeline_mod
from promptpath.options import RunOptions, parse_target
from promptpath.report.json import result_json
from promptpath.tracer.orchestrator import trace

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
EVENT = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
BODY = EVENT * 20 + b"data: [DONE]\n\n"
CAP = 50


def _serve(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(5)
        request = b""
        while b"\r\n\r\n" not in request:
            request += conn.recv(65536)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"content-length: %d\r\n\r\n" % len(BODY)
        )
        for i in range(len(BODY)):
            conn.send(BODY[i : i + 1])
            time.sleep(0.0002)  # its own packet: the reader is woken for each


def test_a_stream_of_more_reads_than_the_cap_counts_them_all_and_keeps_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(timeline_mod, "MAX_KEPT_READS", CAP)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    server = threading.Thread(target=_serve, args=(listener,), daemon=True)
    server.start()
    port = listener.getsockname()[1]
    options = RunOptions(
        target=parse_target(f"http://127.0.0.1:{port}/v1/chat/completions"),
        provider="openai",
        model="m",
        timeout=20.0,
    )
    try:
        result = anyio.run(trace, options)
    finally:
        server.join(timeout=10)
        listener.close()
    tl = result.timeline
    assert tl.error is None and tl.stream_end == "marker"
    data = result_json(result, exit_code=0)
    jsonschema.validate(data, SCHEMA)
    stream, not_kept = data["stream"], data["stream"]["not_kept"]
    # Bounded: the lists stop at the cap whatever came after.
    assert len(tl.reads) == CAP and len(tl.chunks) <= CAP
    assert not_kept["reads"] > 0 and stream["socket_reads"] == CAP + not_kept["reads"]
    # True counts: every byte of the body, and the reads that carried them (the head's
    # read included) are at least as many as the body's packets the loop could merge.
    assert stream["bytes"] == len(BODY)
    assert stream["socket_reads"] > 2 * CAP
    assert sum(r.nbytes for r in tl.reads) + not_kept["read_bytes"] > len(BODY)
    assert data["tokens"]["count"] == 20 and stream["finished"]
