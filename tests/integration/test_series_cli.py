"""Repeats and SLO thresholds through the real CLI, over real loopback sockets.

The reference endpoint injects the time to first token (``--ttft-ms``) and streams three
tokens at once (``--rate 0``), so a run lasts about its TTFT and 20 runs a few seconds.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import CliResult, run_cli
from tests.helpers.refserver import RefServer, reference_server
from tests.integration.test_interrupt import _interrupt_mid_stream

REPORT = Path(__file__).parents[2] / "promptpath/report"
RUN_SCHEMA = json.loads((REPORT / "schema.json").read_text())
SERIES_SCHEMA = json.loads((REPORT / "series_schema.json").read_text())
FAST = ("-H", "x-promptpath-ttft-ms: 0")


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    """First token after 300 ms, then three tokens in one go."""
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("series"),
        extra_args=["--ttft-ms", "300", "--rate", "0", "--tokens", "3"],
    ) as server:
        yield server


def run(server: RefServer, *args: str, environ: dict[str, str] | None = None) -> CliResult:
    url = f"https://localhost:{server.port}/v1/chat/completions"
    return run_cli("run", url, "--cacert", str(server.ca), *args, environ=environ)


def validate_series(body: dict[str, Any]) -> None:
    run_schema = Resource.from_contents(RUN_SCHEMA)
    jsonschema.Draft202012Validator(
        SERIES_SCHEMA, registry=Registry().with_resource(run_schema.id() or "", run_schema)
    ).validate(body)


def test_twenty_runs_breaching_a_ttft_p95_slo_exit_9_naming_the_metric(slow: RefServer) -> None:
    res = run(slow, "--count", "20", "--slo", "ttft_p95<100ms")
    assert res.exit_code == ExitCode.SLO, res.stderr
    assert "promptpath: series: 20 requests × ≤64 tokens = ≤1,280 tokens to loopback" in res.stderr
    breach = next(line for line in res.stderr.splitlines() if line.startswith("SLO ttft_p95"))
    assert breach.startswith("SLO ttft_p95 < 100.0 ms: BREACHED (measured ")
    measured = float(breach.split("measured ")[1].split(" ms")[0])
    assert measured >= 300  # the injected delay is a floor: nothing answers sooner
    # The verdict line, last, names the SLO and what was measured before the runs.
    last = res.stderr.rstrip("\n").splitlines()[-1]
    lead, runs = last.split(" — ", 1)
    assert lead.startswith("FAILED: ttft_p95 < 100ms breached (") and lead.endswith(" ms)")
    assert abs(float(lead.split("(")[1].split(" ms")[0]) - measured) <= 0.5
    assert runs.startswith("20 of 20 runs ok") and runs.endswith("(exit 9)")


def test_twenty_runs_within_the_slo_exit_0_with_a_series_object(slow: RefServer) -> None:
    res = run(slow, "--count", "20", "--slo", "ttft_p95<1000ms", "--json")
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    validate_series(body)
    assert body["schema"] == "promptpath.series/1" and body["exit_code"] == 0
    assert len(body["runs"]) == 20 and all(r["schema"] == "promptpath.run/1" for r in body["runs"])
    # Fresh connections: every run has its own handshake.
    assert not any(r["reused_connection"] for r in body["runs"])
    ttft = body["aggregate"]["ttft_ms"]
    assert ttft["n"] == 20 and 300 <= ttft["min"] <= ttft["p50"] <= ttft["p95"] <= ttft["max"]
    assert ttft["too_few_for"] == ["p99"]  # 20 runs carry a p95, not a p99
    assert body["aggregate"]["tls_ms"]["n"] == 20
    assert body["failures"] == {} and body["error_rate"] == 0
    [slo] = body["slo"]
    assert slo["metric"] == "ttft_p95" and slo["ok"] is True and slo["value"] == ttft["p95"]


def test_reuse_keeps_one_connection_for_every_run(slow: RefServer) -> None:
    res = run(slow, "--count", "3", "--reuse", "--interval", "0.05", "--json", *FAST)
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    validate_series(body)
    assert [r["reused_connection"] for r in body["runs"]] == [False, True, True]
    assert body["plan"] == {
        "count": 3,
        "interval_s": 0.05,
        "reuse": True,
        "concurrency": [1],
        "connections": None,
    }
    # Only the first run opened the connection: one sample of the handshake, three of TTFT.
    assert body["aggregate"]["tls_ms"]["n"] == 1 and body["aggregate"]["ttft_ms"]["n"] == 3


def test_failed_runs_are_counted_by_stage_and_set_the_exit_code(slow: RefServer) -> None:
    res = run(slow, "--count", "3", "--json", *FAST, "-H", "x-promptpath-status: 503")
    assert res.exit_code == ExitCode.HTTP_STATUS, res.stderr
    body = json.loads(res.stdout)
    validate_series(body)
    assert body["failures"] == {"response": 3} and body["error_rate"] == 1
    assert body["aggregate"] == {}
    assert "failures: 3 of 3 runs (100.0%): response 3" in res.stderr


def test_a_single_run_is_judged_against_its_own_ttft(slow: RefServer) -> None:
    res = run(slow, "--slo", "ttft_p95<100ms", "--slo", "tls_days_left>=14", "--json")
    assert res.exit_code == ExitCode.SLO, res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, RUN_SCHEMA)
    ttft, days = body["slo"]
    assert ttft["ok"] is False and ttft["value"] == body["ttft_ms"]["from_start"]
    # The reference endpoint's certificate is valid for 90 days (serve --cert-days).
    assert days["ok"] is True and days["value"] == body["tls"]["cert"]["days_left"]
    assert "SLO ttft_p95 < 100.0 ms: BREACHED" in res.stderr


def test_a_failed_single_run_exits_with_its_stage_code_before_an_slo(slow: RefServer) -> None:
    res = run(slow, "--slo", "ttft_p95<100ms", *FAST, "-H", "x-promptpath-status: 500")
    assert res.exit_code == ExitCode.HTTP_STATUS, res.stderr
    assert "SLO ttft_p95 < 100.0 ms: BREACHED (not measured)" in res.stderr


def test_a_profiles_slo_table_applies_and_the_command_line_wins(
    slow: RefServer, tmp_path: Path
) -> None:
    config = tmp_path / "config.toml"
    config.write_text(
        "[profiles.ref]\n"
        f'url = "https://localhost:{slow.port}/v1/chat/completions"\n'
        f'cacert = "{slow.ca}"\n'
        "[profiles.ref.slo]\n"
        'ttft_p95 = "<100ms"\n'
        'error_rate = ["<=5%"]\n'
    )
    environ = {"PROMPTPATH_CONFIG": str(config)}
    breached = run_cli("run", "ref", "--json", environ=environ)
    assert breached.exit_code == ExitCode.SLO, breached.stderr
    assert [s["expr"] for s in json.loads(breached.stdout)["slo"]] == [
        "ttft_p95<100ms",
        "error_rate<=5%",
    ]
    held = run_cli("run", "ref", "--slo", "ttft_p95<2s", environ=environ)
    assert held.exit_code == 0, held.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("--count", "0"), "promptpath: --count must be at least 1, got 0"),
        (("--count", "3", "--interval", "-1"), "promptpath: --interval must be 0 or more seconds"),
        (
            ("--count", "4", "--concurrency", "8"),
            "promptpath: --concurrency 8 is more than --count 4",
        ),
        (("--slo", "ttft_p59<100ms"), "unknown metric 'ttft_p59': did you mean ttft_p99?"),
        (("--slo", "ttft_p95<100h"), "unit 'h': ttft_p95 takes ms or s"),
        (("--count", "3", "--warm"), "a series (--count, --concurrency) traces prompts only"),
    ],
)
def test_bad_series_input_is_a_usage_error_before_anything_is_sent(
    args: tuple[str, ...], line: str
) -> None:
    # Port 9 (discard) on loopback: nothing listens, and nothing is sent anyway.
    res = run_cli("run", "https://127.0.0.1:9/v1/chat/completions", *args, "--json")
    assert res.exit_code == ExitCode.USAGE
    assert line in res.stderr and "series:" not in res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, RUN_SCHEMA)
    assert body["error"]["stage"] == "config"


def test_a_costly_series_to_a_remote_target_needs_yes() -> None:
    # Refused before any connection: the name is never even resolved.
    res = run_cli("run", "https://api.example.invalid/v1/chat/completions", "--count", "21")
    assert res.exit_code == ExitCode.USAGE
    assert "series: 21 requests × ≤64 tokens = ≤1,344 tokens to api.example.invalid" in res.stderr
    assert "above what a series spends without asking (20 requests or 20,000 tokens)" in res.stderr
    assert "add --yes" in res.stderr


def test_a_stop_signal_reports_the_series_so_far_with_the_cut_run(tmp_path: Path) -> None:
    code, out, err = _interrupt_mid_stream(tmp_path, ["--count", "3"], signal.SIGTERM)
    assert code == 143 and "promptpath: interrupted (SIGTERM)" in err
    body = json.loads(out)
    validate_series(body)
    assert body["exit_code"] == 143 and body["ok"] is False
    [cut] = body["runs"]  # the first run was waiting for its first token; none began after
    assert cut["error"]["kind"] == "interrupted" and cut["error"]["stage"] == "first_token"
    assert body["failures"] == {"first_token": 1}


def test_a_concurrency_sweep_shares_one_http2_connection_per_level(slow: RefServer) -> None:
    # End to end through the CLI into the load engine: 8 prompts one at a time, then 4 in
    # flight, over HTTP/2 (ALPN h2 from the reference endpoint).
    res = run(slow, "--count", "8", "--concurrency", "1,4", "--http", "2", "--json", *FAST)
    assert res.exit_code == ExitCode.OK, res.stderr
    body = json.loads(res.stdout)
    validate_series(body)
    assert [level["concurrency"] for level in body["sweep"]] == [1, 4]
    assert [level["runs"] for level in body["sweep"]] == [8, 8]
    assert len(body["runs"]) == 16
    for i, level in enumerate(body["sweep"]):
        runs = body["runs"][8 * i : 8 * (i + 1)]
        assert all(r["ok"] and r["http_version"] == "HTTP/2" for r in runs)
        connected = [r for r in runs if "connect" in (r.get("stages_ms") or {})]
        # One at a time is a plain series (a fresh connection each run); at 4 in flight
        # the load engine multiplexes every stream on one HTTP/2 connection.
        assert len(connected) == (8 if level["concurrency"] == 1 else 1)
        assert level["aggregate"]["ttft_ms"]["n"] == 8


def test_load_mode_over_http11_opens_a_connection_per_stream_by_default(slow: RefServer) -> None:
    # Without --connections, HTTP/1.1 gets one connection per stream in flight (not one
    # connection that the other streams queue for).
    res = run(slow, "--count", "4", "--concurrency", "4", "--http", "1.1", "--json", *FAST)
    assert res.exit_code == ExitCode.OK, res.stderr
    runs = json.loads(res.stdout)["runs"]
    assert sum("connect" in r["stages_ms"] for r in runs) == 4
    assert not any("queue" in r["stages_ms"] for r in runs)
