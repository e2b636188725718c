"""dns-cache against a loopback canary: a skip with its reason, never a finding, no query.

Every run names a resolver of ours (a UDP socket on 127.0.0.1 that never answers) and pins
the connection with --resolve: any DNS message the probe sent would land there, and none
can leave the machine."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


@pytest.fixture
def silent_resolver() -> Iterator[socket.socket]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    yield sock
    sock.close()


def queries(sock: socket.socket) -> list[bytes]:
    received = []
    while True:
        try:
            received.append(sock.recv(4096))
        except BlockingIOError:
            return received


def probe_args(ref: RefServer, host: str, resolver: socket.socket) -> list[str]:
    assert ref.ca is not None
    ip, port = resolver.getsockname()
    return [
        "probe",
        f"https://{host}:{ref.port}/v1/chat/completions",
        "dns-cache",
        "--fail-on",
        "warn",
        "--cacert",
        ref.ca,
        "--resolve",
        f"{host}:{ref.port}:127.0.0.1",
        "--resolver",
        f"{ip}:{port}",
        "--max-tokens",
        "4",
    ]


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("localhost", "answered by /etc/hosts (RFC 6761), not resolved through DNS"),
        ("127.0.0.1", "is an IP address: it is not resolved at all"),
    ],
)
def test_dns_cache_skips_a_loopback_target_with_its_reason_and_fail_on_warn_passes(
    ref: RefServer, silent_resolver: socket.socket, host: str, reason: str
) -> None:
    res = run_cli(*probe_args(ref, host, silent_resolver), "--json")
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    [finding] = body["findings"]
    assert finding["probe"] == "dns-cache" and finding["verdict"] == "skip"
    assert reason in finding["summary"]
    assert queries(silent_resolver) == []


def test_the_terminal_report_shows_the_skip_reason(
    ref: RefServer, silent_resolver: socket.socket
) -> None:
    res = run_cli(*probe_args(ref, "localhost", silent_resolver))
    assert res.exit_code == 0, res.stderr
    assert "[SKIP] dns-cache: localhost is this machine" in res.stderr
    assert queries(silent_resolver) == []
