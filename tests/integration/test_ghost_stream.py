"""The ghost-stream probe over real loopback sockets: the reference endpoint that stops,
one that ghosts (--ignore-disconnect), and a gateway fixture that ghosts for it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer
from tests.integration.conftest import StartRefServer

CHAT = "/v1/chat/completions"
SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())


def ghost(url: str, *extra: str) -> tuple[int, dict]:
    got = run_cli("run", url + CHAT, "--canary", "--probe", "ghost-stream", "--json", *extra)
    report = json.loads(got.stdout)
    jsonschema.validate(report, SCHEMA)
    (finding,) = report["findings"]
    return got.exit_code, finding


@pytest.fixture
def plain(start_refserver: StartRefServer) -> RefServer:
    return start_refserver(tls=False)


def test_an_endpoint_that_stops_passes_for_both_ways_of_leaving(
    start_refserver: StartRefServer,
) -> None:
    server = start_refserver(tls=True)
    code, finding = ghost(server.url, "--cacert", str(server.ca))
    assert code == ExitCode.OK and finding["verdict"] == "pass", finding
    runs = finding["evidence"]["runs"]
    # Over TLS ALPN selects h2: the third request leaves by RST_STREAM, connection kept.
    assert [r["style"] for r in runs] == ["abrupt", "clean", "h2_cancel"]
    for r in runs:
        # The canary checks for the disconnect on every chunk: the token in hand at most.
        # (The HTTP/2 connection is closed only after the canary's record says the
        # generation ended: what it saw there was the reset stream.)
        assert r["read"] == 5 and r["wasted_tokens"] <= 1 and r["upstream_saw_disconnect"]
        assert 0 <= r["disconnect_seen_ms"] < 200
    assert "HTTP/2 stream reset" in finding["summary"]


def _tried(finding: dict) -> list[dict]:
    return [r for r in finding["evidence"]["runs"] if "generated" in r]


def test_h2c_leaves_by_stream_reset_when_asked_for_with_http_2(plain: RefServer) -> None:
    code, finding = ghost(plain.url, "--http", "2")
    assert code == ExitCode.OK and finding["verdict"] == "pass", finding
    assert [r["style"] for r in _tried(finding)] == ["abrupt", "clean", "h2_cancel"]


def test_plain_http_without_http_2_does_not_try_the_stream_reset(plain: RefServer) -> None:
    code, finding = ghost(plain.url)
    assert code == ExitCode.OK and finding["verdict"] == "pass", finding
    h2_run = finding["evidence"]["runs"][-1]
    assert h2_run["style"] == "h2_cancel" and "--http 2" in h2_run["problem"]
    assert "HTTP/2 stream reset not tried" in finding["summary"]


def test_an_endpoint_that_ignores_the_disconnect_fails_with_the_waste(
    start_refserver: StartRefServer,
) -> None:
    server = start_refserver(tls=False, extra_args=["--ignore-disconnect"])
    code, finding = ghost(server.url, "--http", "2")
    assert code == ExitCode.FINDING and finding["verdict"] == "fail"
    assert len(_tried(finding)) == 3  # the stream reset is ignored as well
    for r in finding["evidence"]["runs"]:
        assert r["generated"] == 40 and r["wasted_tokens"] == 35
        # 35 more tokens at 20/s: the last one ~1.75 s after the client left.
        assert 1500 < r["last_token_ms"] < 2500


def test_blind_mode_skips_without_sending_anything(plain: RefServer) -> None:
    got = run_cli("run", plain.url + CHAT, "--probe", "ghost-stream", "--json")
    (finding,) = json.loads(got.stdout)["findings"]
    assert finding["verdict"] == "skip" and "blind mode" in finding["summary"]


def test_a_tag_the_canary_never_saw_is_a_skip_not_a_pass(
    plain: RefServer, start_refserver: StartRefServer
) -> None:
    # --canary-admin at another reference endpoint: it answers 404 for the tag, as the
    # canary does when a hop stripped the x-promptpath-probe-id header.
    other = start_refserver(tls=False)
    code, finding = ghost(plain.url, "--canary-admin", other.url)
    assert code == ExitCode.OK and finding["verdict"] == "skip"
    assert "no request tagged" in finding["summary"]
    assert len(finding["evidence"]["runs"]) == 1  # the second style is not tried


@pytest.fixture
def ghost_gateway(plain: RefServer) -> Iterator[str]:
    """tests/helpers/ghostgateway.py in front of the canary, in its own process."""
    root = Path(__file__).parents[2]
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.helpers.ghostgateway", "--upstream", plain.url],
        cwd=root,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(5)


def test_a_gateway_that_keeps_pulling_is_caught(ghost_gateway: str, plain: RefServer) -> None:
    code, finding = ghost(ghost_gateway, "--canary-admin", plain.url)
    assert code == ExitCode.FINDING and finding["verdict"] == "fail"
    assert "never saw the client leave" in finding["summary"]
    for r in _tried(finding):
        assert r["generated"] == 40 and r["upstream_saw_disconnect"] is False
