"""The metrics table (core/change/metrics.py): each path read from a real run document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from promptpath.core.change import METRICS, STAGES, metric, value_of, values_of

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample-run.json"
#: Fields other branches add to promptpath.run/1 (CONTRACTS.md §3), absent from older runs.
CONTRACT_FIELDS = {"rtt", "ttft_network_adjusted", "first_output_network_adjusted"}


def _run() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(SAMPLE.read_text())
    return doc


def test_every_metric_reads_the_sample_run_or_is_an_optional_field() -> None:
    run = _run()
    missing = {m.name for m in METRICS if value_of(m, run) is None}
    # The sample is a TCP run whose server named no time of its own.
    assert missing == CONTRACT_FIELDS | {"quic_handshake", "server_time"}
    assert value_of(metric("ttft"), run) == 362.692
    assert value_of(metric("first_token"), run) == 351.773
    assert value_of(metric("gap_p99"), run) == 26.041
    assert value_of(metric("coalesced"), run) == 0.0


def test_every_path_is_a_property_of_the_run_schema() -> None:
    schema = json.loads((ROOT / "promptpath" / "report" / "schema.json").read_text())
    props = schema["$defs"]["run"]["properties"]
    for item in METRICS:
        if item.name in CONTRACT_FIELDS:
            continue
        assert item.path[0] in props, item.name


def test_optional_fields_are_read_when_present() -> None:
    run = _run()
    run["rtt_ms"] = 12.5
    run["ttft_network_adjusted_ms"] = 350.0
    run["server"]["time"] = {"ms": 80.0, "header": "server-timing", "metric": "total"}
    assert value_of(metric("rtt"), run) == 12.5
    assert value_of(metric("ttft_network_adjusted"), run) == 350.0
    assert value_of(metric("server_time"), run) == 80.0


def test_non_numbers_and_failed_runs_give_no_value() -> None:
    run = _run()
    run["rtt_ms"] = True
    assert value_of(metric("rtt"), run) is None
    run["tokens"]["events"] = 0
    assert value_of(metric("coalesced"), run) is None
    failed = _run()
    failed["error"] = {"stage": "first_token", "kind": "timeout", "message": "x"}
    assert values_of(metric("ttft"), [_run(), failed, _run()]) == [362.692, 362.692]


def test_floors_take_the_larger_of_the_absolute_and_relative_part() -> None:
    ttft = metric("ttft")
    assert ttft.floor(100.0) == 50.0
    assert ttft.floor(1000.0) == pytest.approx(150.0)
    assert ttft.single_floor(100.0) == 150.0
    assert ttft.single_floor(1000.0) == pytest.approx(500.0)
    assert not metric("tokens_per_s").higher_is_worse
    assert STAGES == (
        "dns", "connect", "tls", "quic_handshake", "request", "wait", "first_token", "streaming",
    )  # fmt: skip
    assert metric("coalesced").where == "tokens.coalesced / tokens.events"


def test_the_docs_floors_table_is_the_codes() -> None:
    page = (ROOT / "docs" / "diff-and-watch.md").read_text()
    for item in METRICS:
        rel = f"{item.floor_rel:.0%}" if item.floor_rel else "—"
        worse = "higher" if item.higher_is_worse else "lower"
        row = f"| `{item.name}` | `{item.where}` | {item.unit} | {item.floor_abs:g} | {rel} |"
        row += f" {worse} |"
        assert row in page, row
