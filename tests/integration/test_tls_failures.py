"""The common TLS failures over real sockets, through the CLI: each is one line in plain
words naming stage tls, exit 5, and a refused certificate is kept in ``tls``.

Checked by hand before writing these (OpenSSL 3.0.19, Python 3.11):
- an https:// URL on the reference endpoint without TLS: ssl reports WRONG_VERSION_NUMBER
  (OpenSSL 3.2+ calls it RECORD_LAYER_FAILURE);
- ``openssl s_server -tls1_1 -cipher DEFAULT@SECLEVEL=0`` accepts and answers our
  ClientHello (1.2 and 1.3 offered) with alert protocol_version in a record stamped 0x0303:
  ssl reports TLSV1_ALERT_PROTOCOL_VERSION, and the alert does not say which version the
  server speaks;
- a refused certificate gives ``getpeercert()`` nothing, so the certificate in the report
  comes from a second, unverified handshake, which the message says.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trustme

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.ports import free_port
from tests.helpers.refserver import RefServer, reference_server
from tests.helpers.waiting import wait_for

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
SECOND_HANDSHAKE = "certificate read by a second, unverified handshake"


def run_json(*args: str) -> tuple[int, dict[str, Any], str]:
    res = run_cli("run", *args, "--json", "--timeout", "10")
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    return res.exit_code, body, res.stderr


def assert_tls_failure(code: int, body: dict[str, Any], stderr: str, words: str) -> None:
    assert code == ExitCode.TLS == body["exit_code"] == 5
    error = body["error"]
    assert error["stage"] == "tls", error
    assert words in error["message"], error["message"]
    assert "\n" not in error["message"]
    assert f"FAILED in tls: TLS: {words}" in stderr
    assert "Traceback" not in stderr and "Traceback" not in json.dumps(body)


def assert_cert_kept(body: dict[str, Any], verify_error: str) -> dict[str, Any]:
    tls = body["tls"]
    assert tls is not None and tls["verified"] is False
    assert tls["verify_error"] == verify_error
    assert SECOND_HANDSHAKE in body["error"]["message"]
    cert: dict[str, Any] = tls["cert"]
    assert cert["subject"] and cert["issuer"] and cert["not_before"] and cert["not_after"]
    return cert


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def test_plain_http_on_an_https_url(tmp_path: Path) -> None:
    with reference_server(tls=False, tmp_path=tmp_path) as srv:
        code, body, stderr = run_json(f"https://127.0.0.1:{srv.port}/v1/chat/completions")
    assert_tls_failure(code, body, stderr, "the server answered in plain HTTP: try http://")
    assert body["tls"] is None  # no certificate to keep: nothing TLS answered


def test_expired_certificate_gives_the_date(tmp_path: Path) -> None:
    with reference_server(tls=True, tmp_path=tmp_path, extra_args=["--cert-days", "-2"]) as srv:
        assert srv.ca is not None
        code, body, stderr = run_json(srv.url + "/v1/chat/completions", "--cacert", srv.ca)
    cert = assert_cert_kept(body, "certificate has expired")
    assert cert["days_left"] == -2
    words = f"the server's certificate expired on {cert['not_after'][:10]} (2 days ago)"
    assert_tls_failure(code, body, stderr, words)
    assert body["error"]["kind"] == "cert_expired"
    assert f"EXPIRED {cert['not_after'][:10]}" in stderr


def test_wrong_host_names_the_sans(ref: RefServer) -> None:
    assert ref.ca is not None
    host = "wrong.promptpath.test"
    code, body, stderr = run_json(
        f"https://{host}:{ref.port}/v1/chat/completions",
        "--resolve",
        f"{host}:{ref.port}:127.0.0.1",
        "--cacert",
        ref.ca,
    )
    cert = assert_cert_kept(body, f"Hostname mismatch, certificate is not valid for '{host}'.")
    assert "localhost" in cert["sans"]
    words = f"the certificate is not valid for '{host}': it names {', '.join(cert['sans'])}"
    assert_tls_failure(code, body, stderr, words)
    assert body["error"]["kind"] == "hostname_mismatch"


def test_unknown_ca_names_the_issuer_and_cacert(ref: RefServer) -> None:
    code, body, stderr = run_json(f"https://localhost:{ref.port}/v1/chat/completions")
    cert = assert_cert_kept(body, "unable to get local issuer certificate")
    assert "promptpath test CA" in cert["issuer"]
    words = f"the certificate's issuer {cert['issuer']} is not a trusted CA (--cacert FILE)"
    assert_tls_failure(code, body, stderr, words)
    assert body["error"]["kind"] == "unknown_ca"


@pytest.fixture
def tls11_server(tmp_path: Path) -> Iterator[int]:
    """``openssl s_server`` speaking only TLS 1.1 (SECLEVEL=0: OpenSSL 3 refuses 1.1 at
    its default level even on the server side)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl binary to serve TLS 1.1")
    ca = trustme.CA()
    leaf = ca.issue_cert("localhost")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    port = free_port()  # s_server binds it later: not from bind(0) (tests/helpers/ports.py)
    log = (tmp_path / "s_server.log").open("wb")
    process = subprocess.Popen(
        [openssl, "s_server", "-accept", f"127.0.0.1:{port}", "-cert", str(cert), "-key",
         str(key), "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0", "-www", "-quiet"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    log.close()

    def accepts() -> bool:
        if process.poll() is not None:
            pytest.fail(f"openssl s_server exited: {(tmp_path / 's_server.log').read_text()}")
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(accepts, timeout=10, what="openssl s_server to listen")
        yield port
    finally:
        process.terminate()
        process.wait(5)


def test_tls11_only_server_is_a_version_failure(tls11_server: int) -> None:
    code, body, stderr = run_json(f"https://localhost:{tls11_server}/v1/chat/completions")
    words = "the server offers only TLS 1.1 (or older); TLS 1.2 or later is required"
    assert_tls_failure(code, body, stderr, words)
    assert body["error"]["kind"] == "handshake_failed"
