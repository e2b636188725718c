"""`run --count N --baseline FILE` against the reference endpoint over loopback: the SLO
grammar's baseline forms, exit 9 on a breach, and the diff against the baseline.

The first-token delay is set per request (``x-promptpath-ttft-ms``); three tokens come at
once (``--rate 0``). Three series of 8 runs: ~11 s together.

Margins, measured with 200 ms against 400 ms over 10 rounds at load 11: the baseline's
TTFT p95 (the maximum of 8) 242 ms, so a threshold of 363 ms; the same endpoint's p95
221–278 ms, the slowed one's 424–461 ms. A baseline whose p95 caught a slow run (278 ms)
would have put the threshold at 417 ms, within 7 ms of the slowed side: so the test runs
300 ms against 700 ms. Measured that way over 10 rounds at load 11–12: baseline p95 331 ms
(threshold 497 ms), the same endpoint's p95 327–399 ms (≥ 98 ms under), the slowed one's
721–874 ms (≥ 224 ms over).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import CliResult, run_cli
from tests.helpers.refserver import RefServer, reference_server

REPORT = Path(__file__).parents[2] / "promptpath/report"
COUNT = "8"
BASE_MS, SLOWED_MS = 300, 700


def validate_series(body: dict[str, Any]) -> None:
    registry = Registry()
    for name in ("schema.json", "diff-schema.json"):
        resource = Resource.from_contents(json.loads((REPORT / name).read_text()))
        registry = registry.with_resource(resource.id() or "", resource)
    schema = json.loads((REPORT / "series_schema.json").read_text())
    jsonschema.Draft202012Validator(schema, registry=registry).validate(body)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("baseline"),
        extra_args=["--rate", "0", "--tokens", "3"],
    ) as ref:
        yield ref


def run(server: RefServer, ttft_ms: int, *args: str) -> CliResult:
    url = f"https://localhost:{server.port}/v1/chat/completions"
    return run_cli(
        "run", url, "--cacert", str(server.ca), "--count", COUNT,
        "-H", f"x-promptpath-ttft-ms: {ttft_ms}", *args,
    )  # fmt: skip


@pytest.fixture(scope="module")
def baseline(server: RefServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    res = run(server, BASE_MS, "--json")
    assert res.exit_code == 0, res.stderr
    path = tmp_path_factory.mktemp("saved") / "baseline.json"
    path.write_text(res.stdout)
    return path


SLO = ("--slo", "ttft_p95 < 1.5x baseline", "--slo", "connect_p50 < baseline + 10ms")


def test_a_slowed_endpoint_breaches_a_multiple_of_the_baseline_exit_9(
    server: RefServer, baseline: Path
) -> None:
    res = run(server, SLOWED_MS, "--baseline", str(baseline), *SLO, "--json")
    assert res.exit_code == ExitCode.SLO, res.stderr
    body = json.loads(res.stdout)
    validate_series(body)
    ttft, connect = body["slo"]
    assert ttft["ok"] is False and ttft["baseline"]["rule"] == "1.5x baseline"
    # The threshold is the baseline's own p95 times 1.5 (the baseline ran at 300 ms).
    assert ttft["threshold"] == pytest.approx(1.5 * ttft["baseline"]["value"], rel=1e-6)
    assert ttft["baseline"]["value"] >= BASE_MS and ttft["value"] >= SLOWED_MS
    assert connect["ok"] is True and connect["baseline"]["rule"] == "baseline + 10.0 ms"
    # The report shows what changed against the baseline: the first token, nothing before it.
    diff = body["baseline"]
    assert diff["schema"] == "promptpath.diff/1" and diff["before"]["source"] == "baseline.json"
    verdicts = {m["name"]: m["verdict"] for m in diff["metrics"]}
    assert verdicts["first_token"] == "regressed"
    assert all(verdicts[s] == "unchanged" for s in ("dns", "connect", "tls", "request", "wait"))
    assert "Against the baseline" in res.stderr
    assert "ttft_p95 < 1.5x baseline breached" in res.stderr.splitlines()[-1]


def test_the_same_endpoint_holds_its_baseline_exit_0(server: RefServer, baseline: Path) -> None:
    res = run(server, BASE_MS, "--baseline", str(baseline), *SLO)
    assert res.exit_code == 0, res.stderr
    assert "SLO ttft_p95 < " in res.stderr and "BREACHED" not in res.stderr


def test_a_baseline_slo_without_a_baseline_is_a_usage_error(server: RefServer) -> None:
    res = run(server, BASE_MS, "--slo", "ttft_p95 < 1.5x baseline")
    assert res.exit_code == ExitCode.USAGE
    assert "add --baseline FILE" in res.stderr


def test_a_baseline_that_is_no_promptpath_document_is_a_usage_error(
    server: RefServer, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    res = run(server, BASE_MS, "--baseline", str(bad))
    assert res.exit_code == ExitCode.USAGE
    assert res.stderr.startswith(f"promptpath: --baseline: {bad} is not a promptpath document")
