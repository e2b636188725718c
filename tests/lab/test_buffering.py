"""The buffering probe against real nginx, haproxy and caddy in front of the reference
endpoint (plain HTTP/1.1 upstream), every process on 127.0.0.1 with its own temp dir.

Canary mode asks ``promptpath serve`` for 60 tokens at 20/s (3 s); blind mode gets the
same stream from server flags, so it sees only what any third-party API would give it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from promptpath.core.findings import Finding, Verdict
from promptpath.options import RunOptions, parse_target
from promptpath.probes.suite import run_probes, select
from tests.helpers import proxylab
from tests.helpers.cli import run_cli
from tests.helpers.probesettings import probe_settings
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

CHAT = "/v1/chat/completions"
SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    """Reference endpoint whose default answer is long and paced (for blind mode too)."""
    with reference_server(
        tls=False,
        tmp_path=tmp_path_factory.mktemp("ref"),
        extra_args=["--tokens", "60", "--rate", "20"],
    ) as server:
        yield server


def probe(
    base_url: str, *, canary: bool, max_tokens: int = 64, **options_kw: Any
) -> tuple[Finding, list[str]]:
    """Run the buffering probe through the real probe runner; also return its progress."""
    kw: dict[str, Any] = {"http": "1.1", **options_kw}
    options = RunOptions(
        target=parse_target(base_url + CHAT),
        provider="openai",
        model="test-model",
        max_tokens=max_tokens,
        **kw,
    )
    said: list[str] = []
    findings = anyio.run(
        run_probes,
        options,
        None,
        select(["buffering"]),
        said.append,
        probe_settings(canary=canary, idle_max=5.0),
    )
    assert len(findings) == 1
    return findings[0], said


def explain(f: Finding, proxy: proxylab.Proxy | None = None) -> str:
    text = f"{f.verdict.value}: {f.summary}\n{json.dumps(f.evidence, indent=1)[:3000]}"
    return text + ("\n" + proxy.logs() if proxy is not None else "")


@pytest.mark.parametrize("canary", [True, False], ids=["canary", "blind"])
def test_nginx_buffering_with_its_default_http10_upstream_fails(
    ref: RefServer, tmp_path: Path, canary: bool
) -> None:
    with proxylab.nginx(ref.port, tmp_path, location="proxy_buffering on;") as px:
        f, said = probe(px.url, canary=canary)
    assert f.verdict is Verdict.FAIL, explain(f, px)
    ev = f.evidence
    assert ev["pattern"] in ("bursts", "whole")
    assert ev["buffer_size_bytes"] == 4096, explain(f)  # nginx's one-page proxy buffer
    mechanism = ev["mechanism"]
    assert isinstance(mechanism, dict) and mechanism["kind"] == "size_buffer", explain(f)
    assert "nginx" in ev["hops"]  # type: ignore[operator]
    silences = ev["silences_ms"]
    assert isinstance(silences, list) and silences and min(silences) > 300
    assert any("proxy_buffering off" in a for a in f.advice)
    assert any("cost: 1 request" in s for s in said)  # the cost is stated up front
    if canary:
        delay = ev["added_delay_ms"]
        assert isinstance(delay, dict) and delay["max"] > 400, explain(f)
        assert isinstance(ev["flushes"], int) and ev["flushes"] >= 2


# Observed by hand (nginx 1.22.1, `proxy_buffering on`, HTTP/1.0 upstream, 120 canary
# events of ~315 bytes): the client gets one read of 3,883 bytes (the first 4 KiB buffer
# also held the upstream's 213 bytes of headers), then reads of exactly 4,096 bytes with
# 13 events each, and the rest at the end: one every 1,300 / 650 / 260 / 130 ms at
# 10 / 20 / 50 / 100 tokens/s, the first event of each held 1,200 / 600 / 240 / 120 ms.
@pytest.mark.parametrize("rate", [20, 50])
def test_nginx_buffering_is_the_same_size_triggered_fail_at_20_and_50_tokens_per_second(
    ref: RefServer, tmp_path: Path, rate: int
) -> None:
    pace = (("x-promptpath-rate", str(rate)), ("x-promptpath-tokens", "120"))
    with proxylab.nginx(ref.port, tmp_path, location="proxy_buffering on;") as px:
        f, _ = probe(px.url, canary=False, max_tokens=120, headers=pace)
    assert f.verdict is Verdict.FAIL, explain(f, px)
    mechanism = f.evidence["mechanism"]
    assert isinstance(mechanism, dict), explain(f)
    assert mechanism["kind"] == "size_buffer" and mechanism["block_bytes"] == 4096
    assert mechanism["events_per_block"] == 13, explain(f)
    interval = mechanism["interval_ms"]
    assert isinstance(interval, float)
    assert 0.8 * 13_000 / rate <= interval <= 1.3 * 13_000 / rate, explain(f)
    assert "at nginx (named by Server: nginx/" in f.summary


def test_nginx_proxy_buffering_off_passes(ref: RefServer, tmp_path: Path) -> None:
    with proxylab.nginx(ref.port, tmp_path, location="proxy_buffering off;") as px:
        f, _ = probe(px.url, canary=True)
    assert f.verdict is Verdict.PASS, explain(f, px)
    assert f.evidence["pattern"] == "streamed"
    delay = f.evidence["added_delay_ms"]
    assert isinstance(delay, dict) and delay["p90"] < 100


def test_nginx_http11_upstream_streams_even_with_buffering_on(
    ref: RefServer, tmp_path: Path
) -> None:
    location = "proxy_buffering on; proxy_http_version 1.1;"
    with proxylab.nginx(ref.port, tmp_path, location=location) as px:
        f, _ = probe(px.url, canary=True)
    assert f.verdict is Verdict.PASS, explain(f, px)
    assert f.evidence["pattern"] == "streamed"


def test_upstream_x_accel_buffering_no_turns_nginx_buffering_off(tmp_path: Path) -> None:
    with (
        reference_server(
            tls=False, tmp_path=tmp_path / "ref", extra_args=["--accel-buffering", "no"]
        ) as ref,
        proxylab.nginx(ref.port, tmp_path, location="proxy_buffering on;") as px,
    ):
        f, _ = probe(px.url, canary=True)
    assert f.verdict is Verdict.PASS, explain(f, px)
    assert f.evidence["pattern"] == "streamed"
    # nginx consumes the header: the client never sees it.
    hinted = [h["header"].lower() for h in f.evidence["header_hints"]]  # type: ignore[attr-defined]
    assert "x-accel-buffering" not in hinted


def test_haproxy_without_http_no_delay_coalesces_into_200ms_bursts(
    ref: RefServer, tmp_path: Path
) -> None:
    # haproxy sends with MSG_MORE unless `option http-no-delay`: the kernel corks partial
    # segments for up to 200 ms. Mild, but real: a warning that names the option.
    with proxylab.haproxy(ref.port, tmp_path) as px:
        f, _ = probe(px.url, canary=True)
    assert f.verdict is Verdict.WARN, explain(f, px)
    delay = f.evidence["added_delay_ms"]
    assert isinstance(delay, dict) and 150 <= delay["max"] <= 600  # the 200 ms cork, plus noise
    assert any("http-no-delay" in a for a in f.advice)
    mechanism = f.evidence["mechanism"]
    assert isinstance(mechanism, dict) and mechanism["kind"] == "time_coalescing"
    held = mechanism["first_event_held_ms"]
    assert isinstance(held, float) and 150 <= held <= 400, explain(f)


# Observed by hand (haproxy 2.6, no `option http-no-delay`): each delivery's first event
# held 200 ms, so a read every 300 / 250 / 220 / 210 ms at 10 / 20 / 50 / 100 tokens/s
# carrying 3 / 5 / 11 / 21 events of varying bytes (1,568-1,584 at 20/s). haproxy passes
# the origin's `server: hypercorn-h11` through and adds no header of its own.
# (caddy 2.6.2 with `flush_interval 1s` gave no time-triggered case: it streams
# text/event-stream at once, one event per read, whatever the interval.)
@pytest.mark.parametrize("rate", [20, 50])
def test_haproxy_cork_is_the_same_time_triggered_warn_at_20_and_50_tokens_per_second(
    ref: RefServer, tmp_path: Path, rate: int
) -> None:
    pace = (("x-promptpath-rate", str(rate)), ("x-promptpath-tokens", "120"))
    with proxylab.haproxy(ref.port, tmp_path) as px:
        f, _ = probe(px.url, canary=False, max_tokens=120, headers=pace)
    assert f.verdict is Verdict.WARN, explain(f, px)
    mechanism = f.evidence["mechanism"]
    assert isinstance(mechanism, dict) and mechanism["kind"] == "time_coalescing", explain(f)
    interval = mechanism["interval_ms"]
    assert isinstance(interval, float) and 180 <= interval <= 400, explain(f)
    # Nothing names the hop; the origin's own Server header is not blamed.
    assert "at a hop between you and the origin" in f.summary
    assert "hypercorn" not in f.summary


def test_haproxy_with_http_no_delay_passes(ref: RefServer, tmp_path: Path) -> None:
    with proxylab.haproxy(ref.port, tmp_path, defaults="option http-no-delay") as px:
        f, _ = probe(px.url, canary=True)
    assert f.verdict is Verdict.PASS, explain(f, px)


@pytest.mark.parametrize("canary", [True, False], ids=["canary", "blind"])
def test_caddy_reverse_proxy_streams(ref: RefServer, tmp_path: Path, canary: bool) -> None:
    # caddy 2.6 over HTTP/1.1 sometimes cut this stream after 0-1 token: a Go net/http race
    # on the request body when the upstream answers at once (proxylab.REVERSE_PROXY_OPTIONS).
    with proxylab.caddy(ref.port, tmp_path) as px:
        f, _ = probe(px.url, canary=canary)
    assert f.verdict is Verdict.PASS, explain(f, px)
    assert f.evidence["pattern"] == "streamed"
    assert "caddy" in f.evidence["hops"]  # type: ignore[operator]


def test_caddy_streams_over_tls_and_http2(ref: RefServer, tmp_path: Path) -> None:
    # Reads are stamped below TLS and HTTP/2 framing: the verdict must not change.
    with proxylab.caddy(ref.port, tmp_path, tls=True) as px:
        f, _ = probe(
            px.url,
            canary=True,
            http="2",
            cacert=px.ca,
            resolve=(("localhost", px.port, "127.0.0.1"),),
        )
    assert f.verdict is Verdict.PASS, explain(f, px)
    request = f.evidence["request"]
    assert isinstance(request, dict) and request["http_version"] == "HTTP/2"


@pytest.mark.parametrize("canary", [True, False], ids=["canary", "blind"])
def test_the_reference_endpoint_alone_raises_no_alarm(ref: RefServer, canary: bool) -> None:
    f, _ = probe(ref.url, canary=canary)
    assert f.verdict is Verdict.PASS, explain(f)
    assert f.evidence["pattern"] == "streamed"
    assert f.advice == []


def test_blind_mode_on_a_short_stream_skips_with_the_reason(ref: RefServer) -> None:
    f, _ = probe(ref.url, canary=False, max_tokens=8)
    assert f.verdict is Verdict.SKIP, explain(f)
    assert "only 8 content events" in f.summary and "--max-tokens" in f.summary
    assert f.evidence["pattern"] is None


def sse_body(tokens: int) -> str:
    """An OpenAI chat stream of ``tokens`` one-token chunks, as nginx would hold it whole."""
    chunk = (
        '{"id":"c","object":"chat.completion.chunk",'
        '"choices":[{"index":0,"delta":{"content":"%d "}}]}'
    )
    events = [f"data: {chunk % (i + 1)}" for i in range(tokens)] + ["data: [DONE]"]
    return "".join(e + "\n\n" for e in events)


def test_content_length_on_a_short_event_stream_warns_and_says_the_server_stopped_early(
    ref: RefServer, tmp_path: Path
) -> None:
    # nginx `return` sends the whole body with Content-Length, as a hop that buffered the
    # answer to count it would; the answer stops at 10 tokens although 64 were asked for.
    body = sse_body(10).replace("\n", "\\n")  # nginx turns \n back into a newline
    location = f"default_type text/event-stream; return 200 '{body}';"
    with proxylab.nginx(ref.port, tmp_path, location=location) as px:
        f, _ = probe(px.url, canary=False, max_tokens=64)
    assert f.verdict is Verdict.WARN, explain(f, px)
    assert f.evidence["signs"] == {"content_length": str(len(sse_body(10)))}, explain(f)
    assert "Content-Length" in f.summary and "stopped early" in f.summary, f.summary
    assert "--max-tokens to" not in f.summary
    assert any("Content-Length" in a for a in f.advice)


def test_cli_reports_the_finding_in_json_and_fails_on_it(ref: RefServer, tmp_path: Path) -> None:
    with proxylab.nginx(ref.port, tmp_path, location="proxy_buffering on;") as px:
        args = ["run", px.url + CHAT, "--model", "m", "--http", "1.1", "--max-tokens", "8"]
        res = run_cli(*args, "--probe", "buffering", "--canary", "--json", "--fail-on", "fail")
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    (finding,) = [f for f in body["findings"] if f["probe"] == "buffering"]
    assert finding["verdict"] == "fail", finding
    assert finding["evidence"]["pattern"] in ("bursts", "whole")
    assert res.exit_code == 1
