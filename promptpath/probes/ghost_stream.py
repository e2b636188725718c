"""The ``ghost-stream`` probe: does the path stop the model when the client leaves?

Canary mode only. A traced HTTP/1.1 request asks the reference endpoint for a paced
answer tagged with a probe id, reads ``READ_TOKENS`` tokens and leaves — once with a TCP
reset (a closed tab, a killed process), once with a clean close (FIN: a client that
aborts its request). Then it asks the endpoint (through the path, or at
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
from promptpath.core.timeline import count_content
from promptpath.net.http import TCPTransport
from promptpath.options import RunOptions
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.canary import canary_controls, is_canary, with_controls
from promptpath.probes.ghost_verdict import PROBE, GhostRun, Style, judge
from promptpath.tracer.orchestrator import Tracer, new_timeline, ssl_context_for

#: The canary's answer: long enough that a ghost shows (~35 tokens nobody read) and
#: short enough to cost two seconds.
PLANNED_TOKENS = 40
RATE = 20.0
READ_TOKENS = 5
STYLES: tuple[Style, ...] = ("abrupt", "clean")
#: After the client left: how long the upstream may take to finish what it would.
SETTLE_S = 3.0
REQUEST_TIMEOUT_S = 15.0
ADMIN_POLL_S = 0.1
ADMIN_PATH = "/stats/requests/"
PROMPT = "Count from 1 to 40, one number per line."


def admin_base(options: RunOptions) -> str:
    """Where to ask: ``--canary-admin``, else the target's own origin (through the path)."""
    given = options.probe_options.get("canary_admin")
    if isinstance(given, str) and given:
        return given.rstrip("/")
    target = options.target
    host = f"[{target.host}]" if ":" in target.host else target.host
    return f"{target.scheme}://{host}:{target.port}"


@register
class GhostStreamProbe(Probe):
    name = PROBE
    description = "does the path stop the model when the client leaves mid-stream?"

    def cost(self, ctx: ProbeContext) -> Cost:
        if not is_canary(ctx.options):
            return Cost()
        stream_s = PLANNED_TOKENS / RATE
        return Cost(
            requests=len(STYLES),
            tokens=len(STYLES) * PLANNED_TOKENS,
            seconds=len(STYLES) * (REQUEST_TIMEOUT_S + stream_s + SETTLE_S),
        )

    async def run(self, ctx: ProbeContext) -> Finding:
        options = ctx.options
        if not is_canary(options):
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
            run = await leave_early(options, style)
            runs.append(run)
            if run.record is None:
                break  # the second style would meet the same wall
        return judge(runs)


async def leave_early(options: RunOptions, style: Style) -> GhostRun:
    """One tagged canary request the client walks away from; the canary's account of it."""
    probe_id = f"ghost-{secrets.token_hex(6)}-{style}"
    # The tag is a control like the others: it rides in the body too (--canary-controls),
    # so a gateway that strips x-promptpath-* headers still delivers it.
    controls = (*canary_controls(tokens=PLANNED_TOKENS, rate=RATE), ("probe-id", probe_id))
    opts = with_controls(
        dataclasses.replace(
            options,
            http="1.1",  # leaving = closing the connection; HTTP/2 would reset one stream
            prompt=PROMPT,
            max_tokens=PLANNED_TOKENS,
            warm=False,
            timeout=REQUEST_TIMEOUT_S,
        ),
        controls,
    )
    run = GhostRun(style=style, read=0, left_unix_ns=0, planned=PLANNED_TOKENS, rate=RATE)
    tracer = Tracer(opts, TCPTransport(), stop_after_tokens=READ_TOKENS)
    timeline = new_timeline()
    try:
        exc = await tracer.request(timeline)
        read = count_content(timeline.events)
        conn = tracer.connection
        if tracer.stopped_ns is None or conn is None:
            why = exc.message if exc is not None else f"the stream ended after {read} tokens"
            return dataclasses.replace(run, read=read, problem=f"the canary request: {why}")
        left_unix_ns = time.time_ns()
        if style == "abrupt":
            await conn.abort()
        else:
            await tracer.aclose()
    finally:
        await tracer.aclose()
    run = dataclasses.replace(run, read=read, left_unix_ns=left_unix_ns)
    record, problem = await ask_canary(opts, probe_id)
    return dataclasses.replace(run, record=record, problem=problem)


async def ask_canary(
    options: RunOptions, probe_id: str
) -> tuple[dict[str, object] | None, str | None]:
    """Poll the canary's record of ``probe_id`` until its generation ended (or the
    stream's planned time plus ``SETTLE_S`` passed: a ghost still running is an answer)."""
    url = admin_base(options) + ADMIN_PATH + probe_id
    verify = ssl_context_for(options) if url.startswith("https:") else False
    proxy = options.proxy.url if options.proxy is not None and not _admin_given(options) else None
    deadline = time.monotonic() + PLANNED_TOKENS / RATE + SETTLE_S
    record: dict[str, object] | None = None
    async with httpx.AsyncClient(
        verify=verify, proxy=proxy, trust_env=False, timeout=5.0
    ) as client:
        while True:
            try:
                got = await client.get(url)
            except httpx.HTTPError as exc:
                return None, f"cannot reach {url}: {exc or type(exc).__name__}"
            if got.status_code == 404:
                # The canary tags a request when it arrives, before its first token: a
                # request we read tokens from and that is not there never had the tag.
                return None, (
                    f"the canary has no request tagged {probe_id} ({url} answered 404): a hop"
                    " strips the x-promptpath-* headers and the body's promptpath field, or that"
                    " address is not the canary"
                )
            if got.status_code != 200:
                return None, f"{url} answered {got.status_code}"
            record = got.json()
            if record is not None and record.get("ended_unix_ns") is not None:
                return record, None
            if time.monotonic() > deadline:
                break
            await anyio.sleep(ADMIN_POLL_S)
    return record, None  # still generating at the deadline: the ghost is the answer


def _admin_given(options: RunOptions) -> bool:
    return bool(options.probe_options.get("canary_admin"))
