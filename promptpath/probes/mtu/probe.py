"""The ``mtu`` probe: a path-MTU black hole, found by clamping the MSS (``net.mtu``).

Also run by the ``path`` probe when the trace's TLS handshake stalled: that stall after our
small first flight is what a black hole looks like from the client. A black hole found is
then placed: where probes of the size that failed stop toward the server (``net.mtu.locate``,
read by ``mtu.verdict.place``).
"""

from __future__ import annotations

import functools
import socket
import weakref
from typing import TYPE_CHECKING

import anyio

from promptpath.core.findings import Finding, Verdict
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.mtu.verdict import PROBE, Attempt, judge, place
from promptpath.probes.path.hops import samples_of

if TYPE_CHECKING:
    from promptpath.tracer.orchestrator import TraceResult

HANDSHAKE_TIMEOUT_S = 2.0
SEARCH_STEPS = 5
#: The packets the locating probes send when no clamped handshake failed: Ethernet's.
FULL_PACKET_BYTES = 1500


def _skip(reason: str) -> Finding:
    return Finding(probe=PROBE, verdict=Verdict.SKIP, summary=f"path MTU not checked: {reason}")


async def mtu_finding(ctx: ProbeContext) -> Finding:
    """The full-size and clamped handshakes toward the trace's address, judged; for a black
    hole, where full-size packets toward the server stop. Once per trace: the path probe
    runs it after a TLS stall, and the ICMP its locating draws can teach this host the path
    MTU, after which a second check would see a path that no longer fails from here."""
    result = ctx.result
    if result is not None:
        done = _checked.get(id(result))
        if done is not None and done[0]() is result:
            return done[1]
    finding = await _measure(ctx)
    if result is not None:
        _checked.clear()  # one trace at a time is all a run needs to remember
        _checked[id(result)] = (weakref.ref(result), finding)
    return finding


#: The finding of the last trace checked, by the trace's id (with a weak reference to
#: tell a reused id from the same trace).
_checked: dict[int, tuple[weakref.ref[TraceResult], Finding]] = {}


async def _measure(ctx: ProbeContext) -> Finding:
    from promptpath.net.mtu import HEADERS, check, locate
    from promptpath.net.pathtrace import PathUnsupported

    timeline = None if ctx.result is None else ctx.result.timeline
    options = ctx.options
    if options.target.scheme != "https":
        return _skip("the target is plain http://: there is no TLS flight to watch")
    if options.proxy is not None:
        return _skip("the trace went through a forward proxy: its path ends at the proxy")
    address = None if timeline is None else timeline.address
    if address is None and timeline is not None and timeline.attempts:
        address = (timeline.attempts[-1].ip, timeline.attempts[-1].port)
    if address is None:
        return _skip("the trace never reached an address")
    if timeline is not None and timeline.http_version == "HTTP/3":
        return _skip("HTTP/3: the path probe checks that 1200-byte datagrams get through")
    family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
    target = (address[0], address[1])
    ctx.progress(f"mtu: TLS handshakes to {address[0]} port {address[1]}, full-size and clamped")
    result = await anyio.to_thread.run_sync(
        functools.partial(
            check,
            target,
            family,
            options.target.host,
            timeout_s=HANDSHAKE_TIMEOUT_S,
            steps=SEARCH_STEPS,
        )
    )
    attempts = [
        Attempt(
            mss=h.mss,
            completed=h.completed,
            elapsed_ms=h.elapsed_ms,
            received=h.received,
            error=h.error,
        )
        for h in result.tried
    ]
    headers = HEADERS[family]
    location = None
    if result.black_hole:
        good = result.largest_working_mss or 0
        failing = [a.mss for a in attempts[1:] if not a.completed and a.mss and a.mss > good]
        packet = min(failing) + headers if failing else FULL_PACKET_BYTES
        ctx.progress(f"mtu: {packet}-byte datagrams with DF and rising TTL, to place it")
        try:
            located = await anyio.to_thread.run_sync(
                functools.partial(locate, target, family, packet_bytes=packet)
            )
        except PathUnsupported:
            located = None
        if located is not None:
            location = place(
                samples_of(located.big.replies),
                samples_of(located.small.replies),
                address[0],
                packet_bytes=located.packet_bytes,
            )
    return judge(
        attempts,
        largest_working_mss=result.largest_working_mss,
        headers=headers,
        location=location,
    )


@register
class MTUProbe(Probe):
    name = PROBE
    description = "a path-MTU black hole: does the TLS flight arrive only in small segments?"

    def cost(self, ctx: ProbeContext) -> Cost:
        from promptpath.net.mtu import LOCATE_BUDGET_S

        return Cost(seconds=(2 + SEARCH_STEPS) * HANDSHAKE_TIMEOUT_S + LOCATE_BUDGET_S + 1)

    async def run(self, ctx: ProbeContext) -> Finding:
        return await mtu_finding(ctx)
