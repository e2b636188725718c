"""Proxy failures that need no third-party proxy: a closed port, a proxy that hangs up or
refuses, HTTP/3 with a proxy, NO_PROXY, bad proxy options. Real sockets on loopback; the
proxies that behave are tested against squid and tinyproxy in tests/lab."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h11
import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.tracer.orchestrator import trace
from tests.helpers.cli import CliResult, run_cli
from tests.helpers.hostile import hostile_proxy
from tests.helpers.rawserver import raw_server
from tests.helpers.refserver import RefServer, reference_server


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(*args: str, environ: dict[str, str] | None = None) -> CliResult:
    return run_cli("run", *args, "--json", "--timeout", "10", "--max-tokens", "4", environ=environ)


def _error(result: CliResult) -> dict[str, object]:
    body = json.loads(result.stdout)
    assert isinstance(body, dict) and isinstance(body["error"], dict)
    return body["error"]


def test_a_proxy_that_is_not_listening_fails_in_proxy_connect(origin: RefServer) -> None:
    proxy = f"http://127.0.0.1:{_closed_port()}"
    url = f"https://localhost:{origin.port}/v1/chat/completions"
    result = _run(url, "--cacert", str(origin.ca), environ={"HTTPS_PROXY": proxy})
    assert result.exit_code == 4
    error = _error(result)
    assert (error["stage"], error["kind"]) == ("proxy_connect", "refused")
    assert "the proxy 127.0.0.1" in str(error["message"])


def test_a_proxy_that_hangs_up_on_connect_is_proxy_closed(origin: RefServer) -> None:
    url = f"https://localhost:{origin.port}/v1/chat/completions"
    with raw_server(b"", ending="fin") as port:
        result = _run(url, "--cacert", str(origin.ca), "-x", f"127.0.0.1:{port}")
    assert result.exit_code == 4
    error = _error(result)
    assert (error["stage"], error["kind"]) == ("tunnel", "proxy_closed")


def test_a_proxy_answering_502_names_the_proxy(origin: RefServer) -> None:
    url = f"https://localhost:{origin.port}/v1/chat/completions"
    answer = b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nvia: 1.1 corp-gw\r\n\r\n"
    with raw_server(answer, ending="fin") as port:
        result = _run(url, "--cacert", str(origin.ca), "-x", f"http://127.0.0.1:{port}")
    body = json.loads(result.stdout)
    assert result.exit_code == 6
    error = body["error"]
    assert (error["stage"], error["kind"]) == ("tunnel", "http_502")
    assert f"the proxy http://127.0.0.1:{port}" in error["message"]
    assert body["proxy"]["connect_status"] == 502
    assert body["proxy"]["headers"] == {"via": "1.1 corp-gw"}


def test_http3_with_a_proxy_is_a_usage_error(origin: RefServer) -> None:
    url = f"https://localhost:{origin.port}/v1/chat/completions"
    result = _run(url, "--http", "3", "--cacert", str(origin.ca), "-x", "http://127.0.0.1:9")
    assert result.exit_code == 2
    error = _error(result)
    assert "QUIC does not cross an HTTP CONNECT proxy" in str(error["message"])


def test_no_proxy_goes_direct_and_says_so(origin: RefServer) -> None:
    url = f"https://localhost:{origin.port}/v1/chat/completions"
    env = {"HTTPS_PROXY": f"http://127.0.0.1:{_closed_port()}", "NO_PROXY": "localhost"}
    result = _run(url, "--cacert", str(origin.ca), environ=env)
    body = json.loads(result.stdout)
    assert result.exit_code == 0, result.stdout
    assert body["proxy"] is None
    assert body["proxy_note"] == "HTTPS_PROXY bypassed: localhost matches NO_PROXY"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("-x", "socks5://u:hunter22@127.0.0.1:1080"), "socks5:// proxies are not supported"),
        (("-x", "http://127.0.0.1:3128/some/path"), "without a path"),
        (("--proxy-user", "hunter22"), "--proxy-user wants USER:PASS"),
    ],
)
def test_bad_proxy_options_are_one_line_usage_errors(
    args: tuple[str, ...], words: str, tmp_path: Path
) -> None:
    result = run_cli("run", "https://localhost:1/v1/chat/completions", *args)
    assert result.exit_code == 2
    assert words in result.stderr
    assert "hunter22" not in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_a_proxy_that_never_answers_connect_times_out_in_the_tunnel(origin: RefServer) -> None:
    url = f"https://localhost:{origin.port}/v1/chat/completions"
    with raw_server(b"", ending="hold") as port:
        result = run_cli(
            "run", url, "--json", "--timeout", "1", "--cacert", str(origin.ca),
            "-x", f"http://127.0.0.1:{port}",
        )  # fmt: skip
    assert result.exit_code == 8
    body = json.loads(result.stdout)
    error = body["error"]
    assert (error["stage"], error["kind"]) == ("tunnel", "timeout")
    assert f"the proxy http://127.0.0.1:{port}" in error["message"]
    # The stalled stage ran to the deadline, and the waterfall's axis shows it.
    assert body["stages_ms"]["tunnel"] >= 900


async def test_tunnel_stage_leaves_out_building_the_connect(
    origin: RefServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Building the CONNECT is made slow (h11 turns the event into bytes before httpcore
    # writes them): the stage is the proxy's time, from the send that carries it.
    built: list[int] = []
    send = h11.Connection.send

    def slow_connect(self: h11.Connection, event: Any) -> bytes | None:
        data = send(self, event)
        if isinstance(event, h11.Request) and event.method == b"CONNECT":
            time.sleep(0.2)
            built.append(time.perf_counter_ns())
        return data

    monkeypatch.setattr(h11.Connection, "send", slow_connect)
    with hostile_proxy(lambda _request: b"HTTP/1.1 200 Connection established\r\n\r\n") as port:
        args = RunArgs(
            target=f"https://localhost:{origin.port}/v1/chat/completions",
            cacert=str(origin.ca),
            proxy=f"http://127.0.0.1:{port}",
            http="1.1",
            timeout=20.0,
            max_tokens=3,
            headers=["x-promptpath-ttft-ms: 0", "x-promptpath-rate: 0"],
        )
        result = await trace(build_options(args, environ={}))
    assert result.exc is None, result.exc
    tunnel = result.timeline.stage("tunnel")
    assert tunnel is not None and tunnel.duration_ns is not None and tunnel.ok
    assert len(built) == 1
    assert tunnel.start_ns >= built[0]
    assert tunnel.duration_ns < 200_000_000
    # ...and the TLS inside the tunnel starts after its answer.
    tls = result.timeline.stage("tls")
    assert tls is not None and tunnel.end_ns is not None and tls.start_ns >= tunnel.end_ns
