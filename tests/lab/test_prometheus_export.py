"""--pushgateway against a real Prometheus Pushgateway, and end to end through a real
Prometheus server that scrapes it, all on 127.0.0.1 (facts observed: tests/helpers/promlab.py)."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from promptpath.core.exitcodes import ExitCode
from tests.conftest import require_binary
from tests.helpers import promlab
from tests.helpers.cli import CliResult, run_cli
from tests.helpers.proxylab import Proxy
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def target(ref: RefServer) -> str:
    return f"https://localhost:{ref.port}/v1/chat/completions"


def push_run(ref: RefServer, gateway: Proxy, *labels: str) -> CliResult:
    args = [a for label in labels for a in ("--label", label)]
    return run_cli(
        "run", target(ref), "--cacert", str(ref.ca), "-4", "--json",
        "-H", "x-promptpath-ttft-ms: 120", "--pushgateway", gateway.url, *args,
    )  # fmt: skip


def gateway_text(gateway: Proxy) -> str:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(gateway.url + "/metrics", timeout=5) as response:
        return str(response.read().decode())


def test_the_pushgateway_keeps_the_runs_metrics_under_its_grouping_labels(
    ref: RefServer, tmp_path: Path
) -> None:
    with promlab.pushgateway(tmp_path) as gateway:
        res = push_run(ref, gateway, "instance=runner-7", "region=eu/west")
        assert res.exit_code == 0, res.stderr
        ttft = json.loads(res.stdout)["ttft_ms"]["from_start"] / 1000
        families = {f.name: f for f in text_string_to_metric_families(gateway_text(gateway))}
    assert families["promptpath_ttft_seconds"].type == "summary"
    (median,) = [
        s for s in families["promptpath_ttft_seconds"].samples if s.labels.get("quantile") == "0.5"
    ]
    # A slash in a grouping value reached the Pushgateway whole (sent as base64).
    assert median.labels | {"quantile": "0.5"} == {
        "job": "promptpath",
        "instance": "runner-7",
        "region": "eu/west",
        "target": target(ref),
        "quantile": "0.5",
    }
    assert median.value == pytest.approx(ttft)
    (dns,) = [
        s
        for s in families["promptpath_stage_duration_seconds"].samples
        if s.labels.get("stage") == "dns" and s.labels.get("quantile") == "1"
    ]
    assert dns.value >= 0
    (pushed_ok,) = families["promptpath_success"].samples
    assert pushed_ok.value == 1


def test_a_pushgateway_that_refuses_the_push_gives_exit_10_with_its_reason(
    ref: RefServer, tmp_path: Path
) -> None:
    with promlab.pushgateway(tmp_path) as gateway:
        # Another group holds promptpath_ttft_seconds as a gauge: the Pushgateway refuses
        # our summary of the same name with a 400 that quotes the family.
        request = urllib.request.Request(
            gateway.url + "/metrics/job/other",
            data=b"# TYPE promptpath_ttft_seconds gauge\npromptpath_ttft_seconds 1\n",
            method="PUT",
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(request, timeout=5) as response:
            assert response.status == 200
        res = push_run(ref, gateway)
    assert res.exit_code == ExitCode.EXPORT
    assert json.loads(res.stdout)["ok"] is True
    (line,) = [ln for ln in res.stderr.splitlines() if "export failed" in ln]
    # Which of the two types the reason calls wrong is the Pushgateway's choice: it checks
    # the families in an order of its own (observed by hand, 12 refusals: 10 "... } is not
    # a GAUGE" quoting our summary, 2 "... gauge:<value:1 > } is not a SUMMARY" quoting the
    # other group's gauge). Both start by quoting the family, 'collected metric
    # "promptpath_ttft_seconds"', within the first 150 characters our line keeps: that
    # the conflicting family is named is what this test holds, not the wording.
    status = f"--pushgateway {gateway.url}: HTTP 400 "
    assert status in line
    assert "promptpath_ttft_seconds" in line.split(status, 1)[1]


def test_a_lab_pushgateway_leaves_no_metrics_for_the_next_one(tmp_path: Path) -> None:
    # Debian's Pushgateway persists to /var/lib/prometheus/pushgateway.data unless told
    # otherwise, and a later start serves what it finds there (promlab.pushgateway's
    # notes): one test's pushes must not reach another's gateway.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with promlab.pushgateway(tmp_path) as first:
        request = urllib.request.Request(
            first.url + "/metrics/job/earlier",
            data=b"# TYPE promptpath_lab_leftover gauge\npromptpath_lab_leftover 1\n",
            method="PUT",
        )
        with opener.open(request, timeout=5) as response:
            assert response.status == 200
        assert "promptpath_lab_leftover" in gateway_text(first)
    # Stopped (SIGTERM: the moment a persisting gateway writes its file): nothing but the
    # log was written, and the next gateway starts empty.
    assert [p.name for p in first.directory.iterdir()] == ["pushgateway.stdout.log"]
    with promlab.pushgateway(tmp_path) as second:
        assert "promptpath_lab_leftover" not in gateway_text(second)


def test_prometheus_scraping_the_pushgateway_returns_the_pushed_ttft(
    ref: RefServer, tmp_path: Path
) -> None:
    with (
        promlab.pushgateway(tmp_path) as gateway,
        promlab.prometheus(tmp_path, gateway.port) as prom,
    ):
        res = push_run(ref, gateway, "region=ci-runner")
        assert res.exit_code == 0, res.stderr
        ttft = json.loads(res.stdout)["ttft_ms"]["from_start"] / 1000
        found = promlab.wait_for_series(prom, 'promptpath_ttft_seconds{quantile="0.5"}')
    (series,) = found
    assert series["metric"]["job"] == "promptpath" and series["metric"]["region"] == "ci-runner"
    assert float(series["value"][1]) == pytest.approx(ttft)
    assert ttft >= 0.12  # the injected first-token delay, so the figure is the run's


def test_promtool_finds_nothing_to_lint_in_a_runs_textfile(ref: RefServer, tmp_path: Path) -> None:
    # promtool (Debian's prometheus package) checks the naming conventions: observed, it
    # exits 3 with 'use base unit "seconds" instead of "days"' for a *_days_left gauge.
    promtool = require_binary("promtool")
    path = tmp_path / "promptpath.prom"
    res = run_cli(
        "run", target(ref), "--cacert", str(ref.ca), "-4", "--prom-textfile", str(path),
        "--label", "region=eu-west",
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    text = path.read_text()
    assert "promptpath_tls_cert_expiry_timestamp_seconds" in text  # a TLS run: all families
    lint = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
