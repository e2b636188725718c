"""The idle-timeout probe against real nginx and haproxy timeouts, on 127.0.0.1.

Pauses are a few seconds and --idle-max is small, so each test stays well under 15 s;
the keep-alive watch and the paused canary streams run side by side. Timing assertions
are the probe's own stated resolution plus ``SLACK_S``: tight enough to tell haproxy
`timeout server 2s` from 3s, which a ±1 s window could not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from promptpath.core.findings import Finding, Verdict
from promptpath.options import RunOptions, parse_target
from promptpath.probes.suite import run_probes, select
from tests.helpers import proxylab
from tests.helpers.probesettings import probe_settings
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

CHAT = "/v1/chat/completions"
#: Scheduling noise beyond the probe's resolution. Measured on this 2-core machine, also
#: with both cores kept busy by other processes: every cut came within 0.01 s of the
#: setting (nginx's read timeout aside, see below). 0.2 s leaves room and still separates
#: settings 0.5 s apart.
SLACK_S = 0.2
#: nginx does not move a running timer by less than 300 ms (NGX_TIMER_LAZY_DELAY): token
#: reads that close together do not re-arm proxy_read_timeout, so it fires up to 0.3 s
#: before the setting, counted from the last byte. Measured: 2.90 s for 3s.
NGINX_LAZY_S = 0.3


def assert_near(
    measured: object, setting: float, resolution: object, why: str, *, early: float = 0.0
) -> None:
    """``measured`` is within the probe's resolution (+ SLACK_S) of ``setting``; ``early``
    widens the window below it for a hop known to fire early."""
    assert isinstance(measured, float), why
    assert isinstance(resolution, float) and resolution <= 0.1, why
    low = setting - early - resolution - SLACK_S
    high = setting + resolution + SLACK_S
    assert low <= measured <= high, f"{measured} s not in [{low:.2f}, {high:.2f}]\n{why}"


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def probe(base_url: str, *, canary: bool, idle_max: float) -> tuple[Finding, list[str]]:
    options = RunOptions(
        target=parse_target(base_url + CHAT),
        provider="openai",
        model="test-model",
        http="1.1",
    )
    said: list[str] = []
    findings = anyio.run(
        run_probes,
        options,
        None,
        select(["idle-timeout"]),
        said.append,
        probe_settings(canary=canary, idle_max=idle_max),
    )
    assert len(findings) == 1
    return findings[0], said


def explain(f: Finding, proxy: proxylab.Proxy | None = None) -> str:
    text = f"{f.verdict.value}: {f.summary}\n{json.dumps(f.evidence, indent=1)[:4000]}"
    return text + ("\n" + proxy.logs() if proxy is not None else "")


def keepalive_idle(f: Finding) -> dict[str, Any]:
    ka = f.evidence["keepalive_idle"]
    assert isinstance(ka, dict)
    return ka


def test_nginx_proxy_read_timeout_cuts_a_paused_stream_and_keepalives_save_it(
    ref: RefServer, tmp_path: Path
) -> None:
    with proxylab.nginx(
        ref.port, tmp_path, location="proxy_read_timeout 3s;", http="keepalive_timeout 4s;"
    ) as px:
        f, said = probe(px.url, canary=True, idle_max=6.0)
    assert f.verdict is Verdict.FAIL, explain(f, px)
    ev = f.evidence
    assert_near(ev["threshold_s"], 3.0, ev["resolution_s"], explain(f), early=NGINX_LAZY_S)
    assert ev["cut_by"] == "fin"  # mid-body, no chunked terminator
    assert ev["keepalive_helps"] is True
    assert "nginx" in ev["hops"]  # type: ignore[operator]
    assert any("proxy_read_timeout" in a for a in f.advice)
    # The keep-alive watch ran beside it and saw nginx's own keepalive_timeout.
    ka = keepalive_idle(f)
    assert ka["closed_by"] == "fin"
    assert_near(ka["threshold_s"], 4.0, ka["resolution_s"], explain(f))  # one timer, set once
    assert any("cost:" in s for s in said) and any("keepalive comments" in s for s in said)


@pytest.mark.parametrize("seconds", [2, 3])
def test_haproxy_timeout_server_and_http_keep_alive_are_both_found(
    ref: RefServer, tmp_path: Path, seconds: int
) -> None:
    # Two settings 1 s apart: the windows below do not overlap, so each is told apart.
    with proxylab.haproxy(
        ref.port,
        tmp_path,
        defaults=f"timeout server {seconds}s\ntimeout http-keep-alive {seconds}s",
    ) as px:
        f, _ = probe(px.url, canary=True, idle_max=5.0)
    assert f.verdict is Verdict.FAIL, explain(f, px)
    ev = f.evidence
    assert_near(ev["threshold_s"], seconds, ev["resolution_s"], explain(f))
    assert ev["cut_by"] == "fin"  # haproxy ends the body without an error
    assert ev["keepalive_helps"] is True
    ka = keepalive_idle(f)
    assert ka["closed_by"] == "fin"
    assert_near(ka["threshold_s"], seconds, ka["resolution_s"], explain(f))


def test_haproxy_keep_alive_close_is_found_without_the_canary(
    ref: RefServer, tmp_path: Path
) -> None:
    with proxylab.haproxy(ref.port, tmp_path, defaults="timeout http-keep-alive 2s") as px:
        f, _ = probe(px.url, canary=False, idle_max=5.0)
    assert f.verdict is Verdict.PASS, explain(f, px)  # a clean FIN close is no fault
    ka = keepalive_idle(f)
    assert_near(ka["threshold_s"], 2.0, ka["resolution_s"], explain(f))
    assert f.evidence["threshold_s"] is None  # nothing mid-stream measured blind
    assert "--canary" in f.summary


def test_the_reference_endpoint_alone_raises_no_alarm(ref: RefServer) -> None:
    # hypercorn keeps idle connections 5 s: a 3 s cap ends with the re-use check.
    f, _ = probe(ref.url, canary=True, idle_max=3.0)
    assert f.verdict is Verdict.PASS, explain(f)
    assert f.evidence["threshold_s"] is None
    assert f.evidence["cut_by"] is None
    ka = keepalive_idle(f)
    assert ka["reuse"] == "ok" and ka["reuse_status"] == 200
