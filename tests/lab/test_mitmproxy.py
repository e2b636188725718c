"""Real mitmproxy (11.0.2, its own venv) on loopback: the interception named, its buffering caught.

Observed by hand first (mitmdump 11.0.2 in ``--mode reverse:https://127.0.0.1:REF`` in
front of ``promptpath serve --tokens 60 --rate 20``, 63 SSE events over 2.95 s direct):

* its forged certificate copies the origin's subject (``CN=localhost, O=promptpath``),
  adds the address it was reached at as an IP SAN, and is issued by
  ``CN=mitmproxy, O=mitmproxy`` — the CA it writes to ``confdir`` on start;
* by default it holds the whole response: every event arrived in one read about 2.96 s
  after the request, and over HTTP/1.1 and HTTP/2 alike so did the response headers
  (curl ``--trace-time``: ``< HTTP/2 200`` 2.97 s after the request). Its source warns
  about this (addons/server_side_events.py, mitmproxy issue 4469); mitmdump's default log
  shows nothing;
* with ``--set stream_large_bodies=1`` it streams: 60 distinct arrivals spread over 2.95 s,
  first event after 22-39 ms, as direct;
* ``--mode regular`` (a CONNECT proxy) behaves the same: the whole stream at 2.99 s.
"""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from promptpath.core.findings import Finding, Verdict
from promptpath.net.interception import dn_attributes, judge
from promptpath.net.tlsinfo import cert_info
from promptpath.options import RunOptions, parse_target
from promptpath.probes.suite import run_probes, select
from tests.helpers import mitmlab, proxylab
from tests.helpers.cli import run_cli
from tests.helpers.probesettings import probe_settings
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

CHAT = "/v1/chat/completions"
SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    """The reference endpoint over TLS, 60 tokens at 20/s (a 3 s answer to hold back)."""
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("ref"),
        extra_args=["--tokens", "60", "--rate", "20"],
    ) as server:
        yield server


@pytest.fixture(scope="module")
def reverse(ref: RefServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[proxylab.Proxy]:
    """mitmdump with its defaults, in front of the reference endpoint."""
    with mitmlab.mitmdump(
        tmp_path_factory.mktemp("mitm"), mode=f"reverse:{ref.url}", upstream_ca=ref.ca
    ) as px:
        yield px


@pytest.fixture(scope="module")
def reverse_streaming(
    ref: RefServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[proxylab.Proxy]:
    """mitmdump with ``stream_large_bodies=1``, in front of the reference endpoint."""
    with mitmlab.mitmdump(
        tmp_path_factory.mktemp("mitm-stream"),
        mode=f"reverse:{ref.url}",
        upstream_ca=ref.ca,
        stream=True,
    ) as px:
        yield px


def test_a_run_through_mitmproxy_names_the_interception(reverse: proxylab.Proxy) -> None:
    assert reverse.ca is not None
    result = run_cli("run", reverse.path(CHAT), "--cacert", reverse.ca, "--json")
    assert result.exit_code == 0, result.stderr + reverse.logs()
    body = json.loads(result.stdout)
    jsonschema.validate(body, SCHEMA)
    tls = body["tls"]
    assert tls["verified"] is True
    # The origin's subject, copied (its attributes in another order).
    assert set(dn_attributes(tls["cert"]["subject"])) == {("CN", "localhost"), ("O", "promptpath")}
    intercepted = tls["intercepted"]
    assert intercepted["by"] == "mitmproxy"
    [evidence] = intercepted["evidence"]
    assert evidence["kind"] == "issuer_names_product"
    assert evidence["issuer"] == tls["cert"]["issuer"]
    assert "mitmproxy" in evidence["issuer"] and "mitmproxy" in evidence["compared_with"]
    assert "INTERCEPTED by mitmproxy" in result.stderr
    assert "usual cause of both buffering" in result.stderr


def test_the_reference_endpoint_directly_is_not_flagged(ref: RefServer) -> None:
    assert ref.ca is not None
    result = run_cli("run", ref.path(CHAT), "--cacert", ref.ca, "--json")
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)
    jsonschema.validate(body, SCHEMA)
    assert body["tls"]["intercepted"] is False
    assert "INTERCEPTED" not in result.stderr


def test_regular_mode_forges_the_origin_certificate_inside_a_connect_tunnel(
    ref: RefServer, tmp_path: Path
) -> None:
    # The forward-proxy path in miniature (a raw CONNECT, then TLS inside the tunnel), so
    # the harness's regular mode is known to work before the proxy transport uses it.
    with mitmlab.mitmdump(tmp_path, mode="regular", upstream_ca=ref.ca) as px:
        assert px.ca is not None
        with socket.create_connection((proxylab.LOOPBACK, px.port), timeout=10) as sock:
            origin = f"localhost:{ref.port}"
            sock.sendall(f"CONNECT {origin} HTTP/1.1\r\nHost: {origin}\r\n\r\n".encode())
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = sock.recv(4096)
                assert chunk, f"mitmdump closed the tunnel\n{px.logs()}"
                head += chunk
            assert head.startswith(b"HTTP/1.1 200"), head
            context = ssl.create_default_context(cafile=px.ca)
            with context.wrap_socket(sock, server_hostname="localhost") as tls:
                der = tls.getpeercert(binary_form=True)
    seen = cert_info(der)
    assert seen is not None and "localhost" in seen.sans
    verdict = judge(seen)
    assert verdict and verdict.by == "mitmproxy", seen.issuer


def probe(proxy: proxylab.Proxy, *, canary: bool) -> Finding:
    """The buffering probe through the real probe runner, over TLS with mitmproxy's CA."""
    options = RunOptions(
        target=parse_target(proxy.path(CHAT)),
        provider="openai",
        model="test-model",
        max_tokens=64,
        cacert=proxy.ca,
    )
    findings = anyio.run(
        run_probes,
        options,
        None,
        select(["buffering"]),
        lambda _: None,
        probe_settings(canary=canary, idle_max=5.0),
    )
    assert len(findings) == 1
    return findings[0]


def explain(f: Finding, proxy: proxylab.Proxy) -> str:
    evidence: Any = f.evidence
    text = f"{f.verdict.value}: {f.summary}\n{json.dumps(evidence, indent=1)[:3000]}"
    return text + "\n" + proxy.logs()


@pytest.mark.parametrize("canary", [True, False], ids=["canary", "blind"])
def test_mitmproxy_by_default_holds_the_whole_stream(reverse: proxylab.Proxy, canary: bool) -> None:
    f = probe(reverse, canary=canary)
    assert f.verdict is Verdict.FAIL, explain(f, reverse)
    assert f.evidence["pattern"] == "whole", explain(f, reverse)
    # One delivery of all 60 events after ~3 s of silence, the headers with it.
    bursts = f.evidence["bursts"]
    assert isinstance(bursts, list) and len(bursts) == 1, explain(f, reverse)
    assert bursts[0]["events"] == 60, explain(f, reverse)
    assert bursts[0]["silence_before_ms"] > 2000, explain(f, reverse)
    signs = f.evidence["signs"]
    assert isinstance(signs, dict), explain(f, reverse)
    assert signs["headers_with_first_body_after_ms"] > 2000, explain(f, reverse)
    if canary:
        delay = f.evidence["added_delay_ms"]
        assert isinstance(delay, dict) and delay["max"] > 2000, explain(f, reverse)


@pytest.mark.parametrize("canary", [True, False], ids=["canary", "blind"])
def test_mitmproxy_with_stream_large_bodies_streams(
    reverse_streaming: proxylab.Proxy, canary: bool
) -> None:
    f = probe(reverse_streaming, canary=canary)
    assert f.verdict is Verdict.PASS, explain(f, reverse_streaming)
    assert f.evidence["pattern"] == "streamed", explain(f, reverse_streaming)


def test_through_mitmproxy_as_a_forward_proxy_the_interception_is_named_and_caught(
    ref: RefServer, tmp_path: Path
) -> None:
    # The corporate case: HTTPS_PROXY points at an inspecting proxy whose CA the user was
    # given. promptpath sends CONNECT, mitmproxy forges localhost's certificate inside the
    # tunnel (issuer CN=mitmproxy) and, by default, holds the whole stream (measured: the
    # 60 events of a 3 s answer arrive in one read at ~3.0 s).
    url = f"https://localhost:{ref.port}{CHAT}"
    with mitmlab.mitmdump(tmp_path, mode="regular", upstream_ca=ref.ca) as proxy:
        result = run_cli(
            "probe", url, "buffering", "--canary", "--cacert", str(proxy.ca), "--json",
            "--max-tokens", "64", environ={"HTTPS_PROXY": proxy.url},
        )  # fmt: skip
    body = json.loads(result.stdout)
    assert result.exit_code == 1, result.stdout  # the buffering finding fails
    assert body["proxy"]["url"] == proxy.url and body["proxy"]["connect_status"] == 200
    intercepted = body["tls"]["intercepted"]
    assert isinstance(intercepted, dict) and intercepted["by"] == "mitmproxy"
    # Both kinds of evidence: the issuer's name, and a direct handshake (possible on
    # loopback) that shows the origin's own CA instead.
    kinds = {e["kind"] for e in intercepted["evidence"]}
    assert kinds == {"issuer_names_product", "differs_from_direct"}
    (finding,) = body["findings"]
    assert (finding["probe"], finding["verdict"]) == ("buffering", "fail")
    assert finding["evidence"]["pattern"] == "whole"
