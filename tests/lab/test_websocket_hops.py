"""A WebSocket run through real hops: nginx as a reverse proxy, tinyproxy's CONNECT.

The smoke test only: the upgrade check, idle timeouts and the rest of the WebSocket lab
belong to the probes built on this transport. Checked by hand first (nginx 1.22.1,
tinyproxy 1.11.1, serve on loopback): nginx with ``proxy_http_version 1.1`` and the two
``proxy_set_header`` lines (Upgrade $http_upgrade, Connection "upgrade") passes the 101
and streams every message; without them it forwards a plain GET, which serve answers
405 ("GET not allowed; use POST") with ``Server: nginx/1.22.1``. tinyproxy tunnels
CONNECT to any port, and the upgrade and the messages run inside the tunnel.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.fwdproxy import tinyproxy
from tests.helpers.proxylab import nginx
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

UPGRADE_LINES = (
    "proxy_http_version 1.1;\n"
    "proxy_set_header Upgrade $http_upgrade;\n"
    'proxy_set_header Connection "upgrade";'
)


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("ws-ref")) as server:
        yield server


@pytest.fixture(scope="module")
def plain_origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("ws-plain")) as server:
        yield server


def run(url: str, *args: str) -> tuple[int, dict[str, Any]]:
    result = run_cli("run", url, "--json", "--timeout", "20", "-H", "x-promptpath-tokens: 6", *args)
    assert result.stdout, result.stderr
    return result.exit_code, json.loads(result.stdout)


def test_nginx_with_the_upgrade_headers_streams_and_without_them_the_upgrade_fails(
    plain_origin: RefServer, tmp_path: Path
) -> None:
    with nginx(plain_origin.port, tmp_path, location=UPGRADE_LINES) as hop:
        code, report = run(f"ws://127.0.0.1:{hop.port}/v1/responses")
    assert code == ExitCode.OK, report["error"]
    assert report["tokens"]["count"] == 6 and report["websocket"]["messages"] >= 8
    assert report["response_headers"]["server"].startswith("nginx")
    with nginx(plain_origin.port, tmp_path, location="proxy_http_version 1.1;") as hop:
        code, report = run(f"ws://127.0.0.1:{hop.port}/v1/responses")
    assert code == ExitCode.HTTP_STATUS
    assert report["error"]["stage"] == "upgrade" and report["status"] == 405
    assert "nginx" in report["error"]["message"]


def test_wss_through_a_connect_proxy_upgrades_inside_the_tunnel(origin: RefServer) -> None:
    with tinyproxy() as proxy:
        code, report = run(
            f"wss://localhost:{origin.port}/v1/realtime?model=m",
            "--cacert",
            str(origin.ca),
            "--proxy",
            proxy.url,
        )
    assert code == ExitCode.OK, report["error"]
    assert report["proxy"]["tunnel"] and report["proxy"]["connect_status"] == 200
    assert {"proxy_connect", "tunnel", "tls", "upgrade"} <= set(report["stages_ms"])
    assert report["tls"]["alpn"] == "http/1.1"
    assert report["tokens"]["count"] == 6
