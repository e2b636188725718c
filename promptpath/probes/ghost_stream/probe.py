"""The ``ghost-stream`` probe: does the path stop the model when the client leaves?

Canary mode only. A traced HTTP/1.1 request asks the reference endpoint for a paced
answer tagged with a probe id, reads ``READ_TOKENS`` tokens and leaves — once with a TCP
reset (a closed tab, a killed process), once with a clean close (FIN: a client that
aborts its request). A third request, over HTTP/2, leaves by RST_STREAM CANCEL and keeps
its connection open, as a browser aborts a fetch on a multiplexed connection (RFC 9113
section 8.1: a client that no longer wants a response resets its stream): a hop may pass
a closed connection upstream and still miss a reset stream. (httpcore, under the httpx
the Python SDKs use, sends no RST_STREAM when a response is closed early: it forgets the
stream and leaves it open until the connection ends. Measured with httpx 0.28.1,
httpcore 1.0.9, h2 4.4.1, ``http2=True``, against the canary over TLS: 5 of 40 tokens
read, the response closed, the client kept 3 s: all 40 generated, no disconnect seen.)
It needs HTTP/2 on the path (ALPN h2 for https://, ``--http 2`` for h2c on http://);
without it that style is reported as not tried. Then it asks the endpoint (through the path, or at
``--canary-admin URL``) what happened to the tagged request: whether and when it saw the
client leave, and how many tokens it produced that nobody read. Blind mode cannot see
the upstream and says so.
"""

from __future__ import annotations

import dataclasses
import secrets
import time

import anyio
import httpx

from promptpath.core.findings import Finding, Verdict
from promptpath.core.redaction import Redactor
from promptpath.core.timeline import count_content
from promptpath.core.urlsafe import shown_url, url_credentials
from promptpath.net.http import TCPConnection, TCPTransport
from promptpath.options import RunOptions
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.canary import canary_controls, is_canary, with_controls
from promptpath.probes.ghost_stream.verdict import PROBE, GhostRun, Style, judge
from promptpath.probes.settings import ProbeSettings
from promptpath.tracer.orchestrator import Tracer, new_timeline, ssl_context_for

#: The canary's answer: long enough that a ghost shows (~35 tokens nobody read) and
#: short enough to cost two seconds.
PLANNED_TOKENS = 40
RATE = 20.0
READ_TOKENS = 5
STYLES: tuple[Style, ...] = ("abrupt", "clean", "h2_cancel")
#: After the client left: how long the upstream may take to finish what it would.
SETTLE_S = 3.0
REQUEST_TIMEOUT_S = 15.0
ADMIN_POLL_S = 0.1
ADMIN_PATH = "/stats/requests/"
PROMPT = "Count from 1 to 40, one number per line."


def admin_base(options: RunOptions, admin: str | None = None) -> str:
    """Where to ask: ``--canary-admin``, else the target's own origin (through the path)."""
    if admin:
        return admin.rstrip("/")
    target = options.target
    host = f"[{target.host}]" if ":" in target.host else target.host
    return f"{target.scheme}://{host}:{target.port}"


@register
class GhostStreamProbe(Probe):
    name = PROBE
    description = "does the path stop the model when the client leaves mid-stream?"

    def cost(self, ctx: ProbeContext) -> Cost:
        if not is_canary(ctx.settings):
            return Cost()
        stream_s = PLANNED_TOKENS / RATE
        return Cost(
            requests=len(STYLES),
            tokens=len(STYLES) * PLANNED_TOKENS,
            seconds=len(STYLES) * (REQUEST_TIMEOUT_S + stream_s + SETTLE_S),
        )

    async def run(self, ctx: ProbeContext) -> Finding:
        options = ctx.options
        if not is_canary(ctx.settings):
            return Finding(
                probe=PROBE,
                verdict=Verdict.SKIP,
                summary="blind mode cannot see the upstream: only the canary reports what it"
                " generated after the client left",
                advice=[
                    "Run against promptpath serve (--canary), behind the same gateways, to"
                    " see whether they pass a client's disconnect upstream."
                ],
            )
        runs: list[GhostRun] = []
        for style in STYLES:
            ctx.progress(f"ghost-stream: reading {READ_TOKENS} tokens, then leaving ({style})")
            run = await leave_early(options, style, ctx.settings)
            runs.append(run)
            if run.record is None and run.unavailable is None:
                break  # the next style would meet the same wall
        return judge(runs)


async def leave_early(
    options: RunOptions, style: Style, settings: ProbeSettings | None = None
) -> GhostRun:
    """One tagged canary request the client walks away from; the canary's account of it."""
    probe_id = f"ghost-{secrets.token_hex(6)}-{style}"
    # The tag is a control like the others: it rides in the body too (--canary-controls),
    # so a gateway that strips x-promptpath-* headers still delivers it.
    controls = (*canary_controls(tokens=PLANNED_TOKENS, rate=RATE), ("probe-id", probe_id))
    settings = settings or ProbeSettings()
    h2 = style == "h2_cancel"
    run = GhostRun(style=style, read=0, left_unix_ns=0, planned=PLANNED_TOKENS, rate=RATE)
    if h2 and options.target.scheme == "http" and options.http != "2":
        # No ALPN on cleartext, and h2c by prior knowledge to a hop that does not speak it
        # is a 400 or a closed connection, not a finding: only when asked for.
        return dataclasses.replace(
            run, unavailable="plain http:// without --http 2 (h2c): no HTTP/2 stream to reset"
        )
    opts = with_controls(
        options.derive(
            # Leaving HTTP/1.1 means closing the connection; on HTTP/2, resetting one stream.
            http="2" if h2 else "1.1",
            prompt=PROMPT,
            max_tokens=PLANNED_TOKENS,
            timeout=REQUEST_TIMEOUT_S,
        ),
        controls,
        settings.canary.controls,
    )
    transport = TCPTransport(h2c=h2 and options.target.scheme == "http")
    tracer = Tracer(opts, transport, stop_after_tokens=READ_TOKENS)
    timeline = new_timeline()
    try:
        exc = await tracer.request(timeline)
        read = count_content(timeline.events)
        conn = tracer.connection
        if tracer.stopped_ns is None or conn is None:
            why = exc.message if exc is not None else f"the stream ended after {read} tokens"
            return dataclasses.replace(run, read=read, problem=f"the canary request: {why}")
        if h2 and not conn.multiplexed:  # over TCP, multiplexed means HTTP/2
            return dataclasses.replace(
                run, read=read, unavailable="the server chose HTTP/1.1 (no h2 in ALPN)"
            )
        left_unix_ns = time.time_ns()
        if style == "abrupt":
            await conn.abort()
        elif style == "clean":
            await tracer.aclose()
        elif not (isinstance(conn, TCPConnection) and await conn.cancel_stream()):
            return dataclasses.replace(
                run, read=read, problem="the stream had ended before it could be reset"
            )
        run = dataclasses.replace(run, read=read, left_unix_ns=left_unix_ns)
        # The HTTP/2 connection stays open while the canary is asked: a hop must act on
        # the reset stream alone, not on a closed connection.
        record, problem = await ask_canary(opts, probe_id, settings.ghost_stream.admin)
    finally:
        await tracer.aclose()
    return dataclasses.replace(run, record=record, problem=problem)


async def ask_canary(
    options: RunOptions, probe_id: str, admin: str | None = None
) -> tuple[dict[str, object] | None, str | None]:
    """Poll the canary's record of ``probe_id`` until its generation ended (or the
    stream's planned time plus ``SETTLE_S`` passed: a ghost still running is an answer)."""
    url = admin_base(options, admin) + ADMIN_PATH + probe_id
    # The admin URL's userinfo (httpx sends it as Basic) is never shown; nor what an
    # error message may quote of it.
    shown = shown_url(url)
    scrub = Redactor.of(url_credentials(url)).text
    verify = ssl_context_for(options) if url.startswith("https:") else False
    proxy = options.proxy.url if options.proxy is not None and not admin else None
    deadline = time.monotonic() + PLANNED_TOKENS / RATE + SETTLE_S
    record: dict[str, object] | None = None
    async with httpx.AsyncClient(
        verify=verify, proxy=proxy, trust_env=False, timeout=5.0
    ) as client:
        while True:
            try:
                got = await client.get(url)
            except httpx.HTTPError as exc:
                return None, f"cannot reach {shown}: {scrub(str(exc) or type(exc).__name__)}"
            if got.status_code == 404:
                # The canary tags a request when it arrives, before its first token: a
                # request we read tokens from and that is not there never had the tag.
                return None, (
                    f"the canary has no request tagged {probe_id} ({shown} answered 404): a hop"
                    " strips the x-promptpath-* headers and the body's promptpath field, or that"
                    " address is not the canary"
                )
            if got.status_code != 200:
                return None, f"{shown} answered {got.status_code}"
            record = got.json()
            if record is not None and record.get("ended_unix_ns") is not None:
                return record, None
            if time.monotonic() > deadline:
                break
            await anyio.sleep(ADMIN_POLL_S)
    return record, None  # still generating at the deadline: the ghost is the answer
