"""The idle-timeout verdict over WebSocket: does a hop cut a quiet socket, after how long,
and do pings count as activity? Pure: the watches come in as ``QuietWatch`` values.

Over WebSocket a hop sees a tunnel of frames once the 101 has passed: a silence after a
response is the same silence as a pause inside one (nginx and haproxy time the tunnel,
not the messages), so one measurement serves both: a response, then a quiet socket
watched up to --idle-max; when it is cut, the same again with our pings in the silence.
Checked by hand (nginx 1.22.1 ``proxy_read_timeout 3s``; haproxy 2.6 ``timeout tunnel
3s``; the websockets library as the client): both cut a quiet socket after 3.0 s with a
FIN and no Close frame, and both keep it open while the client pings every second (the
origin's pongs are traffic both ways).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from promptpath.core.findings import Finding, Verdict
from promptpath.core.wsclose import close_words
from promptpath.probes.idle_timeout.verdict import PROBE

#: A pinged socket cut this close to the quiet one's threshold was cut by the same timer.
SAME_TIMER_SLACK_S = 0.5
#: Stamps at the socket, timers in the hops.
RESOLUTION_S = 0.05

CloseBy = Literal["server", "protocol", "eof"]


@dataclass(frozen=True, slots=True, kw_only=True)
class QuietWatch:
    """One WebSocket held quiet after a complete response."""

    cap_s: float  # the longest it was watched
    ping_every_s: float | None = None  # our pings in the silence (None: none)
    pings_sent: int = 0
    pongs: int = 0
    status: int | None = None  # the upgrade's answer (101)
    server: str | None = None  # the 101's Server header
    quiet_from_ns: int | None = None  # the last read of the response
    closed_ns: int | None = None  # the close as the socket stamped it (None: open at cap)
    close_by: CloseBy | None = None
    close_code: int | None = None
    close_reason: str | None = None
    messages_while_quiet: int = 0  # the server spoke unasked (a keepalive of its own?)
    error: str | None = None  # the priming response failed: why

    @property
    def threshold_s(self) -> float | None:
        if self.closed_ns is None or self.quiet_from_ns is None:
            return None
        return round((self.closed_ns - self.quiet_from_ns) / 1e9, 3)

    @property
    def cut(self) -> bool:
        return self.closed_ns is not None

    def evidence(self) -> dict[str, object]:
        return {
            "cap_s": self.cap_s,
            "ping_every_s": self.ping_every_s,
            "pings_sent": self.pings_sent,
            "pongs": self.pongs,
            "threshold_s": self.threshold_s,
            "close": None
            if not self.cut
            else {"by": self.close_by, "code": self.close_code, "reason": self.close_reason},
            "messages_while_quiet": self.messages_while_quiet,
            "error": self.error,
        }


def ping_interval(threshold_s: float) -> float:
    """Pings well inside the threshold: a third of it, 0.2-10 s."""
    return round(min(10.0, max(0.2, threshold_s / 3)), 1)


def _how(watch: QuietWatch) -> str:
    if watch.close_by == "server":
        reason = f" ({watch.close_reason})" if watch.close_reason else ""
        return f"with a Close frame, {close_words(watch.close_code)}{reason}"
    if watch.close_by == "protocol":
        return f"with a frame that broke the protocol ({close_words(watch.close_code)})"
    return "without a Close frame (1006: the TCP connection ended)"


ADVICE_HOPS = (
    "nginx: proxy_read_timeout and proxy_send_timeout above the longest silence"
    " (proxy_read_timeout 3600s;) in the location that proxies the WebSocket",
    "haproxy: timeout tunnel 1h (an upgraded connection lives by it, else by timeout"
    " client/server)",
)


def judge(quiet: QuietWatch, pinged: QuietWatch | None) -> Finding:
    """``quiet``: no pings; ``pinged``: the re-test with pings, run only after a cut."""
    evidence: dict[str, object] = {
        "transport": "websocket",
        "quiet": quiet.evidence(),
        "pinged": None if pinged is None else pinged.evidence(),
        "threshold_s": quiet.threshold_s,
        "resolution_s": RESOLUTION_S,
        "pings_help": None,
    }
    who = f" (the 101's Server: {quiet.server})" if quiet.server else ""
    if quiet.error is not None:
        return Finding(
            probe=PROBE,
            verdict=Verdict.ERROR,
            summary=f"the WebSocket's priming response failed: {quiet.error}",
            evidence=evidence,
        )
    if not quiet.cut:
        extra = (
            f"; the server sent {quiet.messages_while_quiet} message(s) in the silence"
            if quiet.messages_while_quiet
            else ""
        )
        return Finding(
            probe=PROBE,
            verdict=Verdict.PASS,
            summary=f"a quiet WebSocket stayed open for {quiet.cap_s:g} s (--idle-max){extra}",
            evidence=evidence,
        )
    threshold = quiet.threshold_s or 0.0
    cut = f"a hop cuts a quiet WebSocket after {threshold:.1f} s {_how(quiet)}{who}"
    if pinged is None or pinged.error is not None:
        why = "" if pinged is None else f" (the re-test with pings failed: {pinged.error})"
        return Finding(
            probe=PROBE,
            verdict=Verdict.WARN,
            summary=f"{cut}; whether pings keep it open was not found{why}",
            evidence=evidence,
            advice=list(ADVICE_HOPS),
        )
    every = pinged.ping_every_s or 0.0
    if not pinged.cut or (pinged.threshold_s or 0.0) > threshold + max(
        SAME_TIMER_SLACK_S, 2 * every
    ):
        evidence["pings_help"] = True
        held = (
            f"stayed open {pinged.cap_s:g} s"
            if not pinged.cut
            else f"lasted {pinged.threshold_s:.1f} s"
        )
        return Finding(
            probe=PROBE,
            verdict=Verdict.WARN,
            summary=f"{cut}; with a ping every {every:g} s it {held}: the hop counts pings as"
            " activity",
            evidence=evidence,
            advice=[
                f"keep a ping in every silence shorter than {threshold:.0f} s (the websockets"
                " library pings every 20 s by default; the openai SDK keeps that default)",
                *ADVICE_HOPS,
            ],
        )
    evidence["pings_help"] = False
    return Finding(
        probe=PROBE,
        verdict=Verdict.FAIL,
        summary=f"{cut}; with a ping every {every:g} s it was cut again after"
        f" {pinged.threshold_s:.1f} s: the hop does not count pings as activity (a limit on"
        " the connection's age, or on data frames only)",
        evidence=evidence,
        advice=list(ADVICE_HOPS),
    )
