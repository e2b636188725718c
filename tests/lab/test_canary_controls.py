"""The canary checks that its controls arrived: through real hops that strip headers.

Observed by hand before these tests were written (LiteLLM proxy 1.106.12, litellm[proxy]
in .lab/litellm, default header forwarding, an openai/ model on the reference endpoint):

* the x-promptpath-* request headers do not reach the upstream (LiteLLM sends its own
  OpenAI-SDK headers); the body's top-level "promptpath" object does, verbatim (so do the
  contents of "extra_body"; "metadata" and "user" do not);
* LiteLLM re-frames every chunk, and keeps a chunk's extra top-level fields only when the
  chunk has a system_fingerprint, which the reference endpoint sends: the "promptpath"
  stamp and the first event's control report come through on every event but LiteLLM's
  own usage chunk;
* SSE comments (the endpoint's keepalives) do not come through: a 2 s pause with a
  comment every 0.5 s reached curl as 2 s of silence;
* a 2 s pause asked in the body reached curl as a 2 s gap: LiteLLM streams, it does not
  hold chunks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from promptpath.core.findings import Finding, Verdict
from promptpath.options import RunOptions, parse_target
from promptpath.probes.idle_timeout.probe import pause_controls
from promptpath.probes.suite import run_probes, select
from tests.helpers import litellmlab, proxylab
from tests.helpers.probesettings import probe_settings
from tests.helpers.refserver import RefServer, reference_server
from tests.lab.test_idle_timeout import NGINX_LAZY_S, assert_near

pytestmark = pytest.mark.lab

CHAT = "/v1/chat/completions"
IDLE_MAX_S = 6.0
ASKED = dict(pause_controls(IDLE_MAX_S, 0.0))


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


#: LiteLLM's first request after its start is slow, and not what these tests are about.
#: Observed (load ~3): the endpoint saw the request 1.0 s after it was sent and LiteLLM
#: passed its first events on 0.2-0.3 s after the endpoint sent them (later requests:
#: ~20 ms and ~2 ms); at load ~9 (flake check, two CPU hogs) nginx's proxy_read_timeout
#: 3s fired before LiteLLM's response headers (504, cut_by gateway_status). One ordinary
#: streamed request through it first.
WARM_UP_TIMEOUT_S = 60.0


def warm_up(px: proxylab.Proxy) -> None:
    message = {"role": "user", "content": "Say OK."}
    body = {"model": litellmlab.MODEL, "stream": True, "max_tokens": 2, "messages": [message]}
    auth = {"Authorization": f"Bearer {litellmlab.MASTER_KEY}"}
    with (
        httpx.Client(trust_env=False, timeout=WARM_UP_TIMEOUT_S) as client,
        client.stream("POST", px.url + CHAT, json=body, headers=auth) as response,
    ):
        assert response.status_code == 200, response.read()[:2000]
        for _ in response.iter_bytes():
            pass


@pytest.fixture(scope="module")
def gateway(ref: RefServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[proxylab.Proxy]:
    """The LiteLLM proxy in front of the reference endpoint (started once: ~12 s), warm."""
    with litellmlab.litellm_proxy(ref.port, tmp_path_factory.mktemp("litellm")) as px:
        warm_up(px)
        yield px


def idle_probe(
    base_url: str, *, via: str = "both", api_key: str | None = None
) -> tuple[Finding, list[str]]:
    options = RunOptions(
        target=parse_target(base_url + CHAT),
        provider="openai",
        model=litellmlab.MODEL,
        http="1.1",
        api_key=api_key,
    )
    said: list[str] = []
    findings = anyio.run(
        run_probes,
        options,
        None,
        select(["idle-timeout"]),
        said.append,
        probe_settings(canary=True, idle_max=IDLE_MAX_S, controls=via),
    )
    assert len(findings) == 1
    return findings[0], said


def explain(f: Finding, *proxies: proxylab.Proxy) -> str:
    text = f"{f.verdict.value}: {f.summary}\n{json.dumps(f.evidence, indent=1)[:4000]}"
    return "\n".join([text, *(p.logs() for p in proxies)])


def controls(f: Finding) -> dict[str, object]:
    got = f.evidence["controls"]
    assert isinstance(got, dict)
    return got


@pytest.mark.parametrize("buffering", ["on", "off"])
def test_body_carried_controls_cross_litellm_and_the_cut_is_found_near_3s(
    gateway: proxylab.Proxy, tmp_path: Path, buffering: str
) -> None:
    location = f"proxy_read_timeout 3s;\nproxy_buffering {buffering};"
    with proxylab.nginx(gateway.port, tmp_path, location=location) as px:
        f, _ = idle_probe(px.url, api_key=litellmlab.MASTER_KEY)
    assert f.verdict is Verdict.FAIL, explain(f, px, gateway)
    ev = f.evidence
    assert_near(ev["threshold_s"], 3.0, ev["resolution_s"], explain(f), early=NGINX_LAZY_S)
    assert ev["cut_by"] == "fin"
    # LiteLLM drops SSE comments: the keepalive re-test cannot show what keepalives do,
    # and the finding says why instead of calling the cut an absolute limit.
    assert ev["keepalive_helps"] is None
    assert "a hop drops SSE comments" in f.summary, explain(f)
    assert "absolute" not in f.summary
    if buffering == "off":
        # The first event reached us before the cut: the report says the pause came by
        # the body field. (Buffering on, nginx lost the held events with the cut; the cut
        # is the evidence then: without the pause the stream ends in under a second.)
        ev_controls = controls(f)
        assert ev_controls["reported"] is True, explain(f)
        assert ev_controls["arrived_by"] == {"header": [], "body": sorted(ASKED)}


def test_controls_sent_only_as_headers_through_litellm_give_skip_never_pass(
    gateway: proxylab.Proxy, tmp_path: Path
) -> None:
    with proxylab.nginx(gateway.port, tmp_path, location="proxy_read_timeout 3s;") as px:
        f, _ = idle_probe(px.url, via="headers", api_key=litellmlab.MASTER_KEY)
    # Without its controls the endpoint streams its defaults (no pause): the stream
    # "survives", which must not read as a pass.
    assert f.verdict is Verdict.SKIP, explain(f, px, gateway)
    assert f.summary.startswith(
        "canary part not judged: a hop strips the x-promptpath-* headers (the body field"
        " was not sent"
    ), explain(f)
    ev = controls(f)
    assert ev["reported"] is True  # the report itself crossed LiteLLM
    assert ev["arrived_by"] == {"header": [], "body": []}
    assert f.evidence["threshold_s"] is None


def test_nginx_stripping_the_pause_header_is_named_and_the_body_field_makes_up_for_it(
    ref: RefServer, tmp_path: Path
) -> None:
    # An empty proxy_set_header value makes nginx drop the header (nginx docs, and seen in
    # the endpoint's report below): the pause length never reaches the endpoint. Buffering
    # off, so the events before the pause (and the report in the first) reach us before
    # the cut: a buffering nginx loses them with the connection.
    location = (
        'proxy_read_timeout 3s;\nproxy_buffering off;\nproxy_set_header X-Promptpath-Pause-S "";'
    )
    with proxylab.nginx(ref.port, tmp_path, location=location) as px:
        stripped, _ = idle_probe(px.url, via="headers")
        both, _ = idle_probe(px.url, via="both")
    assert stripped.verdict is Verdict.SKIP, explain(stripped, px)
    assert "did not arrive as sent (pause-s asked 6, applied 0)" in stripped.summary
    assert both.verdict is Verdict.FAIL, explain(both, px)
    assert_near(
        both.evidence["threshold_s"],
        3.0,
        both.evidence["resolution_s"],
        explain(both),
        early=NGINX_LAZY_S,
    )
    assert both.evidence["keepalive_helps"] is True
    assert "pause-s" in controls(both)["arrived_by"]["body"], explain(both)  # type: ignore[index]


def buffering_probe(base_url: str, *, via: str) -> Finding:
    options = RunOptions(
        target=parse_target(base_url + CHAT),
        provider="openai",
        model=litellmlab.MODEL,
        http="1.1",
        api_key=litellmlab.MASTER_KEY,
    )
    findings = anyio.run(
        run_probes,
        options,
        None,
        select(["buffering"]),
        lambda _: None,
        probe_settings(canary=True, controls=via),
    )
    assert len(findings) == 1
    return findings[0]


def test_the_buffering_canary_through_litellm_is_judged_only_when_its_pacing_arrived(
    gateway: proxylab.Proxy,
) -> None:
    paced = buffering_probe(gateway.url, via="both")
    assert paced.verdict is not Verdict.SKIP, explain(paced, gateway)
    assert paced.evidence["mode"] == "canary"
    assert "rate" in controls(paced)["arrived_by"]["body"]  # type: ignore[index]
    # Headers only: the endpoint streams its defaults (50 tokens/s, 32 tokens), which
    # would make the hold figures describe a stream the probe never asked for.
    unpaced = buffering_probe(gateway.url, via="headers")
    assert unpaced.verdict is Verdict.SKIP, explain(unpaced, gateway)
    assert "a hop strips the x-promptpath-* headers" in unpaced.summary
    assert "rate asked 20, applied 50" in unpaced.summary
