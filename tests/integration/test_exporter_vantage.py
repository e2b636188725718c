"""The exporter's fleet labels over real sockets: a probe of the reference endpoint carries
the config's vantage and --label's labels on every sample, the edge on promptpath_edge,
and a reload's new vantage."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from tests.helpers.cli import run_cli
from tests.helpers.exporterlab import exporter, samples
from tests.helpers.refserver import RefServer

FAST = '{ "x-promptpath-tokens" = "3", "x-promptpath-rate" = "0" }'


def _config(ref: RefServer, vantage: str) -> str:
    return f"""
[exporter]
min_interval_s = 0
vantage = "{vantage}"

[modules.chat]
provider = "openai"
max_tokens = 3
timeout = 10
headers = {FAST}

[targets.local]
url = "{ref.url}/v1/chat/completions"
cacert = "{ref.ca}"
"""


def test_every_sample_carries_the_vantage_and_the_edge_has_its_own_metric(
    refserver_tls: RefServer, tmp_path: Path
) -> None:
    with exporter(
        tmp_path, _config(refserver_tls, "lab-a"), args=("--label", "site=office")
    ) as running:
        status, body, _ = running.get("/probe?target=local&module=chat")
        assert status == 200, body
        got = samples(body)
        assert got["probe_success"] == [({"vantage": "lab-a", "site": "office"}, 1.0)]
        for name, found in got.items():
            assert all(s["vantage"] == "lab-a" and s["site"] == "office" for s, _ in found), name
        # The reference endpoint sends no CDN's edge header: the edge is not named.
        ((edge, one),) = got["promptpath_edge"]
        assert edge["edge"] == "unknown" and edge["cdn"] == "unknown" and one == 1.0
        metrics = samples(running.get("/metrics")[1])
        for name, found in metrics.items():
            assert all(s.get("vantage") == "lab-a" for s, _ in found), name

        # A reload reads the config's vantage again; --label's stay.
        running.config.write_text(_config(refserver_tls, "lab-b"))
        running.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while not [e for e in running.log() if e["event"] == "reload"]:
            assert time.monotonic() < deadline, running.stderr.read_text()
            time.sleep(0.05)
        got = samples(running.get("/probe?target=local&module=chat")[1])
        assert got["probe_success"] == [({"vantage": "lab-b", "site": "office"}, 1.0)]


def test_label_vantage_wins_over_the_configs(refserver_tls: RefServer, tmp_path: Path) -> None:
    with exporter(
        tmp_path, _config(refserver_tls, "from-config"), args=("--label", "vantage=cli")
    ) as running:
        got = samples(running.get("/probe?target=local&module=chat")[1])
    assert got["probe_success"] == [({"vantage": "cli"}, 1.0)]


def test_a_label_the_exporter_sets_itself_is_refused_before_it_serves(tmp_path: Path) -> None:
    config = tmp_path / "exporter.toml"
    config.write_text("")
    result = run_cli("exporter", "--config", str(config), "--label", "edge=FRA")
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "promptpath: exporter: --label edge: the exporter sets that label"
    )
