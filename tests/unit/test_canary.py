"""The canary controls the probes send, read by the reference endpoint's own parser, and
the check of what the canary reported against what was asked."""

from __future__ import annotations

import dataclasses
import json

import pytest

from promptpath.core.findings import Finding, Verdict
from promptpath.core.timeline import ServerControls, StreamEvent, Timeline
from promptpath.dialects.stream import StreamDecoder
from promptpath.options import Provider, RunOptions, parse_target
from promptpath.probes.canary import (
    canary_controls,
    check_controls,
    with_controls,
    without_canary_part,
)
from promptpath.probes.idle_timeout.measure import PauseRun
from promptpath.probes.idle_timeout.probe import comments_lost
from promptpath.server.behaviour import BODY_FIELD, Behaviour, applied, from_request
from promptpath.server.dialect import RequestInfo, frame
from promptpath.server.routing import DIALECTS
from promptpath.tracer.request import CONTROLS_FIELD, prepare

#: A server started with every default a probe must not inherit.
HOSTILE = Behaviour(
    ttft_ms=900,
    tokens=5,
    rate=1,
    pause_after=2,
    pause_s=30,
    keepalive_s=5,
    truncate_after=3,
    error_after=4,
    batch=8,
)
PAUSE = canary_controls(tokens=6, rate=20.0, pause_after=3, pause_s=1.5, keepalive_s=0.5)


def options() -> RunOptions:
    return RunOptions(
        target=parse_target("http://127.0.0.1:8080/v1/chat/completions"),
        provider="openai",
        model="m",
    )


def server_view(opts: RunOptions) -> tuple[Behaviour, dict[str, str]]:
    """What the reference endpoint makes of the request these options send."""
    prepared = prepare(opts)
    behaviour, sources = from_request(HOSTILE, prepared.headers, json.loads(prepared.body))
    return behaviour, dict(sources)


def test_paced_stream_overrides_every_server_default_that_shapes_it() -> None:
    got, _ = server_view(with_controls(options(), canary_controls(tokens=60, rate=20.0)))
    # pause_s is left as the server had it: without pause_after it never applies.
    assert got == Behaviour(ttft_ms=0, tokens=60, rate=20.0, batch=1, pause_s=HOSTILE.pause_s)


@pytest.mark.parametrize("via", ["both", "headers", "body"])
def test_pause_with_keepalives_reaches_the_server_by_the_way_asked(via: str) -> None:
    got, sources = server_view(with_controls(options(), PAUSE, via))
    assert got == Behaviour(
        ttft_ms=0, tokens=6, rate=20.0, pause_after=3, pause_s=1.5, keepalive_s=0.5, batch=1
    )
    # Both ways at once: the server reports the header, which wins.
    assert set(sources.values()) == {"body" if via == "body" else "header"}


def test_the_client_writes_the_body_field_the_server_reads() -> None:
    assert CONTROLS_FIELD == BODY_FIELD


def test_headers_only_leaves_the_body_without_the_field() -> None:
    body = json.loads(prepare(with_controls(options(), PAUSE, "headers")).body)
    assert CONTROLS_FIELD not in body
    body = json.loads(prepare(with_controls(options(), PAUSE, "body")).body)
    assert body[CONTROLS_FIELD]["pause-s"] == "1.5"


# -- the check -------------------------------------------------------------------------
def stream(
    behaviour: Behaviour | None,
    sources: dict[str, str] | None = None,
    *,
    sent_s: list[float] | None = None,
) -> Timeline:
    """A canary stream: a role chunk carrying the report (None: no report), then content
    events sent at ``sent_s`` (seconds on the server's clock)."""
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    report = None
    if behaviour is not None:
        controls = applied(behaviour, {})["controls"]
        assert isinstance(controls, dict)
        report = ServerControls(
            applied=tuple(controls.items()),
            sources=tuple((sources or {}).items()),
            request_id="req_1",
        )
    tl.events.append(
        StreamEvent(t_ns=0, kind="meta", seq=0, server_sent_unix_ns=0, controls=report)
    )
    for i, sent in enumerate(sent_s or [0.05 * (k + 1) for k in range(6)]):
        ns = int(sent * 1e9)
        tl.events.append(
            StreamEvent(t_ns=ns, kind="content", text="x", seq=i + 1, server_sent_unix_ns=ns)
        )
    return tl


AS_ASKED = Behaviour(ttft_ms=0, tokens=6, rate=20.0, pause_after=3, pause_s=1.5, keepalive_s=0.5)
PAUSED_SENDS = [0.0, 0.05, 0.1, 1.6, 1.65, 1.7]


def test_controls_that_arrived_and_a_pause_in_the_send_times_pass_the_check() -> None:
    tl = stream(AS_ASKED, {"pause-s": "body"}, sent_s=PAUSED_SENDS)
    check = check_controls(tl, PAUSE, "both", pause=(3, 1.5))
    assert check.ok, check.problem
    assert check.evidence()["arrived_by"] == {"header": [], "body": ["pause-s"]}
    assert check.evidence()["request_id"] == "req_1"


def test_controls_stripped_on_the_way_are_named_with_what_the_server_did() -> None:
    server_defaults = Behaviour(rate=20.0, tokens=6)
    check = check_controls(stream(server_defaults), PAUSE, "both", pause=(3, 1.5))
    assert not check.ok
    assert check.problem is not None
    assert check.problem.startswith("a hop strips the x-promptpath-* headers and the body field")
    assert "pause-s asked 1.5, applied 0," in check.problem
    assert "pause-after asked 3, applied off" in check.problem


def test_headers_only_names_the_headers_and_the_missing_body_field() -> None:
    check = check_controls(stream(Behaviour()), PAUSE, "headers")
    assert check.problem is not None
    assert "strips the x-promptpath-* headers (the body field was not sent" in check.problem


def test_a_control_that_arrived_with_another_value_is_not_called_stripped() -> None:
    other = dataclasses.replace(AS_ASKED, pause_s=0.2)
    check = check_controls(stream(other, {"pause-s": "header"}), PAUSE, "both")
    assert check.problem == (
        "the canary's controls did not arrive as sent (pause-s asked 1.5, applied 0.2)"
    )


def test_a_stream_without_a_report_is_unconfirmed_never_trusted() -> None:
    check = check_controls(stream(None), PAUSE, "both")
    assert check.problem is not None
    assert "no report of the controls" in check.problem
    bare = Timeline(t0_ns=0, t0_unix_ns=0)
    bare.events.append(StreamEvent(t_ns=0, kind="content", text="x"))
    problem = check_controls(bare, PAUSE, "both").problem
    assert problem is not None and "no report from promptpath serve" in problem


def test_an_answer_without_events_has_nothing_to_check() -> None:
    assert check_controls(Timeline(t0_ns=0, t0_unix_ns=0), PAUSE, "both").ok


def test_send_times_without_the_pause_overrule_the_report() -> None:
    tl = stream(AS_ASKED, {"pause-s": "header"}, sent_s=[0.0, 0.05, 0.1, 0.15, 0.2, 0.25])
    problem = check_controls(tl, PAUSE, "both", pause=(3, 1.5)).problem
    assert problem == (
        "the server's send times show no 1.5 s pause after token 3 (longest gap 0.05 s):"
        " the canary's pause did not happen"
    )


def test_a_stream_cut_inside_the_pause_is_not_held_against_it() -> None:
    tl = stream(AS_ASKED, {"pause-s": "header"}, sent_s=[0.0, 0.05, 0.1])
    assert check_controls(tl, PAUSE, "both", pause=(3, 1.5)).ok


def test_send_cadence_far_from_the_asked_rate_fails_the_check() -> None:
    paced = canary_controls(tokens=6, rate=20.0)
    as_asked = Behaviour(ttft_ms=0, tokens=6, rate=20.0)
    fast = stream(as_asked, sent_s=[0.002 * k for k in range(8)])
    problem = check_controls(fast, paced, "both", rate=20.0).problem
    assert problem is not None and "show 500 tokens/s, not the 20 asked" in problem
    assert check_controls(stream(as_asked), paced, "both", rate=20.0).ok


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (Verdict.PASS, Verdict.SKIP),
        (Verdict.SKIP, Verdict.SKIP),
        (Verdict.WARN, Verdict.WARN),
        (Verdict.FAIL, Verdict.FAIL),
    ],
)
def test_a_finding_without_its_canary_part_is_never_a_pass(
    verdict: Verdict, expected: Verdict
) -> None:
    check = check_controls(stream(Behaviour()), PAUSE, "both")
    finding = Finding(probe="idle-timeout", verdict=verdict, summary="keep-alive fine")
    got = without_canary_part(finding, check)
    assert got.verdict is expected
    assert got.summary.startswith("canary part not judged: a hop strips")
    assert got.summary.endswith("; keep-alive fine")


# -- the report, from the endpoint's framing to the client's decoder --------------------
@pytest.mark.parametrize("provider", ["openai", "responses", "anthropic", "ollama"])
def test_the_first_event_carries_the_report_to_the_client_in_every_dialect(
    provider: Provider,
) -> None:
    cls = DIALECTS[provider]
    params = cls.parse_request({"model": "m", "messages": [], "input": "x"})
    dialect = cls(RequestInfo(id="abc", created_unix=1, created_iso="x", params=params))
    behaviour, sources = from_request(Behaviour(), {}, {"promptpath": {"pause-s": 2}})
    report = {"request_id": "req_9", **applied(behaviour, sources)}
    events = [*dialect.opening(), dialect.token(" hi")]
    wire = b"".join(
        frame(e, sse=dialect.sse, seq=i, sent_unix_ns=1, report=report if i == 0 else None)
        for i, e in enumerate(events)
    )
    decoded = StreamDecoder(provider).feed(wire, 5, 0)
    got = decoded[0].controls
    assert got is not None
    assert dict(got.applied)["pause-s"] == 2.0
    assert got.sources == (("pause-s", "body"),)
    assert got.request_id == "req_9"
    assert all(e.controls is None for e in decoded[1:] if e.seq != 0)


def test_a_lost_keepalive_comment_is_named_only_after_a_silence_long_enough_for_two() -> None:
    cut = PauseRun(pause_s=6, keepalive_s=1, outcome="fin", since_pause_s=3.0)
    problem = comments_lost(cut)
    assert problem is not None and "a hop drops SSE comments" in problem
    assert comments_lost(dataclasses.replace(cut, comments_seen=2)) is None
    assert comments_lost(dataclasses.replace(cut, since_pause_s=1.5)) is None
    assert comments_lost(dataclasses.replace(cut, keepalive_s=0)) is None
    assert comments_lost(dataclasses.replace(cut, outcome="survived")) is None
