"""Facts compared between two documents (core/change/facts.py, documents.py): pure
parsing of run documents edited in the test."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from promptpath.core.change import compare_facts, runs_of, schema_of
from promptpath.core.change.facts import VALUE_MAX

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sample-run.json"


def _run() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(SAMPLE.read_text())
    return doc


def _names(changes: list[Any]) -> list[str]:
    return [c.name for c in changes]


def test_the_same_document_twice_has_no_fact_change() -> None:
    assert compare_facts(_run(), _run()) == []


def test_a_new_certificate_issuer_is_a_warning_naming_interception() -> None:
    after = _run()
    after["tls"]["cert"]["issuer"] = "CN=Corp Inspection CA,O=Example Corp"
    [change] = compare_facts(_run(), after)
    assert change.name == "cert_issuer" and change.severity == "warn"
    assert change.before == ("CN=promptpath test CA,O=promptpath",)
    assert change.new == ("CN=Corp Inspection CA,O=Example Corp",)
    assert "TLS interception" in change.note


def test_a_via_header_that_appears_is_a_proxy_joining_the_path() -> None:
    after = _run()
    after["response_headers"]["via"] = "1.1 squid"
    [change] = compare_facts(_run(), after)
    assert (change.name, change.before, change.after) == ("via", ("none",), ("1.1 squid",))
    assert change.severity == "warn"
    before = copy.deepcopy(after)
    after["response_headers"]["via"] = "1.1 varnish"
    assert compare_facts(before, after)[0].after == ("1.1 varnish",)


def test_address_family_http_version_and_alpn_changes_are_each_reported() -> None:
    after = _run()
    after["address"] = {"ip": "::1", "port": 46315, "family": "ipv6"}
    after["http_version"] = "HTTP/1.1"
    after["tls"]["alpn"] = "http/1.1"
    assert _names(compare_facts(_run(), after)) == ["address", "family", "http_version", "alpn"]


def test_a_field_an_older_document_lacks_is_skipped_not_called_a_change() -> None:
    after = _run()
    after["server"]["edge_name"] = {"name": "FRA", "cdn": "cloudflare", "header": "cf-ray",
                                    "value": "x-FRA"}  # fmt: skip
    assert compare_facts(_run(), after) == []  # before has no server.edge_name at all
    before = copy.deepcopy(after)
    after["server"]["edge_name"] = {"name": "AMS", "cdn": "cloudflare", "header": "cf-ray",
                                    "value": "y-AMS"}  # fmt: skip
    [change] = compare_facts(before, after)
    assert (change.name, change.before, change.after) == (
        "edge", ("FRA (cloudflare)",), ("AMS (cloudflare)",))  # fmt: skip


def test_edge_headers_compare_by_location_not_by_their_per_request_value() -> None:
    before, after = _run(), _run()
    before["server"]["edge"] = [{"header": "cf-ray", "value": "8a1-FRA", "location": "FRA"}]
    after["server"]["edge"] = [{"header": "cf-ray", "value": "9b2-FRA", "location": "FRA"}]
    assert compare_facts(before, after) == []
    after["server"]["edge"][0]["location"] = "AMS"
    assert _names(compare_facts(before, after)) == ["edge_location"]


def test_a_probe_that_passed_and_now_fails_is_a_warning() -> None:
    before, after = _run(), _run()
    finding = {"probe": "buffering", "verdict": "pass", "summary": "", "evidence": {},
               "advice": []}  # fmt: skip
    before["findings"] = [finding]
    after["findings"] = [dict(finding, verdict="fail")]
    [change] = compare_facts(before, after)
    assert change.name == "finding.buffering" and change.severity == "warn"
    assert (change.before, change.after) == (("pass",), ("fail",))
    assert compare_facts(after, before)[0].severity == "info"


def test_series_compare_the_sets_of_values_their_runs_showed() -> None:
    a, b = _run(), _run()
    b["address"] = {"ip": "127.0.0.2", "port": 46315, "family": "ipv4"}
    series = {"schema": "promptpath.series/1", "runs": [a, b]}
    swapped = {"schema": "promptpath.series/1", "runs": [b, a]}
    assert compare_facts(series, swapped) == []
    [change] = compare_facts(series, [a, a, a])
    assert (change.before, change.after) == (("127.0.0.1", "127.0.0.2"), ("127.0.0.1",))


def test_a_failure_and_its_stage_is_a_fact() -> None:
    after = _run()
    after["error"] = {"stage": "tls", "kind": "tls", "message": "handshake failed"}
    [change] = compare_facts(_run(), after)
    assert change.name == "failure" and change.after == ("tls: tls",)


def test_dns_ttl_counting_down_is_no_change_but_a_new_ceiling_is() -> None:
    before, after = _run(), _run()
    before["dns"]["ttl"], after["dns"]["ttl"] = 300, 180
    assert compare_facts(before, after) == []
    after["dns"]["ttl"] = 3600
    [change] = compare_facts(before, after)
    assert change.name == "dns_ttl" and change.after == ("3600–3600",)


def test_values_are_bounded() -> None:
    after = _run()
    after["response_headers"]["server"] = "x" * 10_000
    [change] = compare_facts(_run(), after)
    assert len(change.after[0]) == VALUE_MAX


def test_documents_give_their_runs_and_refuse_anything_else() -> None:
    run = _run()
    assert runs_of(run) == [run]
    assert runs_of({"schema": "promptpath.series/1", "runs": [run, run]}) == [run, run]
    assert runs_of({"schema": "promptpath.compare/1", "results": [run, run]}) == [run, run]
    line = {"schema": "promptpath.watch/1", "seq": 1, "at": "2026-12-06T10:00:00.000Z", "run": run}
    assert runs_of([line, line]) == [run, run]
    assert schema_of(run) == "promptpath.run/1"
    assert schema_of({"schema": "promptpath.run/2"}) is None
    with pytest.raises(ValueError, match="not a promptpath document"):
        runs_of({"schema": "promptpath.run/2"})
