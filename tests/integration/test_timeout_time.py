"""A timeout keeps its time, over real sockets: the stage running at the deadline ends at
the deadline, the waterfall's axis reaches it, the verdict names the stall or the trickle.

The reference endpoint makes the stalls (``x-promptpath-pause-*``, ``-ttft-ms``); two small
raw servers make what it cannot: a request never answered, and a body one byte per 100 ms.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import jsonschema

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
#: The cut stage ends exactly at the deadline stamp; what may drift is only t0 to the
#: moment the deadline is taken (microseconds idle, tens of ms on a loaded 2-core box).
SLACK_MS = 250.0


def run(url: str, *args: str) -> tuple[int, dict[str, Any], str]:
    res = run_cli("run", url, "--json", *args)
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert "Traceback" not in res.stderr
    return res.exit_code, body, res.stderr


@contextmanager
def raw_server(serve: Callable[[socket.socket], None]) -> Iterator[str]:
    """A one-connection-at-a-time HTTP server on 127.0.0.1 that runs ``serve`` per client."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                with suppress(OSError):  # the client gave up at its deadline
                    serve(conn)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat/completions"
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def test_a_pause_mid_stream_is_the_streaming_stage_up_to_the_deadline(
    refserver_plain: RefServer,
) -> None:
    code, body, err = run(
        refserver_plain.url + "/v1/chat/completions",
        *("-H", "x-promptpath-pause-after: 3", "-H", "x-promptpath-pause-s: 30"),
        *("--timeout", "3"),
    )
    assert code == ExitCode.TIMEOUT
    assert body["error"]["stage"] == "stream" and body["error"]["cut_stage"] == "streaming"
    assert 3000 <= body["error"]["at_ms"] < 3000 + SLACK_MS
    streaming = body["stages_ms"]["streaming"]
    assert abs(streaming - (3000 - body["milestones_ms"]["ttft"])) < SLACK_MS, body["stages_ms"]
    assert body["stream"]["finished"] is False
    assert body["stream"]["stall_ms"] > 3000 - SLACK_MS - body["milestones_ms"]["last_token"]
    assert "0 … 3000 ms" in err and "streaming (timed out)" in err
    assert "FAILED in stream: no byte for 2." in err and "in stage stream, then the 3 s" in err


def test_headers_then_silence_is_the_first_token_stage_up_to_the_deadline(
    refserver_plain: RefServer,
) -> None:
    code, body, err = run(
        refserver_plain.url + "/v1/chat/completions",
        *("-H", "x-promptpath-ttft-ms: 30000", "--timeout", "2"),
    )
    assert code == ExitCode.TIMEOUT and body["error"]["cut_stage"] == "first_token"
    ttfb = body["milestones_ms"]["ttfb"]
    assert abs(body["stages_ms"]["first_token"] - (2000 - ttfb)) < SLACK_MS, body["stages_ms"]
    assert "0 … 2000 ms" in err and "no byte for" in err and "then the 2 s deadline" in err


def test_a_request_never_answered_is_the_wait_stage_up_to_the_deadline() -> None:
    with raw_server(lambda conn: time.sleep(4)) as url:
        code, body, err = run(url, "--timeout", "2")
    assert code == ExitCode.TIMEOUT and body["error"]["stage"] == "wait"
    sent = body["milestones_ms"]["request_sent"]
    assert abs(body["stages_ms"]["wait"] - (2000 - sent)) < SLACK_MS, body["stages_ms"]
    assert "wait (TTFB) (timed out)" in err and "in stage wait, then the 2 s deadline" in err


def trickle(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n")
    event = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
    for byte in event * 20 + b"data: [DONE]\n\n":
        conn.sendall(bytes([byte]))
        time.sleep(0.1)


def test_a_trickle_that_outlasts_the_deadline_is_not_ok() -> None:
    # Checked by hand: the first event (48 bytes, one per 100 ms) never completes in 2 s,
    # and the last byte came ~0.1 s before the deadline, so "no byte for 0.09 s" would
    # misname it; with a --timeout longer than the trickle the run ends OK, rightly.
    with raw_server(trickle) as url:
        code, body, err = run(url, "--timeout", "2")
    assert code == ExitCode.TIMEOUT and body["stream"]["finished"] is False
    assert "OK" not in err.splitlines()[-1]
    assert "still trickling" in err and "never finished within the 2 s deadline" in err
