"""A plain `promptpath run` imports only what a plain trace needs (issue 25).

Every module a process imports shows in `python -X importtime`, lazy imports inside
functions included, so one real run against the reference endpoint over loopback lists the
run path as a user's run takes it: options, trace, decoding, rendering, the HTTP/3
discovery that reads Alt-Svc, and exit.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.helpers.refserver import RefServer

#: Loaded only when a feature asks for them (serve, --http 3, --resolver or an HTTPS
#: record lookup, schema checks, --prom-textfile/--junit/--har, --otlp-endpoint, a series,
#: --slo, probes) or never (pydantic: typer 0.29 pulled it in to coerce every option;
#: pyproject pins typer below 0.29).
DENIED = (
    "hypercorn",
    "aioquic",
    "dns.resolver",
    "dns.asyncresolver",
    "jsonschema",
    "promptpath.report.prometheus",
    "promptpath.report.junit",
    "promptpath.report.har",
    "pydantic",
    # `serve` is registered by name (cli._COMMANDS): its module loads when it runs.
    "promptpath.server",
    # A series' statistics, the SLO grammar, load mode, the probes, DNS wire parsing
    # (--resolver, --authoritative, an HTTPS record lookup): each loads when asked for.
    "promptpath.core.series",
    "promptpath.core.slo",
    "promptpath.modes.series",
    "promptpath.modes.compare_http",
    "promptpath.tracer.load",
    "promptpath.tracer.repeat",
    "promptpath.probes.suite",
    "promptpath.net.dnsmsg",
    # A verified certificate is read from the ssl module's own decoding (net/tlsinfo.py):
    # cryptography loads for -k, HTTP/3 and a name it must format itself.
    "cryptography",
    # The live progress line: only when stderr is a terminal (here it is a pipe).
    "rich.live",
    "rich.spinner",
    # rich's emoji table: our consoles print ":warning:" as sent (emoji=False).
    "rich._emoji_codes",
    # --otlp-endpoint's SDK (the otel extra) and its encoders; outputs/otlp_sdk.py imports them.
    "opentelemetry",
    "google.protobuf",
    "promptpath.outputs.otlp_sdk",
    "promptpath.report.otel",
)


def _imported(stderr: str) -> set[str]:
    return {line.split("|")[-1].strip() for line in stderr.splitlines() if "|" in line}


@pytest.fixture(scope="module", params=["2", "1.1"])
def run_imports(request: pytest.FixtureRequest, refserver_tls: RefServer) -> set[str]:
    url = f"https://localhost:{refserver_tls.port}/v1/chat/completions"
    assert refserver_tls.ca is not None
    argv = [
        *(sys.executable, "-X", "importtime", "-m", "promptpath", "run", url),
        *("--cacert", refserver_tls.ca, "--http", request.param, "-4", "--json"),
        *("-H", "x-promptpath-ttft-ms: 0", "-H", "x-promptpath-tokens: 3"),
    ]
    out = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    body = json.loads(out.stdout)
    assert body["ok"] and body["tokens"]["count"] == 3  # the whole path ran, to the end
    return _imported(out.stderr)


def _loaded(modules: set[str], name: str) -> list[str]:
    return sorted(m for m in modules if m == name or m.startswith(name + "."))


def test_the_run_path_is_what_importtime_sees(run_imports: set[str]) -> None:
    # The list is real: the modules a trace cannot do without are in it.
    for needed in ("promptpath.tracer.orchestrator", "httpcore", "promptpath.report.json"):
        assert needed in run_imports


@pytest.mark.parametrize("module", DENIED)
def test_a_plain_run_does_not_import(run_imports: set[str], module: str) -> None:
    assert _loaded(run_imports, module) == []
