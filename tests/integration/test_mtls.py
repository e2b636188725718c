"""Client certificates over real sockets: the reference endpoint with --client-ca, and a
plain OpenSSL server for what hypercorn does not do (send the TLS alert, speak TLS 1.2).

Checked by hand before writing these (OpenSSL 3.0, hypercorn 0.18): hypercorn refuses a
missing or unknown client certificate over TLS 1.3 by closing the connection right after
the client's handshake, with no alert; an OpenSSL server socket sends alert 116
(certificate required) first; over TLS 1.2 the refusal ends the handshake itself.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trustme
from cryptography.hazmat.primitives import serialization

from promptpath.core.exitcodes import ExitCode
from promptpath.server.hosting import ServerConfig, start_in_thread
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
KEY_PASSWORD = "pw-DO-NOT-PRINT-41c9"
REQUIRED_WORDS = "the server asked for a client certificate; pass --cert/--key"


@dataclass(frozen=True)
class ClientFiles:
    """A client CA and certificates signed by it (or not), as PEM files."""

    ca: Path  # what the server trusts for client certificates
    cert: Path  # alice's certificate alone
    key: Path  # alice's key alone
    combined: Path  # key and certificate in one file
    stranger_cert: Path  # signed by a CA the server does not trust
    stranger_key: Path
    encrypted_key: Path  # alice's key, encrypted with KEY_PASSWORD


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> ClientFiles:
    d = tmp_path_factory.mktemp("client-pki")
    ca = trustme.CA(organization_name="client CA")
    alice = ca.issue_cert("alice@example.com", common_name="alice")
    stranger = trustme.CA().issue_cert("mallory@example.com", common_name="mallory")
    files = ClientFiles(
        ca=d / "client-ca.pem",
        cert=d / "alice.crt",
        key=d / "alice.key",
        combined=d / "alice.pem",
        stranger_cert=d / "mallory.crt",
        stranger_key=d / "mallory.key",
        encrypted_key=d / "alice-encrypted.key",
    )
    ca.cert_pem.write_to_path(str(files.ca))
    alice.cert_chain_pems[0].write_to_path(str(files.cert))
    alice.private_key_pem.write_to_path(str(files.key))
    alice.private_key_and_cert_chain_pem.write_to_path(str(files.combined))
    stranger.cert_chain_pems[0].write_to_path(str(files.stranger_cert))
    stranger.private_key_pem.write_to_path(str(files.stranger_key))
    key = serialization.load_pem_private_key(alice.private_key_pem.bytes(), None)
    files.encrypted_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(KEY_PASSWORD.encode()),
        )
    )
    return files


@pytest.fixture(scope="module")
def mtls(clients: ClientFiles, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    """The reference endpoint requiring a client certificate from ``clients.ca``."""
    with reference_server(
        tls=True,
        extra_args=["--client-ca", str(clients.ca)],
        tmp_path=tmp_path_factory.mktemp("refserver-mtls"),
    ) as server:
        yield server


def run_json(*args: str) -> tuple[int, dict[str, Any], str]:
    res = run_cli("run", *args, "--json")
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    return res.exit_code, body, res.stderr


def url(port: int) -> str:
    return f"https://localhost:{port}/v1/chat/completions"


@pytest.mark.parametrize("http", ["1.1", "2"])
@pytest.mark.parametrize("files", ["separate", "combined"])
def test_mtls_passes_and_the_report_names_the_certificate_sent(
    mtls: RefServer, clients: ClientFiles, http: str, files: str
) -> None:
    cert = ["--cert", str(clients.cert), "--key", str(clients.key)]
    if files == "combined":
        cert = ["--cert", str(clients.combined)]
    code, body, stderr = run_json(url(mtls.port), "--cacert", str(mtls.ca), "--http", http, *cert)
    assert code == 0 and body["error"] is None, body["error"]
    assert body["http_version"] == ("HTTP/2" if http == "2" else "HTTP/1.1")
    client = body["tls"]["client_cert"]
    assert client["requested"] is True and client["sent"] is True
    assert client["subject"].startswith("CN=alice") and "client CA" in client["issuer"]
    assert client["not_after"].startswith("3000-") and client["days_left"] > 0
    assert "client cert asked for, sent CN=alice" in stderr


@pytest.mark.parametrize("http", ["1.1", "2"])
def test_a_missing_client_certificate_fails_in_the_tls_stage(mtls: RefServer, http: str) -> None:
    code, body, stderr = run_json(url(mtls.port), "--cacert", str(mtls.ca), "--http", http)
    assert code == ExitCode.TLS == body["exit_code"]
    assert body["error"]["stage"] == "tls" and body["error"]["kind"] == "client_cert_required"
    assert REQUIRED_WORDS in body["error"]["message"]
    assert body["tls"]["client_cert"] == {
        "requested": True,
        "sent": False,
        "subject": None,
        "issuer": None,
        "not_after": None,
        "days_left": None,
    }
    assert f"FAILED in tls: TLS: {REQUIRED_WORDS}" in stderr
    assert "client cert asked for, none sent" in stderr


def test_a_certificate_from_another_ca_is_rejected_in_the_tls_stage(
    mtls: RefServer, clients: ClientFiles
) -> None:
    code, body, _ = run_json(
        url(mtls.port),
        "--cacert",
        str(mtls.ca),
        "--cert",
        str(clients.stranger_cert),
        "--key",
        str(clients.stranger_key),
    )
    assert code == ExitCode.TLS
    assert body["error"]["stage"] == "tls" and body["error"]["kind"] == "client_cert_rejected"
    assert "refused our client certificate" in body["error"]["message"]
    assert body["tls"]["client_cert"]["subject"].startswith("CN=mallory")


def test_http3_loads_the_certificate_and_says_the_server_did_not_ask(
    refserver_tls: RefServer, clients: ClientFiles
) -> None:
    # hypercorn's HTTP/3 never asks for a client certificate (aioquic's server sends no
    # CertificateRequest); that aioquic answers one with ours is checked in memory in
    # tests/unit/test_aioquic_internals.py.
    code, body, stderr = run_json(
        url(refserver_tls.port),
        "--cacert",
        str(refserver_tls.ca),
        "--http",
        "3",
        "--cert",
        str(clients.combined),
    )
    assert code == 0 and body["http_version"] == "HTTP/3"
    assert body["tls"]["client_cert"]["requested"] is False
    assert body["tls"]["client_cert"]["sent"] is False
    assert "client cert" not in stderr


def test_a_server_that_does_not_ask_gets_no_certificate_over_tcp(
    refserver_tls: RefServer, clients: ClientFiles
) -> None:
    code, body, _ = run_json(
        url(refserver_tls.port), "--cacert", str(refserver_tls.ca), "--cert", str(clients.combined)
    )
    assert code == 0
    assert body["tls"]["client_cert"]["requested"] is False
    assert body["tls"]["client_cert"]["subject"] is None


# -- an OpenSSL server socket: the alert over TLS 1.3, the refusal inside TLS 1.2 --------


@contextlib.contextmanager
def openssl_server(
    clients: ClientFiles, server: trustme.LeafCert, version: ssl.TLSVersion
) -> Iterator[int]:
    """A TLS server that requires a client certificate and refuses every handshake the
    way OpenSSL does; yields its port. After a refusal it reads until the client closes,
    so the alert is not overtaken by a reset (our request would be unread data)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.configure_cert(ctx)
    ctx.load_verify_locations(str(clients.ca))
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.minimum_version = ctx.maximum_version = version
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                tls = ctx.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
                with contextlib.suppress(OSError):
                    tls.do_handshake()  # refused: OpenSSL has sent its alert
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_WR)
                    while conn.recv(65536):
                        pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(5)


@pytest.fixture(scope="module")
def server_leaf() -> tuple[trustme.CA, trustme.LeafCert]:
    ca = trustme.CA()
    return ca, ca.issue_cert("localhost")


@pytest.mark.parametrize(
    ("version", "how"),
    [
        (ssl.TLSVersion.TLSv1_3, "alert: certificate required"),
        (ssl.TLSVersion.TLSv1_2, "alert: handshake failure"),
    ],
    ids=["tls1.3-alert-after-handshake", "tls1.2-inside-handshake"],
)
def test_an_openssl_refusal_is_a_tls_failure_with_the_servers_words(
    clients: ClientFiles,
    server_leaf: tuple[trustme.CA, trustme.LeafCert],
    tmp_path: Path,
    version: ssl.TLSVersion,
    how: str,
) -> None:
    ca, leaf = server_leaf
    ca_file = tmp_path / "server-ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with openssl_server(clients, leaf, version) as port:
        code, body, _ = run_json(url(port), "--cacert", str(ca_file), "--http", "1.1")
    assert code == ExitCode.TLS
    assert body["error"]["stage"] == "tls" and body["error"]["kind"] == "client_cert_required"
    assert REQUIRED_WORDS in body["error"]["message"] and how in body["error"]["message"]


# -- bad input: one line, exit 2, before anything is sent, no key path or password ------


def _bad_inputs(clients: ClientFiles, tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    not_pem = tmp_path / "notes.txt"
    not_pem.write_text("not a certificate\n")
    return {
        "cert-missing": (["--cert", str(tmp_path / "nope.pem")], "--cert: cannot read the file"),
        "cert-not-pem": (["--cert", str(not_pem)], "--cert: no PEM certificate"),
        "cert-without-key": (["--cert", str(clients.cert)], "--cert holds no private key"),
        "key-unreadable": (
            ["--cert", str(clients.cert), "--key", str(tmp_path / "secret-name.key")],
            "--key: cannot read the file",
        ),
        "key-not-a-key": (
            ["--cert", str(clients.cert), "--key", str(clients.cert)],
            "--key: no PEM private key",
        ),
        "key-mismatch": (
            ["--cert", str(clients.cert), "--key", str(clients.stranger_key)],
            "--cert and --key do not match",
        ),
        "key-encrypted": (
            ["--cert", str(clients.cert), "--key", str(clients.encrypted_key)],
            "never asks for a password",
        ),
        "key-without-cert": (["--key", str(clients.key)], "--key needs --cert"),
    }


@pytest.mark.parametrize(
    "case",
    [
        "cert-missing",
        "cert-not-pem",
        "cert-without-key",
        "key-unreadable",
        "key-not-a-key",
        "key-mismatch",
        "key-encrypted",
        "key-without-cert",
    ],
)
def test_bad_certificate_input_is_one_line_exit_2_without_the_key_path(
    clients: ClientFiles, tmp_path: Path, case: str
) -> None:
    args, words = _bad_inputs(clients, tmp_path)[case]
    with socket.socket() as closed:  # nothing listens: a packet sent would be exit 4
        closed.bind(("127.0.0.1", 0))
        target = f"https://127.0.0.1:{closed.getsockname()[1]}/v1/chat/completions"
        res = run_cli("run", target, *args)
        json_res = run_cli("run", target, *args, "--json")
    assert res.exit_code == ExitCode.USAGE == json_res.exit_code
    assert res.stdout == "" and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith("promptpath: ") and words in res.stderr
    body = json.loads(json_res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert body["error"]["stage"] == "config" and body["error"]["kind"] == "bad_option"
    for out in (res.stdout, res.stderr, json_res.stdout, json_res.stderr):
        for path in args[1::2]:
            assert path not in out and Path(path).name not in out
        assert KEY_PASSWORD not in out


# -- serve --client-ca ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--client-ca", "CA"], "--client-ca needs TLS"),
        (["--self-signed", "DIR", "--client-ca", "CA", "--http3"], "exclude each other"),
        (["--self-signed", "DIR", "--client-ca", "NOTPEM"], "not a PEM CA file"),
    ],
)
def test_serve_client_ca_refuses_what_it_cannot_enforce(
    clients: ClientFiles, tmp_path: Path, args: list[str], words: str
) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("nothing\n")
    paths = {"CA": str(clients.ca), "DIR": str(tmp_path / "certs"), "NOTPEM": str(not_pem)}
    res = run_cli("serve", "--port", "0", *(paths.get(a, a) for a in args))
    assert res.exit_code == ExitCode.USAGE
    assert res.stderr.startswith("promptpath serve: ") and words in res.stderr
    assert res.stdout == ""  # never started listening


def test_serve_client_ca_turns_http3_off_unless_asked(clients: ClientFiles, tmp_path: Path) -> None:
    config = ServerConfig(port=0, self_signed=str(tmp_path / "certs"), client_ca=str(clients.ca))
    with start_in_thread(config) as handle:
        assert handle.http3 is False  # hypercorn's HTTP/3 would not ask for the certificate


@pytest.mark.parametrize("reuse", [False, True])
def test_repeated_runs_name_the_client_certificate_with_or_without_reuse(
    mtls: RefServer, clients: ClientFiles, reuse: bool
) -> None:
    # One session set-up serves single, repeated and reused runs: --reuse used to skip
    # the step that reads the certificate we sent, so its subject came back null.
    args = [url(mtls.port), "--cacert", str(mtls.ca), "--cert", str(clients.combined)]
    res = run_cli("run", *args, "--count", "2", *(["--reuse"] if reuse else []), "--json")
    assert res.exit_code == 0, res.stderr
    runs = json.loads(res.stdout)["runs"]
    assert [r["reused_connection"] for r in runs] == [False, reuse]
    for run in runs:
        client = run["tls"]["client_cert"]
        assert client["requested"] is True and client["sent"] is True
        assert client["subject"].startswith("CN=alice") and "client CA" in client["issuer"]
