"""The buffering canary on Bedrock's converse-stream through real nginx, and a guardrail.

Observed by hand (nginx 1.22.1 in front of ``promptpath serve``, 60 converse-stream events
at 20/s, ``application/vnd.amazon.eventstream``, a raw socket reading): with
``proxy_buffering on`` and the default HTTP/1.0 upstream the client got 4 reads of
4,130 / 4,104 / 4,104 / 3,504 bytes at 709 / 1,562 / 2,409 / 2,963 ms (4 KiB buffers,
chunked to the client; the first also carries the headers): nginx buffers the binary
framing exactly as it buffers SSE. With ``proxy_http_version 1.1`` (buffering still on)
or ``proxy_buffering off`` it streamed: 62-63 reads of one event (~225 bytes) each.

A guardrail in its synchronous mode is the provider's hold, not the path's: serve
releases the answer in scanned batches of 8 tokens when the request applies one
(dialects/bedrock.py); the probe must name the guardrail, not a hop.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from promptpath.core.findings import Finding, Verdict
from promptpath.options import RunOptions, parse_guardrail, parse_target
from promptpath.probes.suite import run_probes, select
from tests.helpers import proxylab
from tests.helpers.probesettings import probe_settings
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

CONVERSE = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("ref-bedrock")) as server:
        yield server


def canary(base_url: str, **options_kw: Any) -> Finding:
    options = RunOptions(
        target=parse_target(base_url + CONVERSE),
        provider="bedrock",
        model="anthropic.claude-3-haiku-20240307-v1:0",
        client="boto3",
        http="1.1",
        **options_kw,
    )
    findings = anyio.run(
        run_probes,
        options,
        None,
        select(["buffering"]),
        lambda _: None,
        probe_settings(canary=True),
    )
    assert len(findings) == 1
    return findings[0]


def test_nginx_buffering_holds_bedrocks_event_stream_in_4_kib_blocks(
    ref: RefServer, tmp_path: Path
) -> None:
    with proxylab.nginx(ref.port, tmp_path, location="proxy_buffering on;") as px:
        f = canary(px.url)
    assert f.verdict is Verdict.FAIL, f.summary
    mechanism = f.evidence["mechanism"]
    assert isinstance(mechanism, dict) and mechanism["kind"] == "size_buffer", f.summary
    assert mechanism["block_bytes"] == 4096
    assert "at nginx" in f.summary


def test_nginx_with_an_http11_upstream_streams_it(ref: RefServer, tmp_path: Path) -> None:
    location = "proxy_buffering on; proxy_http_version 1.1;"
    with proxylab.nginx(ref.port, tmp_path, location=location) as px:
        f = canary(px.url)
    assert f.verdict is Verdict.PASS, f.summary
    assert f.evidence["pattern"] == "streamed"


def test_a_synchronous_guardrail_is_named_as_the_providers_hold_not_a_hop(
    ref: RefServer, tmp_path: Path
) -> None:
    with proxylab.nginx(ref.port, tmp_path, location="proxy_buffering off;") as px:
        f = canary(px.url, guardrail=parse_guardrail("gr-test1:1"))
        streamed = canary(px.url, guardrail=parse_guardrail("gr-test1:1:async"))
    assert f.verdict in (Verdict.WARN, Verdict.FAIL), f.summary
    mechanism = f.evidence["mechanism"]
    assert isinstance(mechanism, dict) and mechanism["kind"] == "provider_guardrail", f.summary
    assert mechanism["provider"] == "amazon-bedrock-guardrails"
    assert "synchronous streaming mode" in f.summary
    assert "not a hop on the path" in f.summary and "at nginx" not in f.summary
    assert "asynchronous" in mechanism["grade"]
    assert any("streamProcessingMode" in a for a in f.advice)
    # The asynchronous mode streams as the model writes (serve releases nothing in batches).
    assert streamed.verdict is Verdict.PASS, streamed.summary
