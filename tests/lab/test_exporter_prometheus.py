"""A real Prometheus scrapes `promptpath exporter` through the shipped multi-target relabel
config (examples/exporter/prometheus.yml), while the endpoint behind it is slow, stalls,
errors and restarts; all on 127.0.0.1.

Observed by hand first (2026-12-02, Prometheus 2.42 from Debian): Prometheus sends
``X-Prometheus-Scrape-Timeout-Seconds`` with the job's scrape_timeout (1 here); a /probe
answer of 400 makes that target's ``up`` 0; the first scrape comes ~5 s after start
(tests/helpers/promlab.py).
"""

from __future__ import annotations

import select
import socket
import subprocess
import time
import urllib.error
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import require_binary
from tests.helpers import promlab
from tests.helpers.exporterlab import Exporter, exporter
from tests.helpers.proxylab import free_port
from tests.helpers.refserver import reference_server

pytestmark = pytest.mark.lab

EXAMPLE = Path(__file__).parents[2] / "examples" / "exporter" / "prometheus.yml"
FAST = '"x-promptpath-tokens" = "4", "x-promptpath-rate" = "200"'


def _exporter_config(port: int, ca: str) -> str:
    target = f'url = "https://{{host}}:{port}/v1/chat/completions"\ncacert = "{ca}"\n'
    return f"""
[exporter]
max_in_flight = 16
min_interval_s = 0
scrape_timeout_offset_s = 0.5

[modules.chat]
provider = "openai"
max_tokens = 8
headers = {{ {FAST} }}

[modules.slow]        # the first token after 2 s: past a 1 s scrape's deadline
provider = "openai"
max_tokens = 8
headers = {{ "x-promptpath-ttft-ms" = "2000", {FAST} }}

[modules.stall]       # 2 tokens, then 30 s of silence: cut in the stream
provider = "openai"
max_tokens = 8
headers = {{ "x-promptpath-pause-after" = "2", "x-promptpath-pause-s" = "30", {FAST} }}

[modules.broken]
provider = "openai"
max_tokens = 8
headers = {{ "x-promptpath-status" = "503" }}

[targets.a]
{target.format(host="127.0.0.1")}
[targets.b]
{target.format(host="localhost")}
"""


def _prometheus_config(exporter_port: int, bait_port: int) -> str:
    """The shipped example, with the lab's targets, a 1 s interval and this exporter."""
    config = yaml.safe_load(EXAMPLE.read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config.pop("rule_files")
    probe_job, own_job = config["scrape_configs"]
    assert probe_job["metrics_path"] == "/probe"
    probe_job.update(scrape_interval="1s", scrape_timeout="1s")
    probe_job["static_configs"] = [
        {"targets": ["a", "b"], "labels": {"module": module}}
        for module in ("chat", "slow", "stall", "broken")
    ] + [
        # Not in the exporter's config: a URL (to a socket that must see no connection)
        # and a name.
        {
            "targets": [f"http://127.0.0.1:{bait_port}/v1/chat/completions", "unlisted"],
            "labels": {"module": "chat"},
        }
    ]
    relabel = probe_job["relabel_configs"]
    assert relabel[-1]["target_label"] == "__address__"
    relabel[-1]["replacement"] = f"127.0.0.1:{exporter_port}"
    own_job["scrape_interval"] = "1s"
    own_job["static_configs"] = [{"targets": [f"127.0.0.1:{exporter_port}"]}]
    return yaml.safe_dump(config)


def _by(series: list[dict[str, Any]], *labels: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(s["metric"].get(label, "") for label in labels): float(s["value"][1]) for s in series
    }


@pytest.fixture(scope="module")
def bait() -> Iterator[socket.socket]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock


def _wait(prom: Any, promql: str, want: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + promlab.FIRST_SCRAPE_TIMEOUT_S
    while True:
        try:
            found = promlab.query(prom, promql)
        except urllib.error.HTTPError as exc:  # 503 while its TSDB is still opening
            if exc.code != 503 or time.monotonic() > deadline:
                raise
            found = []
        if len(found) >= want or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def test_prometheus_scrapes_two_targets_and_modules_through_faults_and_a_restart(
    tmp_path: Path, bait: socket.socket
) -> None:
    port = free_port()
    ref_args = ("--port", str(port))
    certs = tmp_path / "ref"
    with reference_server(tls=True, tmp_path=certs, extra_args=ref_args) as ref:
        assert ref.ca is not None
        ca = ref.ca
        running: Exporter
        with (
            exporter(tmp_path / "exporter", _exporter_config(port, ca)) as running,
            promlab.prometheus_with(
                tmp_path, _prometheus_config(running.port, bait.getsockname()[1])
            ) as prom,
        ):
            ttft = _wait(
                prom, 'promptpath_ttft_seconds{job="promptpath",module="chat",quantile="0.5"}', 2
            )
            assert set(_by(ttft, "instance", "module")) == {("a", "chat"), ("b", "chat")}
            assert all(0 < v < 1 for v in _by(ttft, "instance").values())
            success = _wait(prom, 'probe_success{job="promptpath"}', 8)
            assert _by(success, "instance", "module") == {
                ("a", "chat"): 1,
                ("b", "chat"): 1,
                ("a", "slow"): 0,
                ("b", "slow"): 0,
                ("a", "stall"): 0,
                ("b", "stall"): 0,
                ("a", "broken"): 0,
                ("b", "broken"): 0,
            }
            ref.process.terminate()
            ref.process.wait(10)
            # Scraped every second, but when is Prometheus' business (a loaded machine
            # delays it): the endpoint's fall must show within the same 10 s as its return.
            deadline = time.monotonic() + 10
            while True:
                down = promlab.query(prom, 'probe_success{job="promptpath",module="chat"}')
                if set(_by(down, "instance").values()) == {0}:
                    break
                assert time.monotonic() < deadline, down
                time.sleep(0.25)
            _restarted = reference_server(tls=True, tmp_path=certs, extra_args=ref_args)
            with _restarted:
                deadline = time.monotonic() + 10
                while True:
                    back = promlab.query(prom, 'probe_success{job="promptpath",module="chat"}')
                    if set(_by(back, "instance").values()) == {1}:
                        break
                    assert time.monotonic() < deadline, back
                    time.sleep(0.25)
                stages = promlab.query(
                    prom, 'max_over_time(promptpath_exporter_timed_out{job="promptpath"}[1m]) == 1'
                )
                # The slow and stalled modules time out where they stall; others may
                # too while the endpoint restarts (seen: a handshake to the process
                # still starting, cut in stage tls).
                assert {("slow", "first_token"), ("stall", "stream")} <= set(
                    _by(stages, "module", "stage")
                ), stages
                window = "[1m]"
                # Every scrape of an allowed target was answered, in time.
                up = promlab.query(prom, f'min_over_time(up{{job="promptpath"}}{window})')
                ups = _by(up, "instance", "module")
                assert {k: v for k, v in ups.items() if k[0] in ("a", "b")} == {
                    k: 1.0 for k in ups if k[0] in ("a", "b")
                }
                assert len([k for k in ups if k[0] in ("a", "b")]) == 8
                # The refused ones: 400, so Prometheus marks them down.
                refused = {k: v for k, v in ups.items() if k[0] not in ("a", "b")}
                assert len(refused) == 2 and set(refused.values()) == {0.0}
                slowest = promlab.query(
                    prom, f'max_over_time(scrape_duration_seconds{{job="promptpath"}}{window})'
                )
                assert max(_by(slowest, "instance", "module").values()) < 1.0
                own = promlab.query(prom, "promptpath_exporter_probes_total > 0")
                counted = _by(own, "module", "result")
                assert {("chat", "success"), ("chat", "failure")} <= set(counted)
                assert {("slow", "timeout"), ("stall", "timeout"), ("broken", "failure")} <= set(
                    counted
                )
                refusals = _by(
                    promlab.query(prom, "promptpath_exporter_scrapes_refused_total > 0"), "reason"
                )
                assert set(refusals) == {("url_target",), ("unknown_target",)}
                # promtool's linter (naming, units, HELP) has nothing to say of either answer.
                promtool = require_binary("promtool")
                for path in ("/probe?target=a&module=chat", "/metrics"):
                    lint = subprocess.run(
                        [promtool, "check", "metrics"],
                        input=running.get(path)[1],
                        capture_output=True,
                        text=True,
                        timeout=30,
                        check=False,
                    )
                    assert lint.returncode == 0, (path, lint.stdout, lint.stderr)
                    assert lint.stdout + lint.stderr == "", (path, lint.stdout, lint.stderr)
        assert select.select([bait], [], [], 0)[0] == []  # the URL target saw no connection
        log = running.log()  # every line JSON (log() fails on one that is not)
        assert "Traceback" not in running.stderr.read_text()
        assert {e["result"] for e in log if e["event"] == "probe"} == {
            "success",
            "failure",
            "timeout",
        }
