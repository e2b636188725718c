"""The reference endpoint's own account: /metrics, tagged requests, ghost generation.

Real sockets on loopback; the server runs in its own process.
"""

from __future__ import annotations

import re
import time

import httpx
import pytest

from tests.helpers.refserver import RefServer, collect
from tests.integration.conftest import StartRefServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
SAMPLE = re.compile(r"^([a-z_]+)(\{[^}]*\})? (\S+)$")


def samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value, from Prometheus text; comments checked for shape."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) promptpath_serve_\w+ \S", line), line
            continue
        match = SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        out[match[1] + (match[2] or "")] = float(match[3])
    return out


def tagged(client: httpx.Client, server: RefServer, probe_id: str, *, until_ended: bool) -> dict:
    """The tagged request's record, polled until its generation ended."""
    deadline = time.monotonic() + 10
    while True:
        got = client.get(server.path(f"/stats/requests/{probe_id}"))
        record = got.json() if got.status_code == 200 else None
        if record is not None and (not until_ended or record["ended_unix_ns"] is not None):
            return record
        assert time.monotonic() < deadline, f"no ended record for {probe_id}: {got.text}"
        time.sleep(0.05)


@pytest.fixture
def plain(start_refserver: StartRefServer) -> RefServer:
    return start_refserver(tls=False)


def test_metrics_count_requests_completions_disconnects_and_histograms(plain: RefServer) -> None:
    with httpx.Client(timeout=10.0) as client:
        for _ in range(2):
            done = collect(
                client,
                plain.path("/v1/chat/completions"),
                CHAT,
                {
                    "x-promptpath-tokens": "4",
                    "x-promptpath-rate": "0",
                    "x-promptpath-ttft-ms": "30",
                },
            )
            assert done.stream.data_messages[-1].data == "[DONE]"
        collect(
            client,
            plain.path("/v1/chat/completions"),
            CHAT,
            {"x-promptpath-tokens": "40", "x-promptpath-rate": "20", "x-promptpath-probe-id": "m1"},
            stop_after=3,  # role event and two tokens, then the client leaves
        )
        tagged(client, plain, "m1", until_ended=True)
        text = client.get(plain.path("/metrics")).text
    got = samples(text)
    assert got["promptpath_serve_requests_total"] == 3
    assert got["promptpath_serve_completions_total"] == 2
    assert got["promptpath_serve_client_disconnects_total"] == 1
    assert got["promptpath_serve_tokens_after_disconnect_total"] == 0
    # Three streams produced a first token 30, 30 and ~0 ms after their request: every one
    # is in the +Inf bucket, the two 30 ms ones not under 25 ms.
    assert got['promptpath_serve_ttft_seconds_bucket{le="+Inf"}'] == 3
    assert got['promptpath_serve_ttft_seconds_bucket{le="0.025"}'] == 1
    assert got["promptpath_serve_ttft_seconds_count"] == 3
    assert got["promptpath_serve_stream_duration_seconds_count"] == 3
    # Cumulative buckets never decrease.
    buckets = [v for k, v in got.items() if k.startswith("promptpath_serve_ttft_seconds_bucket")]
    assert buckets == sorted(buckets)


def test_a_client_that_leaves_stops_generation_within_a_token(plain: RefServer) -> None:
    with httpx.Client(timeout=10.0) as client:
        collect(
            client,
            plain.path("/v1/chat/completions"),
            CHAT,
            {"x-promptpath-tokens": "40", "x-promptpath-rate": "20", "x-promptpath-probe-id": "t1"},
            stop_after=6,  # the role event and five tokens
        )
        left = time.time_ns()
        record = tagged(client, plain, "t1", until_ended=True)
    assert record["probe_id"] == "t1" and record["disconnected"] is True
    # The server checks for the disconnect on every chunk: at most the token in hand when
    # the close arrived was produced after the client read its fifth.
    assert 5 <= record["tokens_generated"] <= 6
    assert record["tokens_after_disconnect"] == 0
    assert record["disconnect_unix_ns"] - left < 200_000_000  # noticed within 0.2 s


def test_ignore_disconnect_keeps_generating_to_the_end(plain: RefServer) -> None:
    with httpx.Client(timeout=10.0) as client:
        collect(
            client,
            plain.path("/v1/chat/completions"),
            CHAT,
            {
                "x-promptpath-tokens": "20",
                "x-promptpath-rate": "40",
                "x-promptpath-probe-id": "g1",
                "x-promptpath-ignore-disconnect": "yes",
            },
            stop_after=4,
        )
        record = tagged(client, plain, "g1", until_ended=True)
        metrics = samples(client.get(plain.path("/metrics")).text)
    assert record["tokens_generated"] == 20 and record["disconnected"] is True
    # Tokens 4..5 may be produced before the server sees the close; the rest come after.
    assert 14 <= record["tokens_after_disconnect"] <= 17
    assert record["tokens_sent"] < 20
    # Generation went on at the cadence: the last token ~0.5 s (20 at 40/s) after the start.
    spread_s = (record["last_token_unix_ns"] - record["first_token_unix_ns"]) / 1e9
    assert 0.4 < spread_s < 1.5
    assert (
        metrics["promptpath_serve_tokens_after_disconnect_total"]
        == record["tokens_after_disconnect"]
    )


def test_an_unknown_probe_id_is_a_404(plain: RefServer) -> None:
    with httpx.Client(timeout=10.0) as client:
        got = client.get(plain.path("/stats/requests/nobody"))
    assert got.status_code == 404 and "nobody" in got.json()["error"]["message"]


def test_serve_flag_ignore_disconnect_is_the_default_for_every_request(
    start_refserver: StartRefServer,
) -> None:
    server = start_refserver(tls=False, extra_args=["--ignore-disconnect"])
    with httpx.Client(timeout=10.0) as client:
        collect(
            client,
            server.path("/v1/chat/completions"),
            CHAT,
            {"x-promptpath-tokens": "10", "x-promptpath-rate": "20", "x-promptpath-probe-id": "f"},
            stop_after=2,  # the role event and one token
        )
        record = tagged(client, server, "f", until_ended=True)
    # The flag's work: all 10 tokens made for a client that left after the first. How
    # many came after the server saw it leave depends on when it saw (>= 7 failed once,
    # 6, at load ~10 with 50 tokens/s): at 20/s a notice within 0.45 s leaves one or more.
    assert record["tokens_generated"] == 10 and record["disconnected"] is True
    assert 1 <= record["tokens_after_disconnect"] <= 9
