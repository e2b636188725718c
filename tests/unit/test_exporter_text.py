"""The exporter's answers as Prometheus text: a probe's (the textfile export's metrics plus
blackbox's and the cost guard's), and its own health; both read back by the official
client's parser."""

from __future__ import annotations

import json
from pathlib import Path

from promptpath.exporter.metrics import (
    REFUSALS,
    GuardState,
    Health,
    ProcessState,
    Served,
    health_text,
    probe_text,
)
from promptpath.exporter.probe import Outcome
from tests.helpers.exporterlab import samples

SAMPLE = json.loads((Path(__file__).parents[2] / "examples" / "sample-run.json").read_text())


def _outcome(**over: object) -> Outcome:
    given: dict[str, object] = {
        "report": SAMPLE,
        "success": True,
        "duration_s": 1.25,
        "deadline_s": 9.5,
        "timed_out_in": None,
        "failed_stage": None,
        "exit_code": 0,
    }
    given.update(over)
    return Outcome(**given)  # type: ignore[arg-type]


def test_a_probe_answer_has_blackboxs_metrics_beside_the_textfile_exports() -> None:
    findings = [{"probe": "buffering", "verdict": "fail", "summary": "held", "advice": []}]
    report = {**SAMPLE, "findings": findings}
    got = samples(probe_text(Served(outcome=_outcome(report=report), cached=True, age_s=12.5)))
    assert got["probe_success"] == [({}, 1.0)]
    assert got["probe_duration_seconds"] == [({}, 1.25)]
    assert got["promptpath_exporter_cached"] == [({}, 1.0)]
    assert got["promptpath_exporter_result_age_seconds"] == [({}, 12.5)]
    assert got["promptpath_exporter_deadline_seconds"] == [({}, 9.5)]
    assert got["promptpath_exporter_timed_out"] == [({"stage": ""}, 0.0)]
    assert (
        {"target": SAMPLE["target"]["url"], "quantile": "0.5"},
        SAMPLE["ttft_ms"]["from_start"] / 1000,
    ) in got["promptpath_ttft_seconds"]
    assert got["promptpath_finding"] == [
        ({"target": SAMPLE["target"]["url"], "probe": "buffering", "verdict": "fail"}, 1.0)
    ]


def test_a_timed_out_probe_names_the_stage_it_stalled_in() -> None:
    got = samples(
        probe_text(
            Served(
                outcome=_outcome(success=False, timed_out_in="first_token", exit_code=8),
                cached=False,
            )
        )
    )
    assert got["probe_success"] == [({}, 0.0)]
    assert got["promptpath_exporter_timed_out"] == [({"stage": "first_token"}, 1.0)]
    assert got["promptpath_exporter_cached"] == [({}, 0.0)]


def test_health_counts_each_outcome_and_shows_the_guard_and_the_process() -> None:
    health = Health()
    health.probed("chat", "prod", _outcome(duration_s=0.3))
    health.probed("chat", "prod", _outcome(duration_s=7.0, success=False))
    health.probed("chat", "prod", _outcome(duration_s=2.0, timed_out_in="wait"))
    health.cache_hits[("chat", "prod")] += 4
    health.refused["unknown_target"] += 2
    health.reloads["failure"] += 1
    health.last_reload_ok = False
    text = health_text(
        health,
        GuardState(in_flight=1, max_in_flight=4, budgets={"prod": (1000, 936)}),
        ProcessState(
            open_fds=12,
            max_fds=1024,
            resident_bytes=5 << 20,
            cpu_seconds=1.5,
            start_unix=1.7e9,
            tasks=5,
        ),
        version="9.9",
        pairs=[("prod", "chat"), ("prod", "path")],
    )
    got = samples(text)
    probes = {
        s[0]["result"]: s[1]
        for s in got["promptpath_exporter_probes_total"]
        if s[0]["module"] == "chat"
    }
    assert probes == {"success": 1.0, "failure": 1.0, "timeout": 1.0}
    # A pair that never ran has its counters at 0 from the start.
    untouched = [s for s in got["promptpath_exporter_probes_total"] if s[0]["module"] == "path"]
    assert sorted(s[0]["result"] for s in untouched) == ["failure", "success", "timeout"]
    assert {s[1] for s in untouched} == {0.0}
    assert got["promptpath_exporter_cache_hits_total"] == [
        ({"module": "chat", "target": "prod"}, 4.0),
        ({"module": "path", "target": "prod"}, 0.0),
    ]
    refused = {s[0]["reason"]: s[1] for s in got["promptpath_exporter_scrapes_refused_total"]}
    assert set(refused) == set(REFUSALS) and refused["unknown_target"] == 2
    buckets = {
        (s[0]["module"], s[0]["le"]): s[1]
        for s in got["promptpath_exporter_probe_duration_seconds_bucket"]
    }
    assert buckets[("chat", "0.5")] == 1 and buckets[("chat", "5")] == 2
    assert buckets[("chat", "+Inf")] == 3 and buckets[("path", "+Inf")] == 0
    assert got["promptpath_exporter_budget_tokens_left"] == [({"target": "prod"}, 936.0)]
    assert got["promptpath_exporter_config_last_reload_successful"] == [({}, 0.0)]
    assert got["process_open_fds"] == [({}, 12.0)]
    assert got["process_resident_memory_bytes"] == [({}, float(5 << 20))]
    assert got["promptpath_exporter_asyncio_tasks"] == [({}, 5.0)]


def test_health_shows_the_connections_open_and_each_reason_the_server_closed_one() -> None:
    from promptpath.exporter.http import CLOSE_REASONS, ConnectionStats

    stats = ConnectionStats(open=7)
    stats.closed["evicted"] += 3
    text = health_text(
        Health(),
        GuardState(in_flight=0, max_in_flight=4, budgets={}),
        ProcessState(
            open_fds=None, max_fds=None, resident_bytes=None, cpu_seconds=0, start_unix=0, tasks=1
        ),
        version="9.9",
        pairs=[("prod", "chat")],
        connections=stats,
    )
    got = samples(text)
    assert got["promptpath_exporter_http_connections"] == [({}, 7.0)]
    closed = {
        s[0]["reason"]: s[1] for s in got["promptpath_exporter_http_connections_closed_total"]
    }
    assert closed == {reason: 3.0 if reason == "evicted" else 0.0 for reason in CLOSE_REASONS}
