"""mTLS against real nginx (``ssl_verify_client on``) in front of the reference endpoint.

Checked by hand with nginx 1.22 before writing these: nginx completes the TLS handshake
without a client certificate (or with one from a CA it does not trust) and answers
``400 No required SSL certificate was sent`` / ``400 The SSL certificate error``; it sends
no TLS alert. promptpath still reports that as the ``tls`` stage (exit 5).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trustme

from promptpath.core.exitcodes import ExitCode
from tests.helpers import proxylab
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("pki")
    server_ca, client_ca, stranger = trustme.CA(), trustme.CA(), trustme.CA()
    files = {name: d / f"{name}.pem" for name in ("server_ca", "client_ca", "server", "alice")}
    files["server_key"] = d / "server.key"
    files["mallory"] = d / "mallory.pem"
    server_ca.cert_pem.write_to_path(str(files["server_ca"]))
    client_ca.cert_pem.write_to_path(str(files["client_ca"]))
    leaf = server_ca.issue_cert("localhost")
    leaf.cert_chain_pems[0].write_to_path(str(files["server"]))
    leaf.private_key_pem.write_to_path(str(files["server_key"]))
    alice = client_ca.issue_cert("alice@example.com", common_name="alice")
    alice.private_key_and_cert_chain_pem.write_to_path(str(files["alice"]))
    mallory = stranger.issue_cert("mallory@example.com", common_name="mallory")
    mallory.private_key_and_cert_chain_pem.write_to_path(str(files["mallory"]))
    return files


@pytest.fixture(scope="module")
def nginx_mtls(
    ref: RefServer, pki: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[int]:
    """nginx with a TLS server block that requires a client certificate; yields its port."""
    port = proxylab.free_port()
    server_block = f"""server {{
        listen {proxylab.LOOPBACK}:{port} ssl http2;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate {pki["server"]};
        ssl_certificate_key {pki["server_key"]};
        ssl_client_certificate {pki["client_ca"]};
        ssl_verify_client on;
        location / {{
            proxy_pass http://{proxylab.LOOPBACK}:{ref.port};
            proxy_http_version 1.1;
            proxy_buffering off;
        }}
    }}"""
    with proxylab.nginx(ref.port, tmp_path_factory.mktemp("nginx"), http=server_block):
        yield port


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    res = run_cli("run", *args, "--json")
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    return res.exit_code, body


@pytest.mark.parametrize("http", ["1.1", "2"])
def test_nginx_mtls_passes_with_the_certificate(
    nginx_mtls: int, pki: dict[str, Path], http: str
) -> None:
    code, body = run_json(
        f"https://localhost:{nginx_mtls}/v1/chat/completions",
        "--cacert",
        str(pki["server_ca"]),
        "--cert",
        str(pki["alice"]),
        "--http",
        http,
    )
    assert code == 0, body["error"]
    assert body["tls"]["client_cert"]["requested"] is True
    assert body["tls"]["client_cert"]["subject"].startswith("CN=alice")


@pytest.mark.parametrize(
    ("cert", "kind"),
    [(None, "client_cert_required"), ("mallory", "client_cert_rejected")],
    ids=["none", "untrusted-ca"],
)
def test_nginx_refusing_the_client_certificate_is_a_tls_failure(
    nginx_mtls: int, pki: dict[str, Path], cert: str | None, kind: str
) -> None:
    extra = [] if cert is None else ["--cert", str(pki[cert])]
    code, body = run_json(
        f"https://localhost:{nginx_mtls}/v1/chat/completions",
        "--cacert",
        str(pki["server_ca"]),
        *extra,
    )
    assert code == ExitCode.TLS
    assert body["error"]["stage"] == "tls" and body["error"]["kind"] == kind
    assert "it answered HTTP 400 after the handshake" in body["error"]["message"]
    if cert is None:
        assert (
            "the server asked for a client certificate; pass --cert/--key"
            in (body["error"]["message"])
        )
