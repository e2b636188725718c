"""The tls probe over real sockets: certificates that expire soon or have expired (the
reference endpoint's --cert-days), a server that speaks only TLS 1.1, a chain served
without its intermediate, a name the certificate does not carry, and HTTP/3.

Checked by hand (OpenSSL 3.0, trustme 1.2): ``openssl s_server -cert LEAF`` sends only
the leaf; with ``-cert_chain INTERMEDIATE`` it sends leaf and intermediate. The
looking-only handshake (TLS 1.0 allowed, security level 0) agrees TLSv1.1 with
``s_server -tls1_1 -cipher DEFAULT@SECLEVEL=0``, which our trace's own handshake refuses.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import trustme

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.ports import free_port
from tests.helpers.waiting import wait_for
from tests.integration.conftest import StartRefServer

pytestmark = pytest.mark.integration

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
PATH = "/v1/chat/completions"


def tls_finding(url: str, *args: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
    res = run_cli(
        "run", url, "--probe", "tls", "--json", "--timeout", "10",
        "-H", "x-promptpath-rate: 0", "-H", "x-promptpath-ttft-ms: 0", *args,
    )  # fmt: skip
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    (found,) = [f for f in body["findings"] if f["probe"] == "tls"]
    return res.exit_code, body, found


@pytest.mark.parametrize(
    ("days", "verdict", "words"),
    [
        (400, "pass", "certificate valid 399 more days"),
        (20, "warn", "in 19 days"),
        (3, "fail", "in 2 days"),
        (-1, "fail", "the certificate expired on"),
    ],
)
def test_certificate_expiry(
    start_refserver: StartRefServer, days: int, verdict: str, words: str
) -> None:
    srv = start_refserver(extra_args=["--cert-days", str(days)])
    assert srv.ca is not None
    code, body, found = tls_finding(srv.path(PATH), "--cacert", srv.ca)
    assert found["verdict"] == verdict, found
    assert words in found["summary"]
    assert found["evidence"]["cert"]["not_after"]
    if days < 0:  # the trace itself refused it; the probe still judges the kept certificate
        assert code == ExitCode.TLS and body["error"]["kind"] == "cert_expired"
    else:
        assert found["evidence"]["chain"]["checked"] is True
        assert found["evidence"]["chain"]["missing_issuer"] is None


def _shown(page: str) -> str:
    """The page's text as a reader sees it: no markup, no JSON data block."""
    page = page.split("<script type='application/json'", 1)[0]
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def test_an_expired_certificate_with_k_leads_the_verdict_and_the_page_warns(
    start_refserver: StartRefServer, tmp_path: Path
) -> None:
    # Checked by hand: `promptpath run URL --probe tls -k` against `serve --cert-days -1`
    # completes the request (exit 1 from the finding) and ended its terminal report with
    # "OK: first token after ..." in green under "[FAIL] tls: the certificate expired on".
    srv = start_refserver(extra_args=["--cert-days", "-1"])
    page, junit = tmp_path / "tls.html", tmp_path / "tls.xml"
    code, body, found = tls_finding(
        srv.path(PATH), "-k", "--html", str(page), "--junit", str(junit)
    )
    assert code == ExitCode.FINDING and found["verdict"] == "fail"
    line = body["headline"]
    assert line.startswith("FAIL tls: the certificate expired on ") and " — first token" in line
    shown = _shown(page.read_text(encoding="utf-8"))
    assert line in shown and "certificate not verified (-k)" in shown
    assert re.search(r"\bNone\b", shown) is None
    assert line in junit.read_text(encoding="utf-8")


def test_a_refused_certificate_page_shows_no_python_none(
    start_refserver: StartRefServer, tmp_path: Path
) -> None:
    # Checked by hand: the page of this run showed "ALPN None (offered http/1.1)" and
    # "version · cipher None · None" (the handshake never completed).
    srv = start_refserver(extra_args=["--cert-days", "-1"])
    page = tmp_path / "tls.html"
    code, body, _found = tls_finding(srv.path(PATH), "--html", str(page))
    assert code == ExitCode.TLS and body["tls"]["version"] is None
    shown = _shown(page.read_text(encoding="utf-8"))
    assert body["headline"] in shown and re.search(r"\bNone\b", shown) is None, shown


def test_thresholds_come_from_the_options(start_refserver: StartRefServer) -> None:
    srv = start_refserver(extra_args=["--cert-days", "400"])
    assert srv.ca is not None
    _, _, found = tls_finding(srv.path(PATH), "--cacert", srv.ca, "--tls-warn-days", "500")
    assert found["verdict"] == "warn"
    assert found["evidence"]["thresholds_days"] == {"warn": 500, "fail": 7}


def test_a_name_the_certificate_does_not_carry(start_refserver: StartRefServer) -> None:
    srv = start_refserver()
    assert srv.ca is not None
    url = f"https://wrong.example:{srv.port}{PATH}"
    code, _, found = tls_finding(
        url, "--cacert", srv.ca, "--resolve", f"wrong.example:{srv.port}:127.0.0.1"
    )
    assert code == ExitCode.TLS
    assert found["verdict"] == "fail"
    assert "not valid for 'wrong.example': it names" in found["summary"]


def test_over_http3_the_quic_handshake_is_judged(start_refserver: StartRefServer) -> None:
    srv = start_refserver(http3=True, extra_args=["--cert-days", "20"])
    assert srv.ca is not None
    code, body, found = tls_finding(srv.path(PATH), "--cacert", srv.ca, "--http", "3")
    assert code == 0 and body["http_version"] == "HTTP/3"
    assert found["verdict"] == "warn" and found["evidence"]["version"] == "TLSv1.3"


@pytest.fixture
def s_server(tmp_path: Path) -> Iterator[Callable[[Sequence[str]], int]]:
    """``openssl s_server ARGS -www`` on a free loopback port; returns the port."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("no openssl binary")
    processes: list[subprocess.Popen[bytes]] = []

    def start(args: Sequence[str]) -> int:
        port = free_port()  # s_server binds it later: not from bind(0) (tests/helpers/ports.py)
        process = subprocess.Popen(
            [openssl, "s_server", "-accept", f"127.0.0.1:{port}", *args, "-www", "-quiet"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(process)

        def accepts() -> bool:
            assert process.poll() is None, "openssl s_server exited"
            with socket.socket() as sock:
                return sock.connect_ex(("127.0.0.1", port)) == 0

        wait_for(accepts, timeout=10, what="openssl s_server to listen")
        return port

    try:
        yield start
    finally:
        for process in processes:
            process.terminate()
            process.wait(5)


@pytest.fixture
def chain(tmp_path: Path) -> dict[str, str]:
    """root → intermediate → leaf (localhost, 127.0.0.1), each in its own PEM file."""
    root = trustme.CA()
    intermediate = root.create_child_ca()
    leaf = intermediate.issue_cert("localhost", "127.0.0.1")
    files = {name: str(tmp_path / f"{name}.pem") for name in ("root", "inter", "leaf", "key")}
    root.cert_pem.write_to_path(files["root"])
    intermediate.cert_pem.write_to_path(files["inter"])
    leaf.cert_chain_pems[0].write_to_path(files["leaf"])
    leaf.private_key_pem.write_to_path(files["key"])
    return files


def test_a_server_that_omits_its_intermediate(
    s_server: Callable[[Sequence[str]], int], chain: dict[str, str]
) -> None:
    port = s_server(["-cert", chain["leaf"], "-key", chain["key"]])
    url = f"https://localhost:{port}{PATH}"
    _, _, found = tls_finding(
        url, "--cacert", chain["root"], "--resolve", f"localhost:{port}:127.0.0.1"
    )
    assert found["verdict"] == "fail"
    assert "incomplete chain: the server sent only its own certificate" in found["summary"]
    evidence = found["evidence"]["chain"]
    assert len(evidence["sent"]) == 1
    assert evidence["missing_issuer"] == evidence["sent"][0]["issuer"]


def test_an_intermediate_in_cacert_does_not_complete_the_chain_the_server_sent_short(
    s_server: Callable[[Sequence[str]], int], chain: dict[str, str], tmp_path: Path
) -> None:
    # A fullchain bundle as --cacert: the trace verifies (OpenSSL builds the chain from
    # the file), but a client without the file gets only the leaf from this server.
    bundle = tmp_path / "bundle.pem"
    bundle.write_text(Path(chain["inter"]).read_text() + Path(chain["root"]).read_text())
    port = s_server(["-cert", chain["leaf"], "-key", chain["key"]])
    url = f"https://localhost:{port}{PATH}"
    _, body, found = tls_finding(
        url, "--cacert", str(bundle), "--resolve", f"localhost:{port}:127.0.0.1"
    )
    assert body["tls"]["verified"] is True  # the trace itself trusted it
    assert found["verdict"] == "fail", found
    assert "incomplete chain: the server sent only its own certificate" in found["summary"]


def test_the_same_server_with_its_chain_passes(
    s_server: Callable[[Sequence[str]], int], chain: dict[str, str]
) -> None:
    port = s_server(["-cert", chain["leaf"], "-key", chain["key"], "-cert_chain", chain["inter"]])
    url = f"https://localhost:{port}{PATH}"
    _, _, found = tls_finding(
        url, "--cacert", chain["root"], "--resolve", f"localhost:{port}:127.0.0.1"
    )
    assert found["verdict"] == "pass", found
    assert len(found["evidence"]["chain"]["sent"]) == 2


def test_a_server_that_speaks_only_tls11(
    s_server: Callable[[Sequence[str]], int], chain: dict[str, str]
) -> None:
    port = s_server(
        ["-cert", chain["leaf"], "-key", chain["key"], "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"]
    )
    url = f"https://localhost:{port}{PATH}"
    code, _, found = tls_finding(
        url, "--cacert", chain["root"], "--resolve", f"localhost:{port}:127.0.0.1"
    )
    assert code == ExitCode.TLS  # the trace refuses it; the probe says what it speaks
    assert found["verdict"] == "fail"
    assert "the server negotiates TLSv1.1 at best (below TLS 1.2)" in found["summary"]
    assert found["evidence"]["version_source"] == "handshake"
