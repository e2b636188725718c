"""The ghost-stream verdict from synthetic client/canary accounts."""

from __future__ import annotations

from promptpath.core.findings import Verdict
from promptpath.probes.ghost_stream.verdict import PASS_MAX_TOKENS, GhostRun, judge

MS = 1_000_000
LEFT = 1_000_000 * MS


def run(
    *,
    generated: int,
    read: int = 5,
    disconnected: bool = True,
    last_ms: float = 10.0,
    seen_ms: float | None = 1.0,
    ended_ms: float = 20.0,
    style: str = "abrupt",
) -> GhostRun:
    record: dict[str, object] = {
        "tokens_generated": generated,
        "disconnected": disconnected,
        "disconnect_unix_ns": None if seen_ms is None else LEFT + int(seen_ms * MS),
        "last_token_unix_ns": LEFT + int(last_ms * MS),
        "ended_unix_ns": LEFT + int(ended_ms * MS),
    }
    return GhostRun(
        style=style,  # type: ignore[arg-type]
        read=read,
        left_unix_ns=LEFT,
        planned=40,
        rate=20.0,
        record=record,
    )


def test_generation_that_stops_at_once_passes_with_the_notice_delay() -> None:
    finding = judge([run(generated=5, last_ms=-3), run(generated=6, style="clean", seen_ms=50)])
    assert finding.verdict is Verdict.PASS
    assert "at most 1 token generated" in finding.summary and "within 50 ms" in finding.summary
    runs = finding.evidence["runs"]
    assert [r["wasted_tokens"] for r in runs] == [0, 1]  # type: ignore[index]


def test_the_pass_line_is_five_tokens_after_the_client_left() -> None:
    at_line = run(generated=5 + PASS_MAX_TOKENS)
    over = run(generated=6 + PASS_MAX_TOKENS)
    assert judge([at_line]).verdict is Verdict.PASS
    assert judge([at_line, over]).verdict is Verdict.FAIL


def test_a_ghost_fails_with_tokens_and_seconds_wasted() -> None:
    ghost = run(generated=40, disconnected=False, seen_ms=None, last_ms=1750, ended_ms=1751)
    finding = judge([ghost])
    assert finding.verdict is Verdict.FAIL
    assert "35 of 40 tokens" in finding.summary and "1.75 s" in finding.summary
    assert "never saw the client leave" in finding.summary
    assert finding.evidence["runs"][0]["wasted_s"] == 1.75  # type: ignore[index]


def test_no_record_is_a_skip_naming_the_reason() -> None:
    missing = GhostRun(
        style="abrupt", read=5, left_unix_ns=LEFT, planned=40, rate=20.0, problem="404 there"
    )
    finding = judge([missing])
    assert finding.verdict is Verdict.SKIP and "404 there" in finding.summary


def test_an_answer_held_whole_by_a_hop_cannot_be_left_mid_stream() -> None:
    # Everything generated, and finished, before the client left: a buffering hop.
    held = run(generated=40, read=40, disconnected=False, seen_ms=None, last_ms=-5, ended_ms=-4)
    finding = judge([held])
    assert finding.verdict is Verdict.SKIP and "could not leave mid-stream" in finding.summary


def test_a_style_the_path_could_not_offer_is_named_but_judges_nothing() -> None:
    untried = GhostRun(
        style="h2_cancel",
        read=0,
        left_unix_ns=0,
        planned=40,
        rate=20.0,
        unavailable="the server chose HTTP/1.1 (no h2 in ALPN)",
    )
    finding = judge([run(generated=5), run(generated=5, style="clean"), untried])
    assert finding.verdict is Verdict.PASS
    assert "(reset and clean close)" in finding.summary
    assert "HTTP/2 stream reset not tried: the server chose HTTP/1.1" in finding.summary
    assert finding.evidence["runs"][2] == {  # type: ignore[index]
        "style": "h2_cancel",
        "read": 0,
        "problem": "the server chose HTTP/1.1 (no h2 in ALPN)",
    }


def test_a_hop_that_ignores_only_the_stream_reset_fails_naming_it() -> None:
    h2_ghost = run(
        generated=40, disconnected=False, seen_ms=None, last_ms=1750, ended_ms=1751,
        style="h2_cancel",
    )  # fmt: skip
    finding = judge([run(generated=5), run(generated=5, style="clean"), h2_ghost])
    assert finding.verdict is Verdict.FAIL
    assert "RST_STREAM (CANCEL) on a connection kept open" in finding.summary
