"""The ``upgrade`` verdict: did the WebSocket upgrade get through, and if not, how did it
fail? Pure: what the probe's own upgrade saw (``UpgradeTry``) and, for an answer other
than 101, what a plain GET to the same URL got (``PlainAnswer``) come in as arguments.

The failures it names, each with the configuration lines that fix it:

    refused          a status the upgrade itself earned (401, 403, 429, 5xx, or one the
                     plain GET does not get): who answered (``Server``) and what it said
    forwarded_plain  an answer without 101 that a plain GET gets too (or 426 Upgrade
                     Required, or a 2xx/3xx): a hop dropped ``Upgrade``/``Connection``
                     and forwarded the rest as an ordinary request (nginx without its two
                     ``proxy_set_header`` lines: checked by hand, nginx 1.22.1 answers the
                     origin's 405 for GET with its own ``Server``)
    invalid          not HTTP, or a 101 that breaks RFC 6455 §4.1 (a hop that answered the
                     upgrade itself: the key's answer is wrong)
    closed           a 101, then the connection ended before we sent anything
    no_pong          a 101, open, but our ping came back without a pong: frames do not
                     travel both ways
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from promptpath.core.findings import Finding, Verdict
from promptpath.core.wsclose import close_words

PROBE = "upgrade"

#: Statuses that refuse the upgrade on purpose, whatever a plain GET gets.
DELIBERATE = frozenset({401, 403, 407, 429})
#: Statuses a plain GET to a WebSocket-only endpoint typically earns (serve: 405 "GET not
#: allowed; use POST"); the same status to both says the upgrade arrived as a plain GET.
PLAIN_LIKE = frozenset({400, 404, 405})

Failure = Literal["refused", "forwarded_plain", "invalid", "closed", "no_pong"]

NGINX_LINES = (
    "proxy_http_version 1.1;",
    "proxy_set_header Upgrade $http_upgrade;",
    'proxy_set_header Connection "upgrade";',
)
#: nginx's tunnel keeps proxy_read_timeout (60 s by default) for a quiet socket.
NGINX_TIMEOUTS = ("proxy_read_timeout 3600s;", "proxy_send_timeout 3600s;")
#: haproxy passes the upgrade in HTTP mode on its own; a tunnel lives by `timeout tunnel`
#: (else `timeout client`/`timeout server`, often 30-60 s).
HAPROXY_LINES = ("timeout tunnel 1h",)


@dataclass(frozen=True, slots=True, kw_only=True)
class UpgradeTry:
    """What the probe's own upgrade saw (no message sent: nothing billed)."""

    status: int | None = None  # None: no HTTP answer (see error)
    server: str | None = None  # the answer's Server header
    via: str | None = None  # its Via header (a proxy that says so)
    upgrade_ms: float | None = None  # the GET's first byte to the 101 (or the refusal)
    message: str | None = None  # the refusal or failure in words (redacted)
    error_kind: str | None = None  # upgrade_invalid, network_error, timeout, ...
    error_stage: str | None = None  # the stage an error happened in
    subprotocol: str | None = None
    extensions: tuple[str, ...] = ()
    hold_s: float = 0.0  # how long the open socket was watched
    closed_after_ms: float | None = None  # the 101 to the close, when it closed
    close_by: str | None = None  # server, protocol, eof
    close_code: int | None = None
    close_reason: str | None = None
    messages: int = 0  # messages the server sent unasked (Realtime: session.created)
    pings: int = 0
    pong_ms: float | None = None  # the first ping's round trip
    handshake_ms: float | None = None  # the TCP handshake, to compare the pong with

    @property
    def upgraded(self) -> bool:
        return self.status == 101


@dataclass(frozen=True, slots=True, kw_only=True)
class PlainAnswer:
    """A plain GET (no Upgrade, no Connection: upgrade) to the same URL."""

    status: int | None = None
    server: str | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Judged:
    failure: Failure | None
    verdict: Verdict
    summary: str
    advice: Sequence[str] = field(default_factory=tuple)


def failure_of(up: UpgradeTry, plain: PlainAnswer | None) -> Failure | None:
    """Which failure the upgrade met (None: it got through)."""
    if up.error_kind is not None and up.status is None:
        return "invalid" if up.error_kind == "upgrade_invalid" else None
    if up.status is None:
        return None
    if not up.upgraded:
        status = up.status
        if status == 426 or status < 400:
            return "forwarded_plain"
        if status in DELIBERATE or status >= 500:
            return "refused"
        same = plain is not None and plain.status == status
        return "forwarded_plain" if same and status in PLAIN_LIKE else "refused"
    if up.closed_after_ms is not None:
        return "closed"
    if up.pings and up.pong_ms is None:
        return "no_pong"
    return None


def _who(up: UpgradeTry) -> str:
    if up.server:
        return f" (Server: {up.server}" + (f", Via: {up.via})" if up.via else ")")
    return f" (Via: {up.via})" if up.via else ""


def _nginx(server: str | None) -> bool:
    return server is not None and "nginx" in server.lower()


def _header_advice(server: str | None) -> list[str]:
    nginx = "nginx: in the location that proxies it, " + " ".join(NGINX_LINES)
    haproxy = (
        "haproxy (mode http) passes the upgrade as is; check that no `http-request"
        " del-header Connection/Upgrade` or `option httpclose` strips it"
    )
    return [nginx] if _nginx(server) else [nginx, haproxy]


def _closed_advice() -> list[str]:
    return [
        "nginx: " + " ".join(NGINX_LINES + NGINX_TIMEOUTS),
        "haproxy: " + "; ".join(HAPROXY_LINES) + " (a tunnel's timer, once upgraded)",
        "check the origin's own log for why it closed the socket it just accepted",
    ]


def _judge(up: UpgradeTry, plain: PlainAnswer | None) -> _Judged:
    failure = failure_of(up, plain)
    who = _who(up)
    if up.status is None and failure is None:
        where = up.error_stage or "the upgrade"
        return _Judged(
            failure=None,
            verdict=Verdict.ERROR,
            summary=f"the upgrade was not tried to the end: {where} failed: {up.message}",
        )
    if failure == "invalid":
        return _Judged(
            failure=failure,
            verdict=Verdict.FAIL,
            summary=f"the answer to the upgrade is not a valid 101: {up.message}",
            advice=(
                "a hop answered the upgrade itself or rewrote the 101: let it pass the"
                " origin's handshake untouched (Sec-WebSocket-Accept answers our key)",
            ),
        )
    if failure == "forwarded_plain":
        status = up.status
        same = (
            f"; a plain GET gets the same {status}"
            if plain is not None and plain.status == status
            else ""
        )
        asks = " (426: the origin asks for the upgrade it never saw)" if status == 426 else ""
        return _Judged(
            failure=failure,
            verdict=Verdict.FAIL,
            summary=f"answered {status} without 101{who}: the upgrade reached the origin as a"
            f" plain GET{asks}{same}: a hop does not pass the Upgrade and Connection headers",
            advice=_header_advice(up.server),
        )
    if failure == "refused":
        said = f": {up.message}" if up.message else ""
        advice: list[str] = []
        if up.status in (401, 403, 407):
            advice.append("check the key (and, through a gateway, that it forwards it)")
        elif up.status == 429:
            advice.append("rate limited: see the ratelimit probe and Retry-After")
        elif _nginx(up.server) and up.status == 400:
            # Checked by hand: nginx with the two proxy_set_header lines but the default
            # proxy_http_version 1.0 gets the origin's 400 (hypercorn refuses an HTTP/1.0
            # upgrade) and answers it with its own Server.
            advice.append("nginx: " + " ".join(NGINX_LINES) + " (HTTP/1.1 to the upstream)")
        return _Judged(
            failure=failure,
            verdict=Verdict.FAIL,
            summary=f"the upgrade was refused with {up.status}{who}{said}",
            advice=tuple(advice),
        )
    if failure == "closed":
        how = (
            f"a Close frame, {close_words(up.close_code)}"
            + (f" ({up.close_reason})" if up.close_reason else "")
            if up.close_by == "server"
            else "no Close frame (1006)"
            if up.close_by == "eof"
            else f"a frame that broke the protocol ({close_words(up.close_code)})"
        )
        return _Judged(
            failure=failure,
            verdict=Verdict.FAIL,
            summary=f"upgraded{who}, then the connection closed {up.closed_after_ms:.0f} ms"
            f" after the 101 with {how}, before any message was sent",
            advice=_closed_advice(),
        )
    if failure == "no_pong":
        return _Judged(
            failure=failure,
            verdict=Verdict.WARN,
            summary=f"upgraded{who}, but our ping got no pong in {up.hold_s:g} s: frames may"
            " not travel both ways through a hop",
            advice=_closed_advice()[:2],
        )
    pong = ""
    if up.pong_ms is not None:
        pong = f"; a ping came back in {up.pong_ms:.1f} ms"
        if up.handshake_ms is not None:
            pong += f" (TCP handshake {up.handshake_ms:.1f} ms)"
    negotiated = ", ".join(
        x for x in (up.subprotocol and f"subprotocol {up.subprotocol}", *up.extensions) if x
    )
    upgraded_in = f" in {up.upgrade_ms:.0f} ms" if up.upgrade_ms is not None else ""
    return _Judged(
        failure=None,
        verdict=Verdict.PASS,
        summary=f"upgraded to WebSocket{upgraded_in}{who}"
        + (f" ({negotiated})" if negotiated else "")
        + f", open for {up.hold_s:g} s{pong}",
    )


def judge(up: UpgradeTry, plain: PlainAnswer | None = None) -> Finding:
    judged = _judge(up, plain)
    evidence: dict[str, object] = {
        "failure": judged.failure,
        "status": up.status,
        "server": up.server,
        "via": up.via,
        "upgrade_ms": up.upgrade_ms,
        "error": None
        if up.error_kind is None
        else {"stage": up.error_stage, "kind": up.error_kind, "message": up.message},
        "subprotocol": up.subprotocol,
        "extensions": list(up.extensions),
        "hold_s": up.hold_s,
        "closed_after_ms": up.closed_after_ms,
        "close": {"by": up.close_by, "code": up.close_code, "reason": up.close_reason},
        "messages_unasked": up.messages,
        "pings": up.pings,
        "pong_ms": up.pong_ms,
        "tcp_handshake_ms": up.handshake_ms,
        "plain_get": None
        if plain is None
        else {"status": plain.status, "server": plain.server, "error": plain.error},
    }
    return Finding(
        probe=PROBE,
        verdict=judged.verdict,
        summary=judged.summary,
        evidence=evidence,
        advice=list(judged.advice),
    )


def not_websocket(url: str) -> Finding:
    """The skip for a target that is not ws:// or wss://."""
    scheme = url.split(":", 1)[0]
    return Finding(
        probe=PROBE,
        verdict=Verdict.SKIP,
        summary=f"a {scheme}:// target: no WebSocket upgrade to check (give a ws:// or wss:// URL)",
    )
