"""The ``upgrade`` probe: a WebSocket upgrade of its own, judged by ``upgrade.verdict``.

It goes the trace's way (``--resolve``, ``--connect-to``, a forward proxy's CONNECT),
sends the upgrade GET with the trace's headers and **no message** (nothing is billed),
then holds the upgraded socket open for HOLD_S with one ping in it: a socket closed
right after its 101, or a ping without its pong, is a hop that does not tunnel. An
answer other than 101 is compared with a plain GET to the same URL (same headers, no
Upgrade): the same answer says the upgrade arrived as a plain request.
"""

from __future__ import annotations

import time

import anyio

from promptpath.core.errors import PromptpathError
from promptpath.core.findings import Finding
from promptpath.core.timeline import Timeline
from promptpath.net.transport import TransportError, WireRequest
from promptpath.options import RunOptions
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.upgrade.verdict import (
    PROBE,
    PlainAnswer,
    UpgradeTry,
    judge,
    not_websocket,
)
from promptpath.tracer.body import read_limited, redact_for
from promptpath.tracer.failure import phase_of, timeout_error, transport_error
from promptpath.tracer.ingest import snippet, status_error
from promptpath.tracer.orchestrator import Tracer, new_timeline, transport_for
from promptpath.tracer.request import key_sent, prepare

#: Each of the two requests' deadline, at most (the trace's --timeout if shorter).
UPGRADE_TIMEOUT_S = 10.0
#: How long the upgraded socket is held open, and when the ping goes out in it.
HOLD_S = 1.0
PING_AFTER_S = 0.1
#: Longest Server/Via value quoted.
HEADER_LIMIT = 80


def probe_options(options: RunOptions) -> RunOptions:
    return options.derive(timeout=min(options.timeout, UPGRADE_TIMEOUT_S))


def _ms(a: int | None, b: int | None) -> float | None:
    return None if a is None or b is None else round((b - a) / 1e6, 3)


def _header(timeline: Timeline, name: str, options: RunOptions) -> str | None:
    value = timeline.header(name)
    return None if value is None else snippet(value, HEADER_LIMIT, redact_for(options))


def refusal_words(timeline: Timeline, body: bytes, options: RunOptions) -> str:
    """What a refusal's status and body say (redacted, one line), as the trace says it."""
    return status_error(
        timeline,
        body,
        key_env=options.api_key_env,
        key_sent=key_sent(options),
        redact=redact_for(options),
    ).message


def _handshake_ms(timeline: Timeline) -> float | None:
    stage = timeline.stage("connect") or timeline.stage("proxy_connect")
    return None if stage is None or stage.duration_ns is None else round(stage.duration_ns / 1e6, 3)


async def try_upgrade(options: RunOptions, *, hold_s: float = HOLD_S) -> UpgradeTry:
    """One upgrade with no message after it, held open ``hold_s`` with one ping."""
    options = options.derive(ws_pings=(PING_AFTER_S * 1000, 1))
    transport = transport_for(options)  # the client shape's WebSocket settings, one ping
    tracer = Tracer(options, transport)
    timeline = new_timeline()
    recorder = transport.recorder(timeline)
    prepared = prepare(options)
    wire = WireRequest(
        method="GET", path=options.target.path, headers=prepared.headers, body=b"", messages=()
    )
    try:
        with anyio.fail_after(options.timeout):
            conn = await tracer.connect(timeline, time.monotonic() + options.timeout, recorder)
            try:
                head, body = await conn.request(wire, timeline)
                timeline.status = head.status
                timeline.response_headers = list(head.headers)
                if head.status != 101:
                    said = refusal_words(timeline, await read_limited(body), options)
                    return _seen(timeline, options, message=said)
                info = timeline.websocket
                assert info is not None
                with anyio.move_on_after(hold_s):
                    try:
                        async for _ in body:
                            pass  # messages are counted in info; nothing is decoded
                    except TransportError:
                        pass  # the close is in info
                await body.aclose()
                return _seen(timeline, options, hold_s=hold_s)
            finally:
                await conn.aclose()
    except TimeoutError:
        err: PromptpathError = timeout_error(options, phase_of(timeline, options))
    except PromptpathError as exc:
        err = exc
    except (TransportError, OSError) as exc:
        err = transport_error(exc, timeline, options)
    return UpgradeTry(
        message=err.message,
        error_kind=err.kind,
        error_stage=err.stage,
        handshake_ms=_handshake_ms(timeline),
    )


def _seen(
    timeline: Timeline, options: RunOptions, *, message: str | None = None, hold_s: float = 0.0
) -> UpgradeTry:
    stage = timeline.stage("upgrade")
    ws = timeline.websocket
    closed_after = None
    pong = None
    if ws is not None and ws.close_by not in (None, "client"):
        closed_after = _ms(ws.upgraded_ns, ws.close_ns)
    if ws is not None and ws.pings:
        rtt = ws.pings[0].rtt_ns
        pong = None if rtt is None else round(rtt / 1e6, 3)
    return UpgradeTry(
        status=timeline.status,
        server=_header(timeline, "server", options),
        via=_header(timeline, "via", options),
        upgrade_ms=None if stage is None or stage.duration_ns is None else stage.duration_ns / 1e6,
        message=message,
        subprotocol=None if ws is None else ws.subprotocol,
        extensions=() if ws is None else ws.extensions,
        hold_s=hold_s,
        closed_after_ms=closed_after,
        close_by=None if closed_after is None or ws is None else ws.close_by,
        close_code=None if closed_after is None or ws is None else ws.close_code,
        close_reason=None if closed_after is None or ws is None else ws.close_reason,
        messages=0 if ws is None else ws.messages,
        pings=0 if ws is None else len(ws.pings),
        pong_ms=pong,
        handshake_ms=_handshake_ms(timeline),
    )


async def plain_get(options: RunOptions) -> PlainAnswer:
    """The same URL and headers as a plain HTTP/1.1 GET: what a hop that drops Upgrade
    and Connection forwards."""
    from promptpath.net.http import TCPTransport

    opts = options.derive(http="1.1")
    transport = TCPTransport()
    tracer = Tracer(opts, transport)
    timeline = new_timeline()
    recorder = transport.recorder(timeline)
    wire = WireRequest(method="GET", path=opts.target.path, headers=prepare(opts).headers, body=b"")
    try:
        with anyio.fail_after(opts.timeout):
            conn = await tracer.connect(timeline, time.monotonic() + opts.timeout, recorder)
            try:
                head, body = await conn.request(wire)
                timeline.response_headers = list(head.headers)
                await read_limited(body)
                await body.aclose()
            finally:
                await conn.aclose()
    except TimeoutError:
        return PlainAnswer(error=f"no answer within {opts.timeout:g} s")
    except (PromptpathError, TransportError, OSError) as exc:
        return PlainAnswer(error=str(exc) or type(exc).__name__)
    return PlainAnswer(status=head.status, server=_header(timeline, "server", opts))


def wants_plain(up: UpgradeTry) -> bool:
    """Only an answer other than 101 is compared with a plain GET."""
    return up.status is not None and not up.upgraded


@register
class UpgradeProbe(Probe):
    name = PROBE
    description = "does the WebSocket upgrade get through, and stay open? (no message sent)"

    def cost(self, ctx: ProbeContext) -> Cost:
        if not ctx.options.target.websocket:
            return Cost()
        timeout = probe_options(ctx.options).timeout
        return Cost(requests=2, seconds=2 * timeout + HOLD_S)

    async def run(self, ctx: ProbeContext) -> Finding:
        options = ctx.options
        if not options.target.websocket:
            return not_websocket(options.target.url)
        opts = probe_options(options)
        ctx.progress(
            f"upgrade: the upgrade GET with no message after it, held open {HOLD_S:g} s with"
            " one ping"
        )
        up = await try_upgrade(opts)
        plain = None
        if wants_plain(up):
            ctx.progress(f"upgrade: answered {up.status}; the same URL as a plain GET to compare")
            plain = await plain_get(opts)
        return judge(up, plain)
