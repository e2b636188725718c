"""The upgrade verdict on given observations: each failure named (refused, forwarded as a
plain GET, an invalid 101, closed right after, no pong), the fix lines in the advice, and
a pass that says what was negotiated."""

from __future__ import annotations

import pytest

from promptpath.core.findings import Verdict
from promptpath.probes.upgrade.verdict import (
    NGINX_LINES,
    PlainAnswer,
    UpgradeTry,
    failure_of,
    judge,
    not_websocket,
)

pytestmark = pytest.mark.unit

NGINX = "nginx/1.22.1"
OPEN = UpgradeTry(
    status=101, server="hypercorn-h11", upgrade_ms=1.2, hold_s=1.0, pings=1, pong_ms=0.4
)


def test_an_upgrade_that_stays_open_and_answers_its_ping_passes_with_the_pong() -> None:
    finding = judge(OPEN)
    assert finding.verdict is Verdict.PASS
    assert "a ping came back in 0.4 ms" in finding.summary and "hypercorn-h11" in finding.summary
    assert finding.evidence["failure"] is None and finding.evidence["pong_ms"] == 0.4


def test_the_same_405_as_a_plain_get_is_a_plain_request_forwarded_with_nginx_lines() -> None:
    up = UpgradeTry(status=405, server=NGINX, message="HTTP 405 — GET not allowed")
    finding = judge(up, PlainAnswer(status=405, server=NGINX))
    assert finding.verdict is Verdict.FAIL
    assert finding.evidence["failure"] == "forwarded_plain"
    assert "Upgrade and Connection headers" in finding.summary and NGINX in finding.summary
    assert all(line in finding.advice[0] for line in NGINX_LINES)
    assert len(finding.advice) == 1  # nginx named: no haproxy line


def test_a_different_answer_to_the_plain_get_is_a_refusal_of_the_upgrade_itself() -> None:
    up = UpgradeTry(status=400, server=NGINX, message="HTTP 400 — (empty body)")
    assert failure_of(up, PlainAnswer(status=405)) == "refused"
    assert failure_of(up, PlainAnswer(status=400)) == "forwarded_plain"
    finding = judge(up, PlainAnswer(status=405))
    assert "refused with 400" in finding.summary
    assert "proxy_http_version 1.1;" in finding.advice[0]  # nginx's HTTP/1.0 upstream


@pytest.mark.parametrize("status", [401, 403, 429, 500, 502])
def test_deliberate_refusals_stay_refusals_whatever_a_plain_get_gets(status: int) -> None:
    up = UpgradeTry(status=status, server="envoy")
    assert failure_of(up, PlainAnswer(status=status)) == "refused"
    assert f"refused with {status} (Server: envoy)" in judge(up).summary


@pytest.mark.parametrize("status", [200, 302, 426])
def test_a_success_redirect_or_426_is_a_plain_request_even_without_the_comparison(
    status: int,
) -> None:
    up = UpgradeTry(status=status)
    assert failure_of(up, None) == "forwarded_plain"
    finding = judge(up)
    # No server named: both proxies' lines are offered.
    assert len(finding.advice) == 2 and "haproxy" in finding.advice[1]


def test_an_invalid_101_names_the_hop_that_answered_the_handshake() -> None:
    up = UpgradeTry(
        message="WebSocket upgrade failed: the 101's Sec-WebSocket-Accept does not answer our key",
        error_kind="upgrade_invalid",
        error_stage="upgrade",
    )
    finding = judge(up)
    assert finding.verdict is Verdict.FAIL and finding.evidence["failure"] == "invalid"
    assert "Sec-WebSocket-Accept" in finding.summary


def test_a_close_right_after_the_101_says_how_and_when() -> None:
    up = UpgradeTry(
        status=101,
        server="haproxy",
        hold_s=1.0,
        closed_after_ms=412.0,
        close_by="eof",
        close_code=1006,
    )
    finding = judge(up)
    assert finding.verdict is Verdict.FAIL and finding.evidence["failure"] == "closed"
    assert "412 ms after the 101" in finding.summary and "no Close frame" in finding.summary
    assert any("timeout tunnel" in a for a in finding.advice)
    by_frame = judge(
        UpgradeTry(
            status=101, closed_after_ms=3.0, close_by="server", close_code=1008, close_reason="x"
        )
    )
    assert "1008" in by_frame.summary and "(x)" in by_frame.summary


def test_a_ping_without_its_pong_warns() -> None:
    up = UpgradeTry(status=101, hold_s=1.0, pings=1, pong_ms=None)
    assert judge(up).verdict is Verdict.WARN


def test_a_connect_failure_is_an_error_not_a_verdict_on_the_upgrade() -> None:
    up = UpgradeTry(message="TCP connect refused", error_kind="refused", error_stage="connect")
    finding = judge(up)
    assert finding.verdict is Verdict.ERROR and "connect failed" in finding.summary


def test_an_http_target_skips() -> None:
    finding = not_websocket("https://api.example/v1/responses")
    assert finding.verdict is Verdict.SKIP and "https://" in finding.summary
