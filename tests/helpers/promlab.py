"""A real Prometheus Pushgateway and Prometheus server on loopback, for lab tests.

Each gets a free 127.0.0.1 port and a temp dir (logs; Prometheus' TSDB and config); the
Pushgateway keeps its metrics in memory only. Both are Debian's packages
(prometheus-pushgateway 1.5.1, prometheus 2.42.0 on Debian 12).

Observed by hand (2026-12-01, this machine):
- The Pushgateway answers /-/ready within 0.1 s of starting.
- A push whose metric has another type than the same name in another group is refused
  with 400 "pushed metrics are invalid or inconsistent with existing metrics: collected
  metric "NAME" { ... } is not a GAUGE"; which group's sample it quotes, and so which type
  it calls wrong, changes from one refusal to the next (2026-12-06: 2 of 12 quoted the
  other group's gauge, "... is not a SUMMARY"). A malformed body: 400 "text format
  parsing error in line 1 ...".
- Grouping labels in the URL win over the same labels in the pushed text.
- Prometheus answers /-/ready within 0.1 s, but its first scrape comes about 5 s after
  start (5.3 s measured with scrape_interval 1s): the discovery manager hands targets to
  the scrape manager at most every 5 s. Then one scrape per second.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_binary
from tests.helpers.proxylab import LOOPBACK, Proxy, _running, free_port

#: The first scrape takes ~5 s (see above); twice that, with a loaded machine in mind.
FIRST_SCRAPE_TIMEOUT_S = 20.0


@contextlib.contextmanager
def pushgateway(tmp_path: Path) -> Iterator[Proxy]:
    """prometheus-pushgateway on 127.0.0.1:PORT, metrics in memory only (log in ``tmp_path``)."""
    binary = require_binary("prometheus-pushgateway")
    directory = tmp_path / f"pushgateway-{time.monotonic_ns()}"
    directory.mkdir(parents=True)
    port = free_port()
    # Debian's default is --persistence.file=/var/lib/prometheus/pushgateway.data. Observed
    # by hand (2026-12-06, 1.5.1: push a gauge, SIGTERM, start again with the same flags):
    # by default that file is written on shutdown and the next start serves the gauge
    # again; with a path of our own the same happens through that path; with the flag
    # empty nothing is written and the next start serves nothing. Empty, then: every
    # Pushgateway a test starts begins with no metrics, whatever ran before it.
    args = [binary, f"--web.listen-address={LOOPBACK}:{port}", "--persistence.file="]
    with _running("pushgateway", args, port, directory) as server:
        yield server


@contextlib.contextmanager
def prometheus(tmp_path: Path, scrape_port: int) -> Iterator[Proxy]:
    """prometheus scraping 127.0.0.1:scrape_port every second, TSDB in ``tmp_path``."""
    # honor_labels: the pushed job and instance stay, as a Pushgateway scrape must have it.
    config = (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n"
        f"    static_configs:\n      - targets: ['{LOOPBACK}:{scrape_port}']\n"
    )
    with prometheus_with(tmp_path, config) as server:
        yield server


@contextlib.contextmanager
def prometheus_with(tmp_path: Path, config_text: str) -> Iterator[Proxy]:
    """prometheus with this configuration (YAML text), TSDB in ``tmp_path``."""
    binary = require_binary("prometheus")
    directory = tmp_path / f"prometheus-{time.monotonic_ns()}"
    directory.mkdir(parents=True)
    port = free_port()
    config = directory / "prometheus.yml"
    config.write_text(config_text)
    args = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'tsdb'}",
        f"--web.listen-address={LOOPBACK}:{port}",
    ]
    with _running("prometheus", args, port, directory) as server:
        yield server


def get_json(url: str) -> Any:
    # A loopback URL the test built: no proxy, whatever the environment says.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(url, timeout=5) as response:
        return json.load(response)


def query(server: Proxy, promql: str) -> list[dict[str, Any]]:
    """The instant-query result vector of ``promql``."""
    body = get_json(server.url + "/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
    assert body["status"] == "success", body
    return list(body["data"]["result"])


def wait_for_series(server: Proxy, promql: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + FIRST_SCRAPE_TIMEOUT_S
    while True:
        found = query(server, promql)
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"{promql}: no series in Prometheus after {FIRST_SCRAPE_TIMEOUT_S:g} s")
        time.sleep(0.2)
