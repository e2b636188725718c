"""The buffering and idle-timeout probes in canary mode through real nginx, for each of the
issue-23 dialects: Gemini, Vertex, Azure OpenAI, Bedrock converse-stream and
invoke-with-response-stream, Cohere v2. Each run goes as the dialect's SDK sends it.

One nginx (1.22.1) serves both probes from two server blocks in front of one
``promptpath serve``: ``proxy_buffering on`` with the default HTTP/1.0 upstream for the
buffering probe, ``proxy_read_timeout 3s`` for the idle-timeout probe. The six dialects'
probes run side by side (one module fixture per probe), so the file costs one probe's
time, not six.

Observed by hand through that nginx, 60 events at 20/s, a raw socket reading the client
side (``/tmp`` script, Dec 2026):

- buffering on, HTTP/1.0 upstream: every content type is held in 4 KiB blocks (reads of
  4,130 = 4,096 + chunk and header bytes, then 4,104 each), ~650-850 ms apart:
  ``text/event-stream`` (Gemini, Vertex, Azure, Cohere), ``application/vnd.amazon.eventstream``
  (both Bedrock paths) and ``application/x-ndjson`` (Ollama) alike: nginx does not look at
  the type. With ``proxy_http_version 1.1`` (buffering still on) all of them streamed, one
  event per read (60-64 reads).
- Event sizes differ: ~290 bytes for Gemini, ~300 Azure, ~230-340 Bedrock, ~176 Cohere. 60
  Cohere events fill only 2 whole blocks (reads of 4,130 / 4,104 / 3,596), fewer than the 3
  flushes the mechanism needs to call a size steady (buffering.mechanism.MIN_FLUSHES), so
  the probe names irregular bursts there; still a FAIL at nginx.
- ``proxy_read_timeout 3s``: each dialect's paused stream is cut after 2.9 s of silence
  with a FIN mid-body (nginx's lazy timer fires up to 0.3 s early). serve's SSE keepalive
  comments every 1 s keep the same pause alive in the SSE dialects; serve sends none in
  the event-stream framing (checked: no ``: keepalive`` bytes in a paused converse-stream),
  which has no comment frame, so the probe runs no re-test there and says why.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from promptpath.core.findings import Finding, Verdict
from promptpath.dialects.registry import Provider
from promptpath.options import RunOptions
from promptpath.probes.suite import run_probes, select
from tests.helpers import proxylab
from tests.helpers.dialectsamples import SAMPLES, sample_options
from tests.helpers.ports import LOOPBACK, free_port
from tests.helpers.probesettings import probe_settings
from tests.helpers.refserver import reference_server
from tests.lab.test_idle_timeout import NGINX_LAZY_S, assert_near, explain

pytestmark = pytest.mark.lab

#: provider -> (path on serve, model)
DIALECTS: dict[Provider, tuple[str, str]] = {
    p: SAMPLES[p] for p in ("gemini", "vertex", "azure", "bedrock", "bedrock-invoke", "cohere")
}
EVENTSTREAM = ("bedrock", "bedrock-invoke")
IDLE_MAX_S = 4.0  # above the 3 s cut, short enough to keep the file quick
IDLE_TIMEOUT_S = 3.0


class Lab:
    def __init__(self, buffering_url: str, idle_url: str, proxy: proxylab.Proxy) -> None:
        self.buffering_url = buffering_url
        self.idle_url = idle_url
        self.proxy = proxy


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("dialect-hops")
    with reference_server(tls=False, tmp_path=tmp) as ref:
        idle_port = free_port()
        idle_server = (
            f"server {{ listen {LOOPBACK}:{idle_port};"
            f" location / {{ proxy_pass http://{LOOPBACK}:{ref.port};"
            f" proxy_read_timeout {IDLE_TIMEOUT_S:g}s; }} }}"
        )
        with proxylab.nginx(ref.port, tmp, location="proxy_buffering on;", http=idle_server) as px:
            yield Lab(px.url, f"http://{LOOPBACK}:{idle_port}", px)


def _options(base_url: str, provider: Provider) -> RunOptions:
    return sample_options(base_url, provider, http="1.1")


def _all_at_once(base_url: str, probe: str) -> dict[Provider, Finding]:
    """The probe for every dialect, side by side through the same nginx."""
    found: dict[Provider, Finding] = {}

    async def one(provider: Provider) -> None:
        findings = await run_probes(
            _options(base_url, provider),
            None,
            select([probe]),
            lambda _: None,
            probe_settings(canary=True, idle_max=IDLE_MAX_S),
        )
        assert len(findings) == 1
        found[provider] = findings[0]

    async def every() -> None:
        async with anyio.create_task_group() as tg:
            for provider in DIALECTS:
                tg.start_soon(one, provider)

    anyio.run(every)
    return found


@pytest.fixture(scope="module")
def buffering(lab: Lab) -> dict[Provider, Finding]:
    return _all_at_once(lab.buffering_url, "buffering")


@pytest.fixture(scope="module")
def idle(lab: Lab) -> dict[Provider, Finding]:
    return _all_at_once(lab.idle_url, "idle-timeout")


@pytest.mark.parametrize("provider", sorted(DIALECTS))
def test_nginx_buffering_is_found_at_nginx_in_each_dialect(
    buffering: dict[Provider, Finding], lab: Lab, provider: Provider
) -> None:
    f = buffering[provider]
    why = explain(f, lab.proxy)
    assert f.verdict is Verdict.FAIL, why
    assert f.evidence["pattern"] == "bursts", why
    assert "at nginx" in f.summary, why
    mechanism = f.evidence["mechanism"]
    assert isinstance(mechanism, dict), why
    if provider == "cohere":  # 2 whole blocks in 60 small events: see the module docstring
        assert mechanism["kind"] == "irregular_bursts", why
    else:
        assert mechanism["kind"] == "size_buffer", why
        assert mechanism["block_bytes"] == 4096, why
    # The canary's controls reached serve in this dialect's own request body too.
    controls = f.evidence["controls"]
    assert isinstance(controls, dict) and controls["reported"] is True, why


@pytest.mark.parametrize("provider", sorted(DIALECTS))
def test_nginx_proxy_read_timeout_is_found_in_each_dialect(
    idle: dict[Provider, Finding], lab: Lab, provider: Provider
) -> None:
    f = idle[provider]
    why = explain(f, lab.proxy)
    assert f.verdict is Verdict.FAIL, why
    ev = f.evidence
    assert_near(ev["threshold_s"], IDLE_TIMEOUT_S, ev["resolution_s"], why, early=NGINX_LAZY_S)
    assert ev["cut_by"] == "fin", why  # mid-body, no chunked terminator
    assert "nginx" in ev["hops"], why  # type: ignore[operator]
    assert any("proxy_read_timeout" in a for a in f.advice), why
    if provider in EVENTSTREAM:
        # No comment frame in AWS's event stream: no re-test, and the summary says why
        # rather than blaming a hop for dropping SSE comments that were never sent.
        assert ev["keepalive_helps"] is None, why
        assert "event-stream framing has no comment frame" in f.summary, why
        assert "drops SSE comments" not in f.summary, why
        runs = ev["mid_stream"]["runs"]  # type: ignore[index]
        assert len(runs) == 1, why
    else:
        assert ev["keepalive_helps"] is True, why  # serve's comments kept the pause alive
