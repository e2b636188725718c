"""A timeout keeps its time: the stage it cut runs to the deadline, the stream says it did
not finish, the verdict names the stall or the trickle. Synthetic timelines: pure, exact."""

from __future__ import annotations

from promptpath.core.analysis import (
    compute,
    derived_bounds,
    final_silence_ns,
    headline,
    open_stage_at_error,
)
from promptpath.core.errors import ErrorStage, PromptpathError, TraceTimeout
from promptpath.core.timeline import ErrorInfo, Read, StreamEvent, Timeline, WebSocketInfo
from promptpath.report.terminal import axis_ms

MS = 1_000_000


def base() -> Timeline:
    """Connected at 1 ms, request sent at 2 ms, headers read at 5 ms."""
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.milestones.update({"connected": 1 * MS, "request_sent": 2 * MS, "ttfb": 5 * MS})
    tl.reads.append(Read(t_ns=5 * MS, nbytes=200))
    return tl


def fail(tl: Timeline, stage: ErrorStage, at_ms: float, exc: PromptpathError | None = None) -> None:
    exc = exc or TraceTimeout("timed out", stage=stage, kind="timeout", timeout_s=3.0)
    tl.error = ErrorInfo.from_error(exc, int(at_ms * MS))


def tokens(tl: Timeline, *stamps_ms: float) -> None:
    for i, t in enumerate(stamps_ms):
        tl.reads.append(Read(t_ns=int(t * MS), nbytes=60))
        tl.events.append(
            StreamEvent(
                t_ns=int(t * MS), kind="content", text=f"t{i}", read_index=len(tl.reads) - 1
            )
        )
    tl.milestones.setdefault("ttft", int(stamps_ms[0] * MS))
    tl.milestones["last_token"] = int(stamps_ms[-1] * MS)


def test_a_stall_mid_stream_runs_streaming_to_the_deadline() -> None:
    tl = base()
    tokens(tl, 10, 30, 50)
    fail(tl, "stream", 3000)
    m = compute(tl)
    assert m.stages_ms["streaming"] == 2990  # ttft 10 ms to the deadline, not to 50 ms
    assert open_stage_at_error(tl) == "streaming"
    assert not m.tokens.finished and m.tokens.stall_ms == 2950
    assert m.tokens.gap_summary is not None and m.tokens.gap_summary.max == 20  # what arrived
    assert axis_ms(tl, m) == 3000
    verdict = headline(tl, m)
    assert verdict.startswith("FAILED in stream: no byte for 2.95 s in stage stream, then the 3 s")
    assert "last milestone last_token at 50 ms" in verdict


def test_headers_then_silence_runs_first_token_to_the_deadline() -> None:
    tl = base()
    fail(tl, "first_token", 2000)
    m = compute(tl)
    assert m.stages_ms["first_token"] == 1995 and "streaming" not in m.stages_ms
    assert final_silence_ns(tl) == 1995 * MS
    assert axis_ms(tl, m) == 2000
    assert "no byte for 2.00 s in stage first_token" in headline(tl, m)


def test_no_answer_at_all_runs_wait_to_the_deadline() -> None:
    tl = base()
    del tl.milestones["ttfb"]
    tl.reads.clear()
    fail(tl, "wait", 3000)
    bounds = derived_bounds(tl)
    assert bounds["wait"] == (2 * MS, 3000 * MS) and "first_token" not in bounds
    assert "no byte for 3.00 s in stage wait" in headline(tl, compute(tl))


def test_a_trickle_is_not_called_a_stall_and_is_not_ok() -> None:
    tl = base()
    tokens(tl, *[10.0 + 100 * i for i in range(30)])  # one token per 100 ms to 2910 ms
    fail(tl, "stream", 3000)
    verdict = headline(tl, compute(tl))
    assert verdict.startswith("FAILED in stream: still trickling (")
    assert "never finished within the 3 s deadline" in verdict and "no byte for" not in verdict


def test_a_connect_failure_draws_no_derived_stage() -> None:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    fail(tl, "connect", 3000)
    assert derived_bounds(tl) == {} and open_stage_at_error(tl) is None
    assert compute(tl).tokens.finished  # no stream began, so none was cut


def test_an_error_without_a_stamp_keeps_the_milestones() -> None:
    tl = base()
    tokens(tl, 10, 30)
    tl.error = ErrorInfo.from_error(TraceTimeout("x", stage="stream", kind="timeout"))
    assert compute(tl).stages_ms["streaming"] == 20


def test_a_websocket_close_after_the_deadline_is_no_trickle() -> None:
    # Our Close goes after the deadline and its drain reads the server's reply (and any
    # frame that crossed it) on the same stamped socket: those reads are the close
    # handshake's, not bytes of the stream. Before: "still trickling (10 bytes in ...,
    # the last 0.00 s before the end)" for every WebSocket run that timed out.
    tl = base()
    tokens(tl, 10, 30, 50)
    fail(tl, "stream", 3000)
    tl.websocket = WebSocketInfo(close_by="client", close_code=1000, close_ns=3001 * MS)
    tl.reads.append(Read(t_ns=3002 * MS, nbytes=10))  # the ping that crossed, the reply
    m = compute(tl)
    assert final_silence_ns(tl) == 2950 * MS
    verdict = headline(tl, m)
    assert verdict.startswith("FAILED in stream: no byte for 2.95 s in stage stream"), verdict
    # The same reads before our Close are the stream's: a trickle is still one.
    tl = base()
    tokens(tl, *[10.0 + 100 * i for i in range(30)])
    fail(tl, "stream", 3000)
    tl.websocket = WebSocketInfo(close_by="client", close_code=1000, close_ns=3001 * MS)
    assert headline(tl, compute(tl)).startswith("FAILED in stream: still trickling (1740 bytes")
