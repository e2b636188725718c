"""The WebSocket probes through real hops: nginx with and without the upgrade headers and
with ``proxy_read_timeout 3s`` (one nginx, one server block each), wss:// through nginx's
TLS, haproxy's ``timeout tunnel``, squid's CONNECT for wss://.

Checked by hand first (nginx 1.22.1, haproxy 2.6, squid 5.7, serve on loopback; the
websockets library as a second client where it says so):
- nginx with ``proxy_http_version 1.1`` and the two ``proxy_set_header`` lines answers the
  101 with ``Server: nginx/1.22.1`` and passes frames both ways (a ping's pong in ~2 ms);
  without the two lines it forwards a plain GET: serve answers 405 on /v1/responses and
  426 on /v1/realtime, as a plain GET there gets, both with nginx's Server header.
- nginx ``proxy_read_timeout 3s``: a quiet socket is cut 2.96-3.0 s after the last
  upstream byte with a FIN and no Close frame (websockets: "no close frame received or
  sent"); with a client ping every 1 s it stays open (8 s watched).
- haproxy ``timeout tunnel 3s``: the same, cut after 3.00 s quiet, open with pings every
  1 s; ``timeout tunnel 300ms`` closes an upgraded socket ~0.4 s after the 101 (the ping at
  0.1 s, its pong, then 0.3 s of silence), before any message.
- squid 5.7 (our lab config, no SSL_ports rule) tunnels CONNECT for wss:// to any port;
  the upgrade, the ping and the messages run inside the tunnel.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.fwdproxy import squid
from tests.helpers.proxylab import LOOPBACK, free_port, haproxy, nginx
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

UPGRADE_LINES = (
    "proxy_http_version 1.1;\n"
    "proxy_set_header Upgrade $http_upgrade;\n"
    'proxy_set_header Connection "upgrade";'
)


@dataclass(frozen=True, slots=True)
class Hops:
    upgraded: int  # nginx with the upgrade lines
    plain: int  # nginx without them
    read_timeout: int  # with them and proxy_read_timeout 3s
    tls: int  # with them, listening with TLS (ca)
    ca: str


def _server(port: int, upstream: int, lines: str, listen: str = "") -> str:
    return f"""server {{
        listen {LOOPBACK}:{port}{listen};
        {"ssl_certificate " + "CERT;" if listen else ""}
        location / {{
            proxy_pass http://{LOOPBACK}:{upstream};
            {lines}
        }}
    }}"""


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("wsp-ref")) as server:
        yield server


@pytest.fixture(scope="module")
def hops(origin: RefServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hops]:
    """One nginx, four server blocks (the helper's own is the upgraded one)."""
    import trustme

    directory = tmp_path_factory.mktemp("wsp-nginx")
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "127.0.0.1")
    cert_file, key_file, ca_file = (directory / n for n in ("cert.pem", "key.pem", "ca.pem"))
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    ca.cert_pem.write_to_path(str(ca_file))
    plain, timed, tls = free_port(), free_port(), free_port()
    blocks = [
        _server(plain, origin.port, "proxy_http_version 1.1;"),
        _server(timed, origin.port, UPGRADE_LINES + "\nproxy_read_timeout 3s;"),
        _server(tls, origin.port, UPGRADE_LINES, " ssl").replace(
            "ssl_certificate CERT;",
            f"ssl_certificate {cert_file};\n        ssl_certificate_key {key_file};",
        ),
    ]
    with nginx(origin.port, directory, location=UPGRADE_LINES, http="\n".join(blocks)) as hop:
        yield Hops(upgraded=hop.port, plain=plain, read_timeout=timed, tls=tls, ca=str(ca_file))


def _json(*argv: str) -> tuple[int, dict[str, Any]]:
    result = run_cli(*argv, "--json", "--timeout", "20", "-H", "x-promptpath-tokens: 6")
    assert result.stdout, result.stderr
    return result.exit_code, json.loads(result.stdout)


def finding(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(f for f in report["findings"] if f["probe"] == name)
    return found


def test_upgrade_check_passes_through_nginx_with_the_lines_and_names_them_without(
    hops: Hops,
) -> None:
    _, report = _json("probe", f"ws://127.0.0.1:{hops.upgraded}/v1/responses", "upgrade")
    up = finding(report, "upgrade")
    assert up["verdict"] == "pass", up
    assert up["evidence"]["server"].startswith("nginx") and up["evidence"]["pong_ms"] is not None
    for path, status in (("/v1/responses", 405), ("/v1/realtime?model=m", 426)):
        _, report = _json("probe", f"ws://127.0.0.1:{hops.plain}{path}", "upgrade")
        up = finding(report, "upgrade")
        assert up["verdict"] == "fail" and up["evidence"]["failure"] == "forwarded_plain", up
        assert up["evidence"]["status"] == status
        assert up["evidence"]["plain_get"]["status"] == status
        assert "Upgrade and Connection headers" in up["summary"]
        assert "nginx" in up["summary"]
        assert "proxy_set_header Upgrade $http_upgrade;" in up["advice"][0]


def test_wss_through_nginx_tls_streams_and_upgrades(hops: Hops) -> None:
    code, report = _json(
        "probe", f"wss://localhost:{hops.tls}/v1/realtime?model=m", "upgrade", "--cacert", hops.ca
    )
    assert code == ExitCode.OK, report["error"]
    assert report["tokens"]["count"] == 6 and report["tls"]["alpn"] == "http/1.1"
    assert report["response_headers"]["server"].startswith("nginx")
    assert finding(report, "upgrade")["verdict"] == "pass"


def test_nginx_read_timeout_cuts_a_quiet_websocket_and_pings_keep_it_open(hops: Hops) -> None:
    url = f"ws://127.0.0.1:{hops.read_timeout}/v1/responses"
    _, report = _json("probe", url, "idle-timeout", "--idle-max", "7")
    idle = finding(report, "idle-timeout")
    evidence = idle["evidence"]
    assert idle["verdict"] == "warn", idle
    # 3 s as nginx times it from the last upstream byte; loaded-machine slack above.
    assert 2.7 <= evidence["threshold_s"] <= 4.5, evidence
    assert evidence["quiet"]["close"]["code"] == 1006  # FIN, no Close frame
    assert evidence["pings_help"] is True and evidence["pinged"]["pongs"] >= 2
    assert "proxy_read_timeout" in " ".join(idle["advice"])


def test_haproxy_timeout_tunnel_cuts_a_quiet_websocket_and_a_short_one_right_after_the_101(
    origin: RefServer, tmp_path: Path
) -> None:
    with haproxy(origin.port, tmp_path, defaults="timeout tunnel 2s") as hop:
        _, report = _json(
            "probe", f"ws://127.0.0.1:{hop.port}/v1/responses", "idle-timeout", "--idle-max", "5"
        )
    idle = finding(report, "idle-timeout")
    assert idle["verdict"] == "warn", idle
    assert 1.8 <= idle["evidence"]["threshold_s"] <= 3.5, idle["evidence"]
    assert idle["evidence"]["pings_help"] is True
    with haproxy(origin.port, tmp_path, defaults="timeout tunnel 300ms") as hop:
        _, report = _json("probe", f"ws://127.0.0.1:{hop.port}/v1/responses", "upgrade")
    up = finding(report, "upgrade")
    assert up["verdict"] == "fail" and up["evidence"]["failure"] == "closed", up
    assert 250 <= up["evidence"]["closed_after_ms"] < 1000
    assert any("timeout tunnel" in a for a in up["advice"])


def test_squid_connect_carries_wss_and_its_upgrade(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with (
        reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("wsp-tls")) as server,
        squid() as proxy,
    ):
        assert server.ca is not None
        code, report = _json(
            "probe",
            f"wss://localhost:{server.port}/v1/responses",
            "upgrade",
            "--cacert",
            server.ca,
            "--proxy",
            proxy.url,
        )
    assert code == ExitCode.OK, report["error"]
    assert report["proxy"]["tunnel"] and report["proxy"]["connect_status"] == 200
    assert report["tokens"]["count"] == 6
    up = finding(report, "upgrade")
    assert up["verdict"] == "pass" and up["evidence"]["pong_ms"] is not None
