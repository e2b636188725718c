"""The ``mtu`` probe: a path-MTU black hole, found by clamping the MSS (``net.mtu``).

Also run by the ``path`` probe when the trace's TLS handshake stalled: that stall after our
small first flight is what a black hole looks like from the client.
"""

from __future__ import annotations

import functools
import socket

import anyio

from promptpath.core.findings import Finding, Verdict
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.mtu.verdict import PROBE, Attempt, judge

HANDSHAKE_TIMEOUT_S = 2.0
SEARCH_STEPS = 5


def _skip(reason: str) -> Finding:
    return Finding(probe=PROBE, verdict=Verdict.SKIP, summary=f"path MTU not checked: {reason}")


async def mtu_finding(ctx: ProbeContext) -> Finding:
    """The full-size and clamped handshakes toward the trace's address, judged."""
    from promptpath.net.mtu import HEADERS, check

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
    ctx.progress(f"mtu: TLS handshakes to {address[0]} port {address[1]}, full-size and clamped")
    result = await anyio.to_thread.run_sync(
        functools.partial(
            check,
            (address[0], address[1]),
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
    return judge(attempts, largest_working_mss=result.largest_working_mss, headers=HEADERS[family])


@register
class MTUProbe(Probe):
    name = PROBE
    description = "a path-MTU black hole: does the TLS flight arrive only in small segments?"

    def cost(self, ctx: ProbeContext) -> Cost:
        return Cost(seconds=(2 + SEARCH_STEPS) * HANDSHAKE_TIMEOUT_S + 1)

    async def run(self, ctx: ProbeContext) -> Finding:
        return await mtu_finding(ctx)
