"""--probe edges on loopback: a --resolve pin says it decided, IPv6 is timed like IPv4,
--edges-max bounds what is timed, and through a forward proxy nothing is timed from here
(only the proxy's view is possible)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.integration

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def refserver_v6(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, host="::1", tmp_path=tmp_path_factory.mktemp("ref6")) as s:
        yield s


def _edges(*args: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    res = run_cli("run", *args, "--probe", "edges", "-H", "x-promptpath-rate: 0", "--json")
    assert res.exit_code in (0, 1), res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    finding = next(f for f in body["findings"] if f["probe"] == "edges")
    return body, finding, res.stderr


def test_a_resolve_pin_says_it_decided(refserver_tls: RefServer) -> None:
    assert refserver_tls.ca is not None
    port = refserver_tls.port
    _body, finding, _ = _edges(
        f"https://localhost:{port}{CHAT}",
        "--resolve",
        f"localhost:{port}:127.0.0.1",
        "--cacert",
        refserver_tls.ca,
    )
    assert finding["evidence"]["decided_by"] == "--resolve"
    assert finding["evidence"]["used"] == "127.0.0.1"
    assert "the --resolve pin decided which one the trace used" in finding["summary"]
    pinned = next(a for a in finding["evidence"]["addresses"] if a["ip"] == "127.0.0.1")
    assert "--resolve" in pinned["sources"] and pinned["median_ms"] is not None


def test_ipv6_is_timed_with_its_handshake_and_certificate(refserver_v6: RefServer) -> None:
    assert refserver_v6.ca is not None
    port = refserver_v6.port
    _body, finding, _ = _edges(
        f"https://localhost:{port}{CHAT}",
        "--resolve",
        f"localhost:{port}:::1",
        "--cacert",
        refserver_v6.ca,
    )
    v6 = next(a for a in finding["evidence"]["addresses"] if a["ip"] == "::1")
    assert v6["family"] == "ipv6" and v6["used"]
    assert len(v6["connect_ms"]) == 3 and v6["tls_ms"] is not None
    assert len(v6["fingerprint"]) == 64 and v6["alpn"] in ("h2", "http/1.1")
    assert finding["verdict"] == "pass"


def test_edges_max_bounds_what_is_timed(refserver_tls: RefServer) -> None:
    # localhost resolves to 127.0.0.1 and, where /etc/hosts says so, ::1; the pin adds
    # nothing new: one address timed at most, and the rest said not timed when cut.
    assert refserver_tls.ca is not None
    _body, finding, _ = _edges(
        refserver_tls.path(CHAT), "--cacert", refserver_tls.ca, "--edges-max", "1"
    )
    assert len(finding["evidence"]["addresses"]) == 1


def test_through_a_forward_proxy_only_the_proxys_view_is_said(refserver_plain: RefServer) -> None:
    # The proxy here is the reference endpoint itself (it answers a plain request whose
    # target is absolute-form): the trace goes through it, and the probe times nothing.
    _body, finding, _ = _edges(
        f"http://api.example.invalid{CHAT}", "--proxy", f"http://127.0.0.1:{refserver_plain.port}"
    )
    assert finding["verdict"] == "skip"
    assert "only the proxy's view is possible" in finding["summary"]
    assert finding["evidence"] == {}


@pytest.mark.parametrize(
    ("option", "words"),
    [
        (("--edges-max", "0"), "--edges-max must be 1 to 32"),
        (("--edges-resolver", "a b"), "--edges-resolver: DNS server must be an IP address"),
    ],
)
def test_a_bad_edges_option_is_one_line_and_exit_2_before_any_packet(
    option: tuple[str, str], words: str
) -> None:
    # Port 1 on loopback: were the run to start, its connect would be refused at once.
    res = run_cli("run", f"https://127.0.0.1:1{CHAT}", "--probe", "edges", *option, "--json")
    assert res.exit_code == 2
    body = json.loads(res.stdout)
    assert body["error"]["stage"] == "config" and body["error"]["kind"] == "bad_option"
    assert words in body["error"]["message"]
    assert res.stderr.strip().splitlines() == [f"promptpath: {body['error']['message']}"]
