"""The ghost-stream probe through real hops: nginx and mitmproxy pass a disconnect on.

Observed by hand first (nginx 1.22.1 in front of ``promptpath serve``, the probe's own
canary: 40 tokens at 20/s, the client leaves after 5 tokens, by RST then by FIN):

* ``proxy_ignore_client_abort off`` (the default), buffering off: the upstream produced
  5 tokens — nothing after the client left; the canary saw the close within 1.5 ms.
* ``off`` with ``proxy_buffering on``: nginx delivers in blocks, so the client's read
  brought 10 tokens at once; 11 produced, 1 unread; the close seen within 0.5 ms.
* ``on``, buffering off: nginx notices on its next failed write to the client, a token
  later: 6-7 produced (1-2 unread), the upstream closed 50 ms (RST) / 100 ms (FIN) after.
* ``on`` with ``proxy_buffering on``: nginx keeps reading into its buffers and notices
  only when it next writes a block: 24 (RST) and 37 (FIN) tokens produced, 14 and 27 that
  nobody read, 0.65 s and 1.3 s after the client left — the same on three runs.
* mitmdump 11.0.2 reverse mode, defaults: it holds the whole response, so the client's
  first read brought all 40 tokens: leaving mid-stream is impossible (the probe skips).
* mitmdump with ``stream_large_bodies=1``: 5 produced, the close seen within 3-12 ms.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import mitmlab, proxylab
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def ghost(url: str, *extra: str) -> dict:
    got = run_cli("run", url + CHAT, "--canary", "--probe", "ghost-stream", "--json", *extra)
    (finding,) = json.loads(got.stdout)["findings"]
    return finding


def wasted(finding: dict) -> list[int]:
    return [r["wasted_tokens"] for r in finding["evidence"]["runs"]]


@pytest.mark.parametrize("buffering", ["off", "on"])
def test_nginx_default_stops_the_upstream(
    canary: RefServer, tmp_path: Path, buffering: str
) -> None:
    location = f"proxy_ignore_client_abort off; proxy_buffering {buffering};"
    with proxylab.nginx(canary.port, tmp_path, location=location) as px:
        finding = ghost(px.url)
    assert finding["verdict"] == "pass", finding
    assert max(wasted(finding)) <= 1


def test_nginx_ignoring_client_abort_costs_a_token_or_two(
    canary: RefServer, tmp_path: Path
) -> None:
    location = "proxy_ignore_client_abort on; proxy_buffering off;"
    with proxylab.nginx(canary.port, tmp_path, location=location) as px:
        finding = ghost(px.url)
    assert finding["verdict"] == "pass", finding
    assert 1 <= max(wasted(finding)) <= 3
    # It notices on its next write to the client: about one token interval (50 ms) later.
    seen = [r["disconnect_seen_ms"] for r in finding["evidence"]["runs"]]
    assert all(30 <= ms <= 300 for ms in seen), seen


def test_nginx_ignoring_client_abort_with_buffering_ghosts(
    canary: RefServer, tmp_path: Path
) -> None:
    location = "proxy_ignore_client_abort on; proxy_buffering on;"
    with proxylab.nginx(canary.port, tmp_path, location=location) as px:
        finding = ghost(px.url)
    assert finding["verdict"] == "fail", finding
    assert min(wasted(finding)) >= 10


def test_mitmproxy_streaming_stops_the_upstream(canary: RefServer, tmp_path: Path) -> None:
    with mitmlab.mitmdump(tmp_path, mode=f"reverse:{canary.url}", stream=True) as px:
        assert px.ca is not None
        finding = ghost(px.url, "--cacert", px.ca)
    assert finding["verdict"] == "pass", finding
    assert max(wasted(finding)) <= 1


def test_mitmproxy_holding_the_answer_makes_leaving_impossible(
    canary: RefServer, tmp_path: Path
) -> None:
    with mitmlab.mitmdump(tmp_path, mode=f"reverse:{canary.url}") as px:
        assert px.ca is not None
        finding = ghost(px.url, "--cacert", px.ca)
    assert finding["verdict"] == "skip" and "could not leave mid-stream" in finding["summary"]


def test_the_tag_reaches_the_canary_in_the_body_when_a_hop_strips_the_header(
    canary: RefServer, tmp_path: Path
) -> None:
    # nginx drops a header whose proxy_set_header value is empty (nginx docs; the
    # headers-only run below shows the canary never saw that tag).
    location = 'proxy_set_header X-Promptpath-Probe-Id "";'
    with proxylab.nginx(canary.port, tmp_path, location=location) as px:
        finding = ghost(px.url)
        headers_only = ghost(px.url, "--canary-controls", "headers")
    assert finding["verdict"] == "pass", finding
    assert headers_only["verdict"] == "skip" and "no request tagged" in headers_only["summary"]
