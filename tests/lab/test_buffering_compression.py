"""nginx compressing event streams, seen as the user's client sees it (--as).

Checked by hand (nginx 1.22.1, the reference endpoint behind it at 60 tokens, 20/s,
curl 7.88.1 -N, arrival time of each `data:` line):
- `gzip on; gzip_types text/event-stream; proxy_http_version 1.1;` (proxy_buffering on,
  the default): without --compressed all 63 events arrive one by one over 3 s; with
  --compressed (Accept-Encoding: deflate, gzip, br, zstd) all 63 arrive at 2.96 s in
  one block, Content-Encoding: gzip.
- the same with `proxy_buffering off;`: gzip and identity both stream event by event.
The Python SDKs send Accept-Encoding: gzip, deflate (checked on a loopback capture), so
the default client shape gets the held-back gzip stream and --as identity does not.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.core.findings import Finding, Verdict
from promptpath.probes.suite import run_probes, select
from tests.helpers import proxylab
from tests.helpers.cli import run_cli
from tests.helpers.probesettings import probe_settings
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

CHAT = "/v1/chat/completions"
SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
GZIP_SSE = "gzip on; gzip_types text/event-stream; proxy_http_version 1.1;"


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    """A long, paced default answer, so blind mode sees a stream worth judging."""
    with reference_server(
        tls=False,
        tmp_path=tmp_path_factory.mktemp("ref"),
        extra_args=["--tokens", "60", "--rate", "20"],
    ) as server:
        yield server


def probe(url: str, *, canary: bool = False, **args: Any) -> tuple[Finding, list[str]]:
    """The buffering probe on options built as the CLI builds them (the default client)."""
    options = build_options(
        RunArgs(
            target=url + CHAT,
            model="m",
            max_tokens=64,
            **args,
        ),
        environ={},
    )
    said: list[str] = []
    (finding,) = anyio.run(
        run_probes,
        options,
        None,
        select(["buffering"]),
        said.append,
        probe_settings(canary=canary, idle_max=5.0),
    )
    return finding, said


def explain(f: Finding, proxy: proxylab.Proxy) -> str:
    evidence = json.dumps(f.evidence, indent=1)[:3000]
    return f"{f.verdict.value}: {f.summary}\n{evidence}\n{proxy.logs()}"


@pytest.mark.parametrize("canary", [False, True], ids=["blind", "canary"])
def test_nginx_gzip_holds_back_the_sdk_client_and_identity_shows_it_is_the_gzip(
    ref: RefServer, tmp_path: Path, canary: bool
) -> None:
    with proxylab.nginx(ref.port, tmp_path, location=GZIP_SSE) as px:
        f, said = probe(px.url, canary=canary)
    assert f.verdict is Verdict.FAIL, explain(f, px)
    assert f.evidence["pattern"] == "whole", explain(f, px)
    assert f.evidence["request"]["client"] == "openai-python"  # type: ignore[index]
    assert f.evidence["compression"] == {
        "encoding": "gzip",
        "offered": ["gzip", "deflate"],
        "for_this_client": True,
        "held_back": True,
    }
    check = f.evidence["identity_check"]
    assert isinstance(check, dict) and check["verdict"] == "pass", explain(f, px)
    assert check["cause"] == "compression" and check["compressed"] is None
    assert "only clients that accept gzip are held back" in f.summary
    assert any("cost: 2 requests" in s for s in said), said  # the identity request, stated


def test_nginx_gzip_streams_to_an_identity_client(ref: RefServer, tmp_path: Path) -> None:
    with proxylab.nginx(ref.port, tmp_path, location=GZIP_SSE) as px:
        f, said = probe(px.url, client="identity")
    assert f.verdict is Verdict.PASS, explain(f, px)
    assert f.evidence["pattern"] == "streamed" and "compression" not in f.evidence
    assert any("cost: 1 request," in s for s in said), said


def test_gzip_without_proxy_buffering_is_compression_that_holds_nothing_back(
    ref: RefServer, tmp_path: Path
) -> None:
    location = "gzip on; gzip_types text/event-stream; proxy_buffering off;"
    with proxylab.nginx(ref.port, tmp_path, location=location) as px:
        f, _ = probe(px.url)
    assert f.verdict is Verdict.PASS, explain(f, px)
    assert f.evidence["compression"]["held_back"] is False  # type: ignore[index]
    assert "compressed with gzip for this client without holding events back" in f.summary
    assert "identity_check" not in f.evidence


def test_cli_reports_the_gzip_stream_and_fails_on_the_held_back_probe(
    ref: RefServer, tmp_path: Path
) -> None:
    with proxylab.nginx(ref.port, tmp_path, location=GZIP_SSE) as px:
        res = run_cli("run", px.url + CHAT, "--model", "m", "--probe", "buffering", "--json")
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert body["client"]["as"] == "openai-python" and body["http_version"] == "HTTP/1.1"
    assert body["stream"]["compressed"] == "gzip", body["stream"]
    (finding,) = body["findings"]
    assert finding["verdict"] == "fail", finding
    assert finding["evidence"]["identity_check"]["verdict"] == "pass", finding
    assert res.exit_code == 1
    assert "stream compressed with gzip" in res.stderr
