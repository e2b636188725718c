"""HTTP/3 through a real caddy: Alt-Svc discovered over TCP, then traced over QUIC.

caddy terminates TLS (its internal CA) for h1/h2/h3 on one port number and reverse-proxies
to the reference endpoint over plain HTTP/1.1. Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import itertools
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from promptpath.options import RunOptions, parse_target
from promptpath.report.compare_http import compare_json
from promptpath.tracer import trace_pair
from promptpath.tracer.h3discovery import discover_h3
from promptpath.tracer.orchestrator import trace
from tests.conftest import require_binary
from tests.helpers.ports import free_port
from tests.helpers.proxylab import serves_tls
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

CHAT = "/v1/chat/completions"
STARTUP_S = 20.0


@dataclass(frozen=True, slots=True)
class Caddy:
    port: int
    root_ca: str


def _caddyfile(port: int, upstream: int, storage: Path) -> str:
    return f"""\
{{
\tadmin off
\tskip_install_trust
\tauto_https disable_redirects
\tstorage file_system {storage}
\tservers {{
\t\tprotocols h1 h2 h3
\t}}
}}

https://localhost:{port} {{
\tbind 127.0.0.1
\ttls internal
\treverse_proxy 127.0.0.1:{upstream}
}}
"""


def _wait_ready(process: subprocess.Popen[bytes], port: int, root: Path, log: Path) -> None:
    # A verified handshake, not only an accepting port: caddy listens before its
    # certificate is in its cache (proxylab.wait_for_tls).
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"caddy exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        if serves_tls(port, str(root), "localhost"):
            return
        time.sleep(0.1)
    pytest.fail(f"caddy not ready within {STARTUP_S:g} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("upstream")) as srv:
        yield srv


@pytest.fixture(scope="module")
def caddy(upstream: RefServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Caddy]:
    binary = require_binary("caddy")
    workdir = tmp_path_factory.mktemp("caddy")
    storage = workdir / "storage"
    port = free_port(udp=True)
    config = workdir / "Caddyfile"
    config.write_text(_caddyfile(port, upstream.port, storage))
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")} | {
        "HOME": str(workdir),
        "XDG_DATA_HOME": str(workdir),
        "XDG_CONFIG_HOME": str(workdir),
    }
    log = workdir / "caddy.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [binary, "run", "--config", str(config), "--adapter", "caddyfile"],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=workdir,
        )
    try:
        root = storage / "pki" / "authorities" / "local" / "root.crt"
        _wait_ready(process, port, root, log)
        yield Caddy(port=port, root_ca=str(root))
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _options(caddy: Caddy, http: str, headers: tuple[tuple[str, str], ...] = ()) -> RunOptions:
    return RunOptions(
        target=parse_target(f"https://localhost:{caddy.port}{CHAT}"),
        provider="openai",
        model="test-model",
        http=http,  # type: ignore[arg-type]
        cacert=caddy.root_ca,
        family=socket.AF_INET,
        resolve=(("localhost", caddy.port, "127.0.0.1"),),
        timeout=15.0,
        headers=headers,
    )


async def test_alt_svc_from_caddy_advertises_h3_on_the_same_port(caddy: Caddy) -> None:
    result = await trace(_options(caddy, "auto"))
    assert result.exc is None, result.exc
    assert result.timeline.http_version == "HTTP/2"
    h3 = await discover_h3(result)
    assert h3 is not None and h3["advertised_by"] == "alt-svc", h3
    assert h3["port"] == caddy.port and h3["authority"] == f":{caddy.port}"
    assert isinstance(h3["max_age"], int) and h3["max_age"] > 0
    assert not h3["alt_svc"]["problems"]


async def test_h3_through_caddy_streams_tokens(caddy: Caddy) -> None:
    headers = (("x-promptpath-rate", "20"), ("x-promptpath-tokens", "10"))
    result = await trace(_options(caddy, "3", headers))
    assert result.exc is None, result.exc
    tl = result.timeline
    assert tl.http_version == "HTTP/3"
    assert tl.tls is not None and (tl.tls.alpn, tl.tls.version) == ("h3", "TLSv1.3")
    assert tl.tls.cert is not None and "localhost" in tl.tls.cert.sans
    assert tl.stage("quic_handshake") is not None and tl.stream_end == "marker"
    stamps = [e.t_ns for e in tl.events if e.kind == "content"]
    assert len(stamps) == 10
    gaps = sorted((b - a) / 1e6 for a, b in itertools.pairwise(stamps))
    # Streamed, not buffered: tokens arrive at the upstream's cadence (50 ms), each in
    # its own datagram, not in one burst at the end.
    assert 30 <= gaps[len(gaps) // 2] <= 90, gaps
    reads = {e.read_index for e in tl.events if e.kind == "content"}
    assert len(reads) >= 8


async def test_compare_through_caddy(caddy: Caddy) -> None:
    results = await trace_pair(_options(caddy, "auto"))
    assert [r.timeline.http_version for r in results] == ["HTTP/2", "HTTP/3"]
    assert all(r.exc is None for r in results), [r.exc for r in results]
    body = compare_json(results)
    assert body["differences"]["setup_round_trips"] == {
        "label": "setup round trips (expected, not measured)",
        "unit": "round trips",
        "http2": 2.0,
        "http3": 1.0,
        "delta": -1.0,
        "better": "http3",
        "measured": False,  # from the protocol versions, not timed
        "noise_floor": 0.5,
        "client_side": False,  # an expectation is never client CPU
        "samples": {"http2": 1, "http3": 1},
        "spread": {"http2": None, "http3": None},
        "values": {"http2": [2.0], "http3": [1.0]},
    }
