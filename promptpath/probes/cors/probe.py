"""The ``cors`` probe: one preflight ``OPTIONS`` with an unrelated Origin, the way a
browser asks before a cross-origin POST with ``Authorization`` (no key is sent), then the
traced response's own headers; the verdict lives in ``cors.verdict``.

The preflight goes the trace's way (``--resolve``, ``--connect-to``, a forward proxy, the
HTTP version) over a connection of its own.
"""

from __future__ import annotations

import time

import anyio

from promptpath.core.errors import PromptpathError
from promptpath.core.findings import Finding
from promptpath.net.transport import TransportError, WireRequest
from promptpath.options import RunOptions
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.cors.verdict import PROBE, PROBE_ORIGIN, Preflight, judge, websocket_skip
from promptpath.tracer.orchestrator import Tracer, new_timeline, transport_for
from promptpath.tracer.request import SECRET_HEADERS, key_sent, sent_header

PREFLIGHT_TIMEOUT_S = 10.0
#: Most of a preflight answer's body we read (it carries nothing we use).
BODY_LIMIT = 64 * 1024


def preflight_options(options: RunOptions) -> RunOptions:
    """The trace's options without the key: a browser's preflight carries none."""
    return options.derive(
        keyless=True,
        headers=tuple(h for h in options.headers if h[0].lower() not in SECRET_HEADERS),
        timeout=min(options.timeout, PREFLIGHT_TIMEOUT_S),
    )


async def send_preflight(options: RunOptions) -> Preflight:
    opts = preflight_options(options)
    headers = [
        ("origin", PROBE_ORIGIN),
        ("access-control-request-method", "POST"),
        ("access-control-request-headers", "authorization, content-type"),
        ("accept", "*/*"),
    ]
    agent = sent_header(opts, "user-agent")
    if agent:
        headers.append(("user-agent", agent))
    transport = transport_for(opts)
    tracer = Tracer(opts, transport)
    timeline = new_timeline()
    recorder = transport.recorder(timeline)
    try:
        with anyio.fail_after(opts.timeout):
            conn = await tracer.connect(timeline, time.monotonic() + opts.timeout, recorder)
            try:
                wire = WireRequest(
                    method="OPTIONS", path=opts.target.path, headers=tuple(headers), body=b""
                )
                head, body = await conn.request(wire)
                read = 0
                try:
                    async for piece in body:
                        read += len(piece.data)
                        if read > BODY_LIMIT:
                            break
                finally:
                    await body.aclose()
            finally:
                await conn.aclose()
    except TimeoutError:
        return Preflight(status=None, error=f"no answer within {opts.timeout:g} s")
    except (PromptpathError, TransportError, OSError) as exc:
        return Preflight(status=None, error=str(exc) or type(exc).__name__)
    return Preflight(status=head.status, headers=head.headers)


@register
class CORSProbe(Probe):
    name = PROBE
    description = "may any web page call this endpoint with a key? (one preflight, no key)"

    def cost(self, ctx: ProbeContext) -> Cost:
        if ctx.options.target.websocket:
            return Cost()
        return Cost(requests=1, seconds=min(ctx.options.timeout, PREFLIGHT_TIMEOUT_S))

    async def run(self, ctx: ProbeContext) -> Finding:
        if ctx.options.target.websocket:  # an OPTIONS here would go out as an upgrade
            return websocket_skip(ctx.options.target.url)
        ctx.progress(f"cors: OPTIONS with Origin {PROBE_ORIGIN}, no key")
        preflight = await send_preflight(ctx.options)
        tl = ctx.result.timeline if ctx.result is not None else None
        status = None if tl is None else tl.status
        keyed = key_sent(ctx.options) and status is not None and status < 400
        takes_key = keyed or status in (401, 403)
        return judge(preflight, [] if tl is None else tl.response_headers, takes_key=takes_key)
