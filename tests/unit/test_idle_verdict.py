"""The idle-timeout verdict on synthetic observations: every way a hop ends an idle flow."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence

import pytest

from promptpath.core.errors import HTTPStatusError, StreamError, TraceTimeout
from promptpath.core.findings import Verdict
from promptpath.core.timeline import CloseKind, CloseRecord, StreamEvent, Timeline
from promptpath.net.transport import TransportError
from promptpath.probes.idle_timeout.measure import IdleWatch, Outcome, PauseRun, measure_pause
from promptpath.probes.idle_timeout.probe import keepalive_interval, no_comments, outcome_of
from promptpath.probes.idle_timeout.verdict import judge

MS = 1_000_000
S = 1_000_000_000
T0_UNIX = 1_800_000_000_000_000_000


def paused(
    sent_ms: Sequence[float],
    *,
    arrive_ms: Sequence[float] | None = None,
    cut_ms: float | None,
    comments_ms: Sequence[float] = (),
    clock_offset_ms: float = 0.0,
    ttfb_ms: float = 1.0,
) -> Timeline:
    """A paused stream: content events sent at ``sent_ms`` (arriving 1 ms later unless
    ``arrive_ms``), keepalive comments, and a cut at ``cut_ms`` after the request."""
    tl = Timeline(t0_ns=0, t0_unix_ns=T0_UNIX)
    tl.milestones["request_sent"] = 0
    tl.milestones["ttfb"] = int(ttfb_ms * MS)
    tl.status = 200
    tl.http_version = "HTTP/1.1"
    arrivals = list(arrive_ms) if arrive_ms is not None else [s + 1.0 for s in sent_ms]
    items = [("content", s, a) for s, a in zip(sent_ms, arrivals, strict=True)]
    items += [("comment", c, c + 1.0) for c in comments_ms]
    for seq, (kind, sent, arrival) in enumerate(sorted(items, key=lambda x: x[1])):
        tl.events.append(
            StreamEvent(
                t_ns=int(arrival * MS),
                kind="content" if kind == "content" else "comment",
                server_sent_unix_ns=T0_UNIX + int((sent + clock_offset_ms) * MS),
                seq=seq,
            )
        )
    if cut_ms is not None:
        tl.closed_ns = int(cut_ms * MS)
        tl.stream_end = "truncated"
    return tl


def run(
    tl: Timeline,
    outcome: Outcome | None,
    *,
    pause_s: float = 6.0,
    keepalive_s: float = 0.0,
    error: str | None = None,
) -> PauseRun:
    return measure_pause(
        tl,
        outcome=outcome,
        pause_after=3,
        rate=20.0,
        pause_s=pause_s,
        keepalive_s=keepalive_s,
        error=error,
    )


CUT_AT_3S = paused([0, 50, 100], cut_ms=3100.0)
SURVIVED = paused([0, 50, 100, 6100, 6150, 6200], cut_ms=None)


def watch(**kw: object) -> IdleWatch:
    base: dict[str, object] = {
        "address": "127.0.0.1:8080",
        "tls": False,
        "cap_s": 6.0,
        "status": 200,
        "response_end_ns": 10 * S,
    }
    base.update(kw)
    return IdleWatch(**base)  # type: ignore[arg-type]


# -- measuring one paused stream -------------------------------------------------------
def test_silence_is_measured_from_the_servers_last_send() -> None:
    r = run(CUT_AT_3S, "fin")
    assert r.method == "server_send_time"
    assert r.silence_s == pytest.approx(3.0)
    assert r.since_pause_s == pytest.approx(3.0)
    assert r.elapsed_s == pytest.approx(3.1)
    assert r.resolution_s == pytest.approx(0.05)
    assert r.tokens_before_cut == 3 and r.cut


def test_a_hop_holding_the_last_tokens_does_not_shift_the_threshold() -> None:
    # A buffering hop released the three tokens only when it cut the stream.
    tl = paused([0, 50, 100], arrive_ms=[3099, 3099, 3099], cut_ms=3100.0)
    assert run(tl, "fin").silence_s == pytest.approx(3.0)


def test_a_hop_that_corks_its_own_output_does_not_shorten_the_threshold() -> None:
    # haproxy without http-no-delay (observed): its timer starts when it reads the last
    # token from the endpoint, its kernel holds the delivery up to 200 ms more. Counting
    # from our receive read its 3 s cut as 2.90 s; from the send stamp it is 3.0.
    tl = paused([0, 50, 100], arrive_ms=[200, 200, 200], cut_ms=3100.0)
    r = run(tl, "fin")
    assert r.method == "server_send_time"
    assert r.silence_s == pytest.approx(3.0)


def test_the_cut_is_the_close_the_socket_stamped_not_when_the_tracer_heard_of_it() -> None:
    # The event loop was busy for 300 ms when the FIN came: the tracer's closed_ns is late,
    # the stamping stream's close record is not.
    tl = paused([0, 50, 100], cut_ms=3400.0)
    tl.close = CloseRecord(kind="fin", t_ns=3100 * MS)
    assert run(tl, "fin").silence_s == pytest.approx(3.0)
    # A close record from after the end (another stream's) does not move the cut later.
    tl.close = CloseRecord(kind="fin", t_ns=3500 * MS)
    assert run(tl, "fin").silence_s == pytest.approx(3.3)


def test_without_stamped_events_the_pause_plan_gives_the_threshold() -> None:
    # nginx buffering on: the held tokens were dropped at the cut; only headers came.
    tl = paused([], cut_ms=3100.0, ttfb_ms=3099.0)
    r = run(tl, "fin")
    assert r.method == "request_plan"
    assert r.silence_s == pytest.approx(3.0)  # 3.1 s minus (K-1)/rate = 0.1 s
    assert r.resolution_s == pytest.approx(0.1)
    assert r.tokens_before_cut == 0


def test_disagreeing_clocks_fall_back_to_the_pause_plan() -> None:
    tl = paused([0, 50, 100], cut_ms=3100.0, clock_offset_ms=5000.0)  # server 5 s ahead
    assert run(tl, "fin").method == "request_plan"


def test_with_keepalives_silence_and_time_since_the_pause_differ() -> None:
    tl = paused([0, 50, 100], comments_ms=[1100, 2100, 3100], cut_ms=3300.0)
    r = run(tl, "fin", keepalive_s=1.0)
    assert r.silence_s == pytest.approx(0.2)
    assert r.since_pause_s == pytest.approx(3.2)
    assert r.comments_seen == 3


def test_a_gateway_error_is_cut_at_the_response_headers() -> None:
    tl = paused([], cut_ms=None, ttfb_ms=3000.0)
    tl.status = 504
    r = run(tl, "gateway_status")
    assert r.elapsed_s == pytest.approx(3.0)
    assert r.status == 504


def test_a_surviving_stream_has_no_cut_numbers() -> None:
    r = run(SURVIVED, "survived")
    assert not r.cut
    assert r.silence_s is None and r.elapsed_s is None


# -- the finding -----------------------------------------------------------------------
def test_an_idle_timeout_that_keepalives_fix() -> None:
    first = run(CUT_AT_3S, "fin")
    second = run(SURVIVED, "survived", keepalive_s=1.0)
    ka = watch(reuse="ok", reuse_status=200)
    f = judge(canary=True, watch=ka, first=first, second=second, hops=["nginx"])
    assert f.verdict is Verdict.FAIL
    assert f.evidence["threshold_s"] == pytest.approx(3.0)
    assert f.evidence["cut_by"] == "fin"
    assert f.evidence["keepalive_helps"] is True
    assert "3.0 ± 0.05 s" in f.summary and "FIN mid-body" in f.summary
    assert "an idle timeout" in f.summary
    assert any("SSE comments" in a for a in f.advice)
    assert any("proxy_read_timeout" in a for a in f.advice)
    assert not any("haproxy" in a for a in f.advice)


@pytest.mark.parametrize(
    ("provider", "words"),
    [("bedrock", "event-stream framing"), ("bedrock-invoke", "event-stream"), ("ollama", "NDJSON")],
)
def test_a_framing_without_comments_gets_no_keepalive_retest_and_says_why(
    provider: str, words: str
) -> None:
    from promptpath.options import RunOptions, parse_target

    options = RunOptions(target=parse_target("http://127.0.0.1:1/x"), provider=provider, model="m")  # type: ignore[arg-type]
    reason = no_comments(options)
    assert reason is not None and words in reason
    f = judge(canary=True, watch=None, first=run(CUT_AT_3S, "fin"), no_comments=reason)
    assert f.verdict is Verdict.FAIL
    assert f.evidence["keepalive_helps"] is None
    assert reason in f.summary and "only the hop's timeout decides" in f.summary
    assert "did not complete" not in f.summary  # nothing was attempted, nothing failed
    assert not any("SSE comments" in a for a in f.advice)


@pytest.mark.parametrize("provider", ["openai", "gemini", "azure", "cohere", "anthropic"])
def test_sse_dialects_can_carry_keepalive_comments(provider: str) -> None:
    from promptpath.options import RunOptions, parse_target

    options = RunOptions(target=parse_target("http://127.0.0.1:1/x"), provider=provider, model="m")  # type: ignore[arg-type]
    assert no_comments(options) is None


def test_an_absolute_limit_kills_the_stream_at_the_same_time_with_keepalives() -> None:
    first = run(CUT_AT_3S, "fin")
    tl = paused([0, 50, 100], comments_ms=[1100, 2100], cut_ms=3150.0)
    second = run(tl, "fin", keepalive_s=1.0)
    f = judge(canary=True, watch=None, first=first, second=second)
    assert f.verdict is Verdict.FAIL
    assert f.evidence["keepalive_helps"] is False
    assert f.evidence["absolute_limit_s"] == pytest.approx(3.15)
    assert "absolute limit" in f.summary
    assert any("keepalives cannot help" in a for a in f.advice)


def test_keepalives_that_only_delay_the_cut_are_reported_as_not_helping() -> None:
    first = run(CUT_AT_3S, "fin")
    tl = paused([0, 50, 100], comments_ms=[1100, 2100, 3100, 4100], cut_ms=5200.0)
    second = run(tl, "rst", keepalive_s=1.0)
    f = judge(canary=True, watch=None, first=first, second=second)
    assert f.evidence["keepalive_helps"] is False
    assert "absolute_limit_s" not in f.evidence
    assert "still cut, after 5.1 s" in f.summary


def test_tokens_the_hop_swallowed_at_the_cut_are_counted() -> None:
    first = run(paused([], cut_ms=3100.0, ttfb_ms=3099.0), "fin")
    f = judge(canary=True, watch=None, first=first, second=run(SURVIVED, "survived"))
    assert f.evidence["tokens_lost"] == 3
    assert "3 of the 3 tokens sent before the pause never arrived" in f.summary


def test_a_stream_that_survives_the_pause_passes() -> None:
    f = judge(
        canary=True, watch=watch(reuse="ok", reuse_status=200), first=run(SURVIVED, "survived")
    )
    assert f.verdict is Verdict.PASS
    assert f.evidence["threshold_s"] is None and f.evidence["cut_by"] is None
    assert f.evidence["keepalive_helps"] is None
    assert "survived" in f.summary


def test_a_stream_that_stalls_without_closing_fails() -> None:
    f = judge(canary=True, watch=None, first=run(paused([0, 50, 100], cut_ms=None), "stalled"))
    assert f.verdict is Verdict.FAIL
    assert f.evidence["cut_by"] == "stalled"


def test_a_paused_request_that_failed_otherwise_is_an_error() -> None:
    first = run(paused([], cut_ms=None), None, error="HTTP 401 — bad key")
    f = judge(canary=True, watch=None, first=first)
    assert f.verdict is Verdict.ERROR
    assert "HTTP 401" in f.summary


def test_keepalive_close_by_fin_is_reported_with_its_threshold() -> None:
    f = judge(canary=False, watch=watch(closed_ns=12 * S, close_kind="fin"))
    assert f.verdict is Verdict.PASS
    ka = f.evidence["keepalive_idle"]
    assert isinstance(ka, dict)
    assert ka["threshold_s"] == pytest.approx(2.0)
    assert ka["closed_by"] == "fin"
    assert "closed by the peer after 2.0 s (FIN)" in f.summary
    assert any("keepalive_expiry" in a for a in f.advice)
    assert "--canary" in f.summary  # blind: says what it did not measure
    assert f.evidence["threshold_s"] is None and f.evidence["mid_stream"] is None


def test_keepalive_reset_warns() -> None:
    f = judge(canary=False, watch=watch(closed_ns=70 * S, close_kind="rst"))
    assert f.verdict is Verdict.WARN
    assert "reset (RST) after 60.0 s" in f.summary


def test_data_sent_before_the_close_is_kept() -> None:
    w = watch(
        closed_ns=15 * S,
        close_kind="fin",
        bytes_while_idle=40,
        idle_data="HTTP/1.1 408 Request Timeout\r\n",
    )
    f = judge(canary=False, watch=w)
    assert "after sending 40 bytes" in f.summary
    assert "408" in str(f.evidence["keepalive_idle"])


@pytest.mark.parametrize("reuse", ["reset", "closed", "timeout"])
def test_a_connection_that_died_silently_fails(reuse: str) -> None:
    f = judge(canary=False, watch=watch(reuse=reuse))
    assert f.verdict is Verdict.FAIL
    assert "dropped it silently" in f.summary


def test_a_connection_still_usable_at_the_cap_passes() -> None:
    f = judge(canary=False, watch=watch(reuse="ok", reuse_status=200))
    assert f.verdict is Verdict.PASS
    assert "idle for 6 s stayed open" in f.summary


def test_connection_close_responses_have_nothing_to_time_out() -> None:
    f = judge(canary=False, watch=watch(connection_close=True))
    assert f.verdict is Verdict.PASS
    assert "Connection: close" in f.summary


def test_a_watch_that_could_not_start_is_an_error() -> None:
    f = judge(canary=False, watch=watch(error="ConnectError: refused"))
    assert f.verdict is Verdict.ERROR


def test_the_worst_part_decides() -> None:
    ka_ok = watch(reuse="ok", reuse_status=200)
    f = judge(
        canary=True, watch=ka_ok, first=run(CUT_AT_3S, "fin"), second=run(SURVIVED, "survived")
    )
    assert f.verdict is Verdict.FAIL
    f2 = judge(canary=True, watch=watch(reuse="timeout"), first=run(SURVIVED, "survived"))
    assert f2.verdict is Verdict.FAIL


def test_nothing_measured_is_a_skip() -> None:
    assert judge(canary=False, watch=None).verdict is Verdict.SKIP


def test_evidence_is_json_with_the_required_keys() -> None:
    f = judge(
        canary=True,
        watch=watch(closed_ns=12 * S, close_kind="fin"),
        first=run(CUT_AT_3S, "fin"),
        second=run(SURVIVED, "survived"),
    )
    data = json.loads(json.dumps(f.as_dict()))
    for key in ("threshold_s", "cut_by", "keepalive_helps", "resolution_s", "keepalive_idle"):
        assert key in data["evidence"]
    assert len(data["evidence"]["mid_stream"]["runs"]) == 2


# -- the probe's glue ------------------------------------------------------------------
def test_keepalive_interval_is_a_third_of_the_threshold_within_bounds() -> None:
    assert keepalive_interval(3.0) == 1.0
    assert keepalive_interval(2.0) == 0.7
    assert keepalive_interval(0.3) == 0.2
    assert keepalive_interval(60.0) == 10.0
    assert keepalive_interval(None) == 1.0


def _truncated(cause: BaseException | None) -> StreamError:
    exc = StreamError("stream truncated", stage="stream", kind="truncated")
    exc.__cause__ = cause
    return exc


def _closed(kind: CloseKind) -> CloseRecord:
    return CloseRecord(kind=kind, t_ns=1)


_BROKEN = TransportError("peer closed connection without sending complete message body")


@pytest.mark.parametrize(
    ("exc", "version", "close", "expected"),
    [
        (None, "HTTP/1.1", None, "survived"),
        (_truncated(_BROKEN), "HTTP/1.1", _closed("fin"), "fin"),
        (_truncated(_BROKEN), "HTTP/1.1", _closed("tls_close_notify"), "fin"),
        (_truncated(_BROKEN), "HTTP/2", _closed("fin"), "h2_reset"),
        (_truncated(_BROKEN), "HTTP/2", None, "h2_reset"),
        (_truncated(_BROKEN), "HTTP/1.1", _closed("rst"), "rst"),
        (_truncated(_BROKEN), "HTTP/2", _closed("rst"), "rst"),
        (_truncated(_BROKEN), "HTTP/3", _closed("stream_reset"), "h3_reset"),
        (_truncated(_BROKEN), "HTTP/3", _closed("quic_close"), "h3_reset"),
        (_truncated(None), "HTTP/1.1", None, "clean_end"),
        (TraceTimeout("timed out", stage="stream", kind="timeout"), "HTTP/1.1", None, "stalled"),
        (
            HTTPStatusError("HTTP 504", stage="response", kind="http_504", status=504),
            "HTTP/1.1",
            None,
            "gateway_status",
        ),
    ],
)
def test_outcomes_from_the_tracers_errors_and_the_close_seen_at_the_socket(
    exc: BaseException | None, version: str, close: CloseRecord | None, expected: str
) -> None:
    stream_end = "marker" if exc is None else "truncated"
    outcome, error = outcome_of(exc, stream_end, version, close)
    assert outcome == expected and error is None


def test_other_http_errors_are_not_cuts() -> None:
    exc = HTTPStatusError("HTTP 401 — bad key", stage="response", kind="http_401", status=401)
    assert outcome_of(exc, None, "HTTP/1.1", None) == (None, "HTTP 401 — bad key")


def test_the_socket_watch_needs_the_observations_not_the_verdict() -> None:
    # One job per module: net.idle fills an IdleWatch; judging it is the probe's business.
    code = (
        "import sys, promptpath.net.idle;"
        " print('promptpath.probes.idle_timeout.verdict' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"
