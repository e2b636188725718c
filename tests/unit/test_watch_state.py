"""watch's pure parts: the rolling state and its events, the history file, the path's hops."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from promptpath.core.errors import UsageError
from promptpath.modes.watch.history import (
    HistoryWriter,
    entry_of,
    line_of,
    read_tail,
    utc_stamp,
)
from promptpath.modes.watch.hops import PathHops
from promptpath.modes.watch.state import EVENTS_KEPT, WatchState
from promptpath.server.behaviour import Behaviour, BehaviourError
from promptpath.server.runtime import changed_defaults, client_is_loopback


def doc(first_token: float = 100.0, **changes: Any) -> dict[str, Any]:
    """A run document with the fields watch reads (as run --json prints them)."""
    body: dict[str, Any] = {
        "schema": "promptpath.run/1",
        "ok": True,
        "error": None,
        "address": {"ip": "192.0.2.10", "port": 443, "family": "ipv4"},
        "http_version": "HTTP/2",
        "tls": {"cert": {"issuer": "CN=Real CA"}},
        "server": {"edge": []},
        "response_headers": {},
        "stages_ms": {
            "dns": 1.0,
            "connect": 10.0,
            "tls": 20.0,
            "request": 1.0,
            "wait": 5.0,
            "first_token": first_token,
            "streaming": 200.0,
        },
        "ttft_ms": {"from_start": 37.0 + first_token},
        "tokens": {"gaps_ms": {"p50": 20.0, "p95": 25.0}, "per_second": 50.0},
    }
    for path, value in changes.items():
        node = body
        *parents, leaf = path.split("__")
        for key in parents:
            node = node[key]
        node[leaf] = value
    return body


def failed(stage: str = "connect") -> dict[str, Any]:
    return {
        "schema": "promptpath.run/1",
        "ok": False,
        "address": None,
        "tls": None,
        "error": {"stage": stage, "kind": "refused", "message": "connection refused"},
        "stages_ms": {"dns": 1.0},
    }


def feed(state: WatchState, docs: list[dict[str, Any]], start: int = 1) -> list[Any]:
    out = []
    for i, d in enumerate(docs, start):
        out += state.feed(d, seq=i, at="2026-12-06T21:00:00.000Z")
    return out


def test_a_stage_that_moves_is_one_event_on_the_second_trace_out() -> None:
    state = WatchState(window=20)
    assert feed(state, [doc(100.0 + (i % 3)) for i in range(20)]) == []
    events = feed(state, [doc(400.0), doc(405.0)], start=21)
    band = [e for e in events if e.kind == "band"]
    assert [(e.seq, e.subject) for e in band] == [(22, "first_token"), (22, "ttft")]
    assert band[0].message.startswith("first token above its band for 2 traces: 400.0, 405.0 ms")
    rows = {r.metric.name: r for r in state.row_stats()}
    assert rows["first_token"].state == 1 and rows["first_token"].worst == 405.0
    assert rows["dns"].state == 0


def test_changed_facts_are_events_and_a_failed_trace_changes_none() -> None:
    state = WatchState()
    feed(state, [doc()])
    assert feed(state, [failed()], start=2)[0].kind == "failure"  # and no fact event
    events = feed(
        state,
        [doc(tls__cert={"issuer": "CN=Corp Inspection CA"}, response_headers={"via": "1.1 squid"})],
        start=3,
    )
    facts = {e.subject: e.message for e in events if e.kind == "fact"}
    assert facts == {
        "cert_issuer": "certificate issuer changed: CN=Real CA → CN=Corp Inspection CA (a new"
        " certificate issuer is TLS interception (a middlebox re-signing the site) unless the"
        " site changed its CA: check the issuer)",
        "via": "Via (proxy hops) changed: none → 1.1 squid (a proxy joined, left or changed on"
        " the path)",
    }
    moved = feed(
        state,
        [
            doc(
                address={"ip": "2001:db8::1", "family": "ipv6"},
                http_version="HTTP/1.1",
                tls__cert={"issuer": "CN=Corp Inspection CA"},
                response_headers={"via": "1.1 squid"},
            )
        ],
        start=4,
    )
    assert {e.subject for e in moved} == {"address", "family", "http_version"}
    assert moved[0].message == "address used changed: 192.0.2.10 → 2001:db8::1"


def test_failures_count_against_their_stage_row() -> None:
    state = WatchState()
    events = feed(state, [doc(), failed("tls"), failed("tls"), doc()])
    assert [(e.seq, e.subject) for e in events] == [(2, "tls"), (3, "tls")]
    assert events[0].message == "trace failed in stage tls: connection refused"
    rows = {r.metric.name: r for r in state.row_stats()}
    assert rows["tls"].failures == 2 and rows["connect"].failures == 0
    assert state.traces == 4 and state.failed == 2


def test_a_probe_that_starts_failing_is_an_event_once_and_again_when_it_recovers() -> None:
    state = WatchState()
    at = "2026-12-06T21:00:00.000Z"
    tls = {"probe": "tls", "verdict": "pass", "summary": "fine"}
    assert state.probe_verdicts([tls], seq=1, at=at) == []
    bad = {"probe": "tls", "verdict": "fail", "summary": "certificate expires in 2 days"}
    started = state.probe_verdicts([bad], seq=21, at=at)
    assert [e.message for e in started] == ["probe tls fails: certificate expires in 2 days"]
    assert state.probe_verdicts([bad], seq=41, at=at) == []
    assert [e.message for e in state.probe_verdicts([tls], seq=61, at=at)] == [
        "probe tls passes again (pass)"
    ]


def test_history_seeds_quietly_and_reset_forgets_the_statistics() -> None:
    state = WatchState(window=10)
    docs = [doc(100.0)] * 10 + [doc(500.0)] * 2
    assert [e for d in docs for e in state.feed(d, seq=1, at="x", quiet=True)] == []
    assert state.traces == 12 and state.events_total == 0
    state.reset()
    assert state.traces == 0 and state.row_stats() == []


def test_memory_is_bounded_by_the_window_and_the_event_cap() -> None:
    state = WatchState(window=30)
    for i in range(3000):
        state.feed(failed() if i % 2 else doc(100.0 + (i % 7)), seq=i, at="x")
    assert len(state.events) == EVENTS_KEPT and state.events_total == 1500
    assert all(len(r.values) <= 30 for r in state.row_stats())


# -- the history file ------------------------------------------------------------------
def test_utc_stamp_is_iso_with_milliseconds_and_z() -> None:
    moment = datetime(2026, 12, 6, 21, 15, 13, 192_999, tzinfo=UTC)
    assert utc_stamp(moment) == "2026-12-06T21:15:13.192Z"


def test_read_tail_keeps_the_last_lines_and_skips_torn_ones(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    lines = [line_of(i, "2026-12-06T21:00:00.000Z", doc()) for i in range(1, 51)]
    path.write_text("\n".join(lines) + "\n" + lines[0][:40])  # a crash mid-line
    tail = read_tail(path, keep=30)
    assert [e.seq for e in tail.entries] == list(range(21, 51))
    assert tail.last_seq == 50 and tail.skipped == 1
    assert read_tail(tmp_path / "missing.jsonl", keep=30).last_seq == 0


def test_read_tail_reads_only_the_tail_of_a_big_file(tmp_path: Path, monkeypatch: Any) -> None:
    from promptpath.modes.watch import history

    monkeypatch.setattr(history, "TAIL_BYTES", 4096)
    path = tmp_path / "h.jsonl"
    line = line_of(1, "2026-12-06T21:00:00.000Z", {"ok": True})
    path.write_text("".join(line.replace('"seq": 1', f'"seq": {i}') + "\n" for i in range(1, 2001)))
    tail = read_tail(path, keep=1000)
    assert tail.last_seq == 2000 and len(tail.entries) < 4096 // len(line) + 1
    assert tail.skipped == 0  # the line the seek cut is dropped, not counted


def test_a_file_that_is_not_a_history_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"schema": "promptpath.run/1"}) + "\n")
    with pytest.raises(UsageError, match="not a watch history"):
        read_tail(path, keep=30)


def test_writer_starts_a_new_line_after_a_torn_one(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text('{"schema": "promptpath.wat')
    writer = HistoryWriter(path)
    writer.append(line_of(1, "2026-12-06T21:00:00.000Z", {"ok": True}))
    writer.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 2 and entry_of(lines[1]) is not None and entry_of(lines[0]) is None


# -- the path's hops -----------------------------------------------------------------------
def _path_finding(loss_at_2: bool) -> dict[str, Any]:
    hops = [
        {
            "ttl": 1,
            "responders": ["10.0.0.1"],
            "sent": 3,
            "answered": 3,
            "rtt_ms": {"min": 1.0, "median": 1.2, "max": 1.5},
            "destination": False,
        },
        {
            "ttl": 2,
            "responders": ["10.0.1.1"],
            "sent": 3,
            "answered": 1 if loss_at_2 else 3,
            "rtt_ms": {"min": 5.0, "median": 9.0, "max": 30.0},
            "destination": False,
        },
        {
            "ttl": 3,
            "responders": ["192.0.2.10"],
            "sent": 3,
            "answered": 3,
            "rtt_ms": {"min": 6.0, "median": 6.5, "max": 7.0},
            "destination": True,
        },
    ]
    return {
        "probe": "path",
        "verdict": "pass",
        "summary": "3 hop(s)",
        "evidence": {"hops": hops, "deprioritised": [2] if loss_at_2 else []},
    }


def test_hops_add_up_mtr_style_and_keep_the_path_probes_deprioritisation() -> None:
    hops = PathHops(window=10)
    hops.feed(_path_finding(loss_at_2=True))
    hops.feed(_path_finding(loss_at_2=False))
    rows = hops.rows()
    assert [r.ttl for r in rows] == [1, 2, 3] and hops.runs == 2
    second = rows[1]
    assert second.sent == 6 and second.answered == 4 and second.loss == pytest.approx(1 / 3)
    assert second.best == 5.0 and second.worst == 30.0 and second.average == 9.0
    assert second.deprioritised is False  # the latest reading decides
    hops.feed(_path_finding(loss_at_2=True))
    assert hops.rows()[1].deprioritised is True and rows[2].destination is True


def test_a_skipped_path_probe_adds_no_rows() -> None:
    hops = PathHops()
    hops.feed({"probe": "path", "verdict": "skip", "summary": "behind a proxy", "evidence": {}})
    assert hops.rows() == [] and hops.summary == "behind a proxy"


# -- serve's runtime control -------------------------------------------------------------
def test_runtime_control_is_for_loopback_clients_only() -> None:
    assert client_is_loopback({"client": ("127.0.0.1", 5000)})
    assert client_is_loopback({"client": ("::1", 5000)})
    assert not client_is_loopback({"client": ("192.0.2.1", 5000)})
    assert not client_is_loopback({"client": None})


def test_runtime_control_parses_the_body_controls() -> None:
    base = Behaviour()
    assert changed_defaults(base, b'{"promptpath": {"ttft-ms": 250}}').ttft_ms == 250.0
    for bad in (b"[]", b"{}", b'{"promptpath": {"ttft-ms": "soon"}}', None):
        with pytest.raises(BehaviourError):
            changed_defaults(copy.copy(base), bad)
