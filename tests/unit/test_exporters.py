"""The export renderers and file writing, on hand-built reports.

Series input follows the contract of issue 11 (``promptpath.series/1``: runs, aggregate,
failures, error_rate, slo, exit_code), built here by hand from the sample run so these
tests do not wait for the series code.
"""

from __future__ import annotations

import base64
import copy
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from haralyzer import HarParser
from junitparser import Error, Failure, JUnitXml, Skipped
from prometheus_client.parser import text_string_to_metric_families

from promptpath.core.stats import summarize
from promptpath.outputs.deliver import check_writable, push_url, write_atomic
from promptpath.report import har, junit, prometheus
from tests.helpers.har12 import HAR_1_2

ROOT = Path(__file__).parents[2]
SAMPLE: dict[str, Any] = json.loads((ROOT / "examples/sample-run.json").read_text())


def sample_run(ttft_ms: float, **changes: Any) -> dict[str, Any]:
    run = copy.deepcopy(SAMPLE)
    run["started_at"] = "2026-11-30T12:00:00.000+00:00"
    run["ttft_ms"]["from_start"] = ttft_ms
    run.update(changes)
    return run


def series(ttfts: list[float], *, failed_at: int | None = None) -> dict[str, Any]:
    runs = [sample_run(t) for t in ttfts]
    if failed_at is not None:
        runs[failed_at].update(
            ok=False,
            exit_code=8,
            stages_ms={"dns": 1.0, "connect": 1.0, "tls": 4.0, "request": 1.0},
            ttft_ms={"from_start": None, "from_request": None},
            error={"stage": "wait", "kind": "timeout", "message": "no answer in 5 s"},
        )
    good = [r["ttft_ms"]["from_start"] for r in runs if r["ttft_ms"]["from_start"] is not None]
    s = summarize(good)
    assert s is not None
    return {
        "schema": "promptpath.series/1",
        "target": SAMPLE["target"]["url"],
        "plan": {"count": len(runs), "interval_s": 0, "reuse": False, "concurrency": 1},
        "runs": runs,
        "aggregate": {
            "ttft_ms": {
                "n": s.count,
                "min": s.min,
                "p50": s.p50,
                "p95": s.p95,
                "p99": s.p99,
                "max": s.max,
                "unit": "ms",
            }
        },
        "failures": {} if failed_at is None else {"wait": 1},
        "error_rate": 0.0 if failed_at is None else 1 / len(runs),
        "slo": [
            {
                "expr": "ttft_p95<300ms",
                "metric": "ttft_p95",
                "op": "<",
                "threshold": 300,
                "value": s.p95,
                "ok": s.p95 < 300,
            }
        ],
        "exit_code": 9 if s.p95 >= 300 else 0,
    }


def parse(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_series_quantiles_come_from_the_aggregate_in_seconds() -> None:
    report = series([100.0, 200.0, 300.0, 400.0, 500.0])
    found = parse(prometheus.render(report))
    target = ("target", SAMPLE["target"]["url"])
    for quantile, ms in (("0", 100), ("0.5", 300), ("0.95", 500), ("1", 500)):
        key = ("promptpath_ttft_seconds", frozenset({target, ("quantile", quantile)}))
        assert found[key] == pytest.approx(ms / 1000)
    assert found[("promptpath_ttft_seconds_count", frozenset({target}))] == 5
    assert found[("promptpath_ttft_seconds_sum", frozenset({target}))] == pytest.approx(1.5)
    assert found[("promptpath_runs", frozenset({target}))] == 5
    slo = frozenset({target, ("slo", "ttft_p95<300ms"), ("metric", "ttft_p95")})
    assert found[("promptpath_slo_ok", slo)] == 0
    assert found[("promptpath_exit_code", frozenset({target}))] == 9


def test_series_failures_and_error_rate_are_exported_by_stage() -> None:
    report = series([100.0, 200.0, 300.0, 400.0], failed_at=2)
    found = parse(prometheus.render(report, labels={"region": "eu"}))
    base = {("target", SAMPLE["target"]["url"]), ("region", "eu")}
    assert found[("promptpath_failed_runs", frozenset(base | {("stage", "wait")}))] == 1
    assert found[("promptpath_error_rate", frozenset(base))] == 0.25
    # The failed run has no TTFT: three values counted, not four.
    assert found[("promptpath_ttft_seconds_count", frozenset(base))] == 3


def test_a_percentile_the_series_left_out_for_too_few_runs_is_not_exported() -> None:
    report = series([100.0, 200.0, 300.0])
    report["aggregate"]["ttft_ms"]["p99"] = None  # three runs say nothing about a p99
    report["error_rate"] = 0.5  # the series' own figure is what is exported
    found = parse(prometheus.render(report))
    quantiles = {dict(k).get("quantile") for n, k in found if n == "promptpath_ttft_seconds"}
    assert quantiles == {"0", "0.5", "0.95", "1"}
    assert found[("promptpath_error_rate", frozenset({("target", SAMPLE["target"]["url"])}))] == 0.5


def test_a_series_gets_a_case_per_stage_of_each_run_and_one_per_slo() -> None:
    report = series([100.0, 200.0, 300.0, 400.0], failed_at=1)
    xml = JUnitXml.fromstring(junit.render(report))
    (suite,) = list(xml)
    cases = list(suite)
    classes = {c.classname for c in cases}
    assert {"run 1.stage", "run 2.stage", "run 4.stage", "slo"} <= classes
    failed = {(c.classname, c.name): c.result[0] for c in cases if not c.is_passed}
    assert set(failed) == {("run 2.stage", "wait"), ("slo", "ttft_p95<300ms")}
    assert isinstance(failed[("run 2.stage", "wait")], Failure)
    assert failed[("run 2.stage", "wait")].message == "no answer in 5 s"
    slo_message = failed[("slo", "ttft_p95<300ms")].message
    assert "ttft_p95 = 400" in slo_message and "< 300" in slo_message
    assert suite.failures == 2 and suite.tests == len(cases)


def test_a_series_har_has_an_entry_per_run_and_keeps_the_structure() -> None:
    report = series([100.0, 200.0, 300.0])
    data = har.render(report)
    jsonschema.validate(data, HAR_1_2)
    entries = HarParser(data).pages[0].entries
    assert [e.raw_entry["_promptpath"]["run"] for e in entries] == [0, 1, 2]
    ttfts = [e.raw_entry["_promptpath"]["ttft_ms"]["from_start"] for e in entries]
    assert ttfts == [100.0, 200.0, 300.0]


def test_the_warm_request_is_a_second_har_entry_and_junit_class() -> None:
    run = sample_run(120.0)
    warm = {k: copy.deepcopy(run[k]) for k in ("stages_ms", "milestones_ms", "ttft_ms", "status")}
    warm["stages_ms"] = {"request": 0.5, "wait": 3.0, "first_token": 100.0, "streaming": 900.0}
    run["warm"] = {**warm, "reused_connection": True, "started_at": run["started_at"]}
    entries = har.render(run)["log"]["entries"]
    assert len(entries) == 2
    # A reused connection had no DNS, connect or TLS: HAR's "does not apply".
    assert {entries[1]["timings"][k] for k in ("dns", "connect", "ssl")} == {-1}
    suite = next(iter(JUnitXml.fromstring(junit.render(run))))
    assert {c.name for c in suite if c.classname == "warm.stage"} == set(warm["stages_ms"])


def test_a_warn_finding_is_a_junit_failure_only_under_fail_on_warn() -> None:
    run = sample_run(120.0)
    run["findings"] = [
        {"probe": "buffering", "verdict": "warn", "summary": "held 4 KiB", "evidence": {}},
        {"probe": "idle-timeout", "verdict": "skip", "summary": "no pause", "evidence": {}},
        {"probe": "dns-cache", "verdict": "error", "summary": "probe crashed", "evidence": {}},
    ]
    for fail_on, warn_fails in (("fail", False), ("warn", True)):
        suite = next(iter(JUnitXml.fromstring(junit.render(run, fail_on=fail_on))))
        by_name = {c.name: c for c in suite if c.classname == "probe"}
        assert by_name["buffering"].is_passed is not warn_fails
        assert isinstance(by_name["idle-timeout"].result[0], Skipped)
        assert isinstance(by_name["dns-cache"].result[0], Error)


def test_control_characters_in_an_error_message_still_give_well_formed_xml() -> None:
    run = sample_run(
        120.0, error={"stage": "stream", "kind": "error_event", "message": "bad\x00\x1b[0m <&>"}
    )
    suite = next(iter(JUnitXml.fromstring(junit.render(run))))
    (failed,) = [c for c in suite if not c.is_passed]
    assert failed.result[0].message == "bad\ufffd\ufffd[0m <&>"


@pytest.mark.parametrize("raw", ['a "b" c', "back\\slash", "two\nlines", "ünï €", ""])
def test_label_values_survive_the_text_format(raw: str) -> None:
    found = parse(prometheus.render(sample_run(100.0), labels={"who": raw}))
    assert {dict(labels).get("who") for _, labels in found} == {raw}


def test_write_atomic_replaces_the_file_readably_and_leaves_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "promptpath.prom"
    path.write_text("old\n")
    umask = os.umask(0o022)
    try:
        write_atomic(path, "new\n")
    finally:
        os.umask(umask)
    assert path.read_text() == "new\n"
    assert path.stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["promptpath.prom"]


def test_check_writable_leaves_nothing_behind(tmp_path: Path) -> None:
    check_writable(tmp_path / "out.xml", "--junit")
    assert list(tmp_path.iterdir()) == []


def test_push_url_groups_by_instance_target_and_labels_with_base64_for_slashes() -> None:
    url = push_url(
        "http://127.0.0.1:9091",
        {"instance": "runner-1", "region": "eu/west"},
        "https://api.example/v1/chat/completions",
    )
    prefix = "http://127.0.0.1:9091/metrics/job/promptpath/instance/runner-1/region@base64/"
    assert url.startswith(prefix)
    encoded = url[len(prefix) :].split("/")[0]
    assert base64.urlsafe_b64decode(encoded) == b"eu/west"
    assert "/target@base64/" in url


def test_ttft_less_one_round_trip_is_exported_beside_ttft_when_the_report_has_it() -> None:
    found = parse(prometheus.render(sample_run(100.0, ttft_network_adjusted_ms=61.5)))
    medians = [
        value
        for (name, labels), value in found.items()
        if name == "promptpath_ttft_network_adjusted_seconds" and ("quantile", "0.5") in labels
    ]
    assert medians == [0.0615]
    older = parse(prometheus.render(sample_run(100.0)))  # sample-run.json predates the field
    assert not any(name == "promptpath_ttft_network_adjusted_seconds" for name, _ in older)
