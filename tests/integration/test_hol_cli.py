"""The hol probe from the command line, on loopback: the stream as it comes (no canary),
its spend check before any packet, and the targets it does not judge."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.integration

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
CHAT = "/v1/chat/completions"


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    # 40 tokens at 50/s: streams of 0.8 s, enough arrivals for a measured cadence.
    with reference_server(
        tls=True,
        http3=True,
        tmp_path=tmp_path_factory.mktemp("hol"),
        extra_args=("--tokens", "40", "--rate", "50", "--ttft-ms", "0"),
    ) as server:
        yield server


def _finding(body: dict[str, Any]) -> dict[str, Any]:
    jsonschema.validate(body, SCHEMA)
    (finding,) = (f for f in body["findings"] if f["probe"] == "hol")
    return finding


def test_the_stream_as_it_comes_is_measured_on_all_three_groups(tls_server: RefServer) -> None:
    assert tls_server.ca is not None
    res = run_cli(
        "run",
        f"https://localhost:{tls_server.port}{CHAT}",
        "--cacert",
        tls_server.ca,
        "--probe",
        "hol",
        "--json",
    )
    finding = _finding(json.loads(res.stdout))
    ev = finding["evidence"]
    why = finding["summary"]
    # Loopback loses nothing: whatever stalls the machine makes, no finding of loss (20
    # runs, 10 of them beside four CPU-bound loops at load 4-5: pass each time, the file in
    # 5.1-11.5 s).
    assert finding["verdict"] == "pass" and ev["head_of_line"] is False, why
    assert ev["cadence_source"] == "measured" and 15 <= ev["cadence_ms"] <= 25, ev["cadence_ms"]
    assert ev["floor_ms"] == 10.0  # half a loopback round trip is far under the minimum
    shared, separate, http3 = ev["shared"], ev["separate"], ev["http3"]
    assert (shared["http_version"], shared["connections"]) == ("HTTP/2", 1), why
    assert (separate["http_version"], separate["connections"]) == ("HTTP/2", 4), why
    assert (http3["http_version"], http3["connections"]) == ("HTTP/3", 1), why
    assert shared["completed"] == separate["completed"] == http3["completed"] == 4
    assert "probe hol: do stalls on one HTTP/2 connection" in res.stderr
    assert "(cost: 12 requests, ≤768 tokens" in res.stderr


def test_above_the_spend_threshold_a_remote_target_needs_yes_before_any_packet() -> None:
    # Refused in the plan: the name is never resolved.
    url = f"https://api.example.invalid{CHAT}"
    res = run_cli("probe", url, "hol", "--hol-streams", "8")
    assert res.exit_code == ExitCode.USAGE
    assert "promptpath: probes (hol): ≤24 requests, ≤1,536 tokens to api.example.invalid" in (
        res.stderr
    )
    assert "add --yes to go ahead" in res.stderr
    body = json.loads(run_cli("probe", url, "hol", "--hol-streams", "8", "--json").stdout)
    assert body["error"]["stage"] == "config" and "add --yes" in body["error"]["message"]


def test_a_cleartext_target_without_http2_is_not_judged(tmp_path: Path) -> None:
    with reference_server(tls=False, tmp_path=tmp_path) as server:
        res = run_cli("run", f"http://127.0.0.1:{server.port}{CHAT}", "--probe", "hol", "--json")
    finding = _finding(json.loads(res.stdout))
    assert finding["verdict"] == "skip"
    assert "add --http 2" in finding["summary"]
