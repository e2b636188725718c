"""The ``idle-timeout`` probe: which silence makes a hop cut the connection?

Two measurements run side by side, each on its own connection:

* keep-alive idle (any endpoint): ``watch.watch_idle`` holds a connection idle
  after a complete response and stamps the peer's FIN/RST at the socket, up to --idle-max;
* mid-stream pause (--canary): ``promptpath serve`` pauses after token K for --idle-max
  seconds. A cut gives the threshold directly (one long request, no search); the same
  pause with SSE keepalive comments then tells an idle timeout from an absolute limit.
"""

from __future__ import annotations

import dataclasses

import anyio

from promptpath.core.errors import HTTPStatusError, StreamError, TraceTimeout
from promptpath.core.findings import Finding
from promptpath.core.timeline import CloseRecord
from promptpath.options import RunOptions
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.canary import (
    ControlCheck,
    canary_controls,
    check_controls,
    controls_via,
    is_canary,
    with_controls,
    without_canary_part,
)
from promptpath.probes.hophints import hops_named
from promptpath.probes.idle_timeout.measure import IdleWatch, Outcome, PauseRun, measure_pause
from promptpath.probes.idle_timeout.verdict import PROBE, judge
from promptpath.probes.settings import ControlsVia, ProbeSettings

#: Tokens before the pause, and after it (so a survivor ends with its terminal marker).
PAUSE_AFTER = 3
PAUSE_TOKENS = 6
PAUSE_RATE = 20.0
#: Slack for a paused request beyond its pause (the reference endpoint answers at once).
PAUSE_MARGIN_S = 15.0
#: Priming request of the keep-alive watch: a few tokens of a real answer.
PRIMING_TOKENS = 16
REQUEST_TIMEOUT_S = 30.0
PROGRESS_EVERY_S = 10.0
COUNT_PROMPT = "Count from 1 to 10, one number per line."


def idle_max(settings: ProbeSettings) -> float:
    """--idle-max: the longest idle wait (resolve.py checked it is positive)."""
    return settings.idle_timeout.max_s


def keepalive_interval(threshold_s: float | None) -> float:
    """SSE comments well inside the measured threshold: a third of it, 0.2-10 s."""
    if threshold_s is None or threshold_s <= 0:
        return 1.0
    return round(min(10.0, max(0.2, threshold_s / 3)), 1)


def pause_controls(pause_s: float, keepalive_s: float) -> tuple[tuple[str, str], ...]:
    return canary_controls(
        tokens=PAUSE_TOKENS,
        rate=PAUSE_RATE,
        pause_after=PAUSE_AFTER,
        pause_s=pause_s,
        keepalive_s=keepalive_s,
    )


def pause_options(
    options: RunOptions, pause_s: float, keepalive_s: float, via: ControlsVia = "both"
) -> RunOptions:
    paused = options.derive(
        prompt=COUNT_PROMPT,
        max_tokens=PAUSE_TOKENS,
        timeout=pause_s + PAUSE_MARGIN_S,
    )
    return with_controls(paused, pause_controls(pause_s, keepalive_s), via)


#: What a framing without comments says instead of a keepalive re-test: the stream has no
#: frame that carries nothing (serve sends its keepalive comments only in SSE streams).
#: WebSocket targets take their own path (pings, ``_websocket``).
_NO_COMMENTS = {
    "eventstream": "AWS's event-stream framing has no comment frame",
    "ndjson": "an NDJSON stream has no comment line",
}


def no_comments(options: RunOptions) -> str | None:
    """Why the dialect's stream cannot carry keepalive comments (None: SSE, it can)."""
    from promptpath.dialects.plugins import decoder_for

    return _NO_COMMENTS.get(decoder_for(options.provider).framing)


def comments_lost(run: PauseRun) -> str | None:
    """Keepalive comments were asked for and the server sent them, yet none arrived in a
    silence long enough for two: a hop between drops SSE comments, so the hop that cut
    never saw them (observed: the LiteLLM proxy re-frames the stream without them)."""
    if run.keepalive_s <= 0 or run.comments_seen or not run.cut:
        return None
    if (run.since_pause_s or 0.0) < 2 * run.keepalive_s:
        return None
    return (
        f"no keepalive comment arrived in {run.since_pause_s:.1f} s of pause (one every"
        f" {run.keepalive_s:g} s asked): a hop drops SSE comments, so keepalives sent by the"
        " origin cannot reach the hop that cuts"
    )


def outcome_of(
    exc: BaseException | None,
    stream_end: str | None,
    http_version: str | None,
    close: CloseRecord | None,
) -> tuple[Outcome | None, str | None]:
    """How a paused stream ended: the tracer's error, and the close the transport saw."""
    if exc is None:
        return ("survived", None) if stream_end == "marker" else ("clean_end", None)
    if isinstance(exc, HTTPStatusError):
        status = exc.detail.get("status")
        if status in (502, 503, 504):
            return "gateway_status", None
        return None, exc.message
    if isinstance(exc, TraceTimeout):
        return "stalled", None
    if isinstance(exc, StreamError) and exc.kind == "truncated":
        if exc.__cause__ is None:  # the body ended cleanly, without the terminal marker
            return "clean_end", None
        version = http_version or ""
        if close is not None and close.kind == "rst":
            return "rst", None
        if version == "HTTP/3":
            return "h3_reset", None
        if version.startswith("HTTP/2"):
            return "h2_reset", None
        return "fin", None
    message = getattr(exc, "message", str(exc))
    return None, message


@register
class IdleTimeoutProbe(Probe):
    name = PROBE
    description = "does a hop cut idle connections or silent streams, and after how long?"

    def cost(self, ctx: ProbeContext) -> Cost:
        cap = idle_max(ctx.settings)
        timeout = min(ctx.options.timeout, REQUEST_TIMEOUT_S)
        tokens = min(ctx.options.max_tokens, PRIMING_TOKENS)
        if ctx.options.target.websocket:
            # A quiet socket, then (when it is cut) the same with pings: one after the other.
            return Cost(requests=2, tokens=2 * tokens, seconds=2 * (cap + timeout))
        keep = Cost(requests=2, tokens=2 * tokens, seconds=cap + 2 * timeout)
        if not is_canary(ctx.settings):
            return keep
        mid_seconds = 2 * (cap + PAUSE_MARGIN_S)
        return Cost(
            requests=keep.requests + 2,
            tokens=keep.tokens + 2 * PAUSE_TOKENS,
            seconds=max(keep.seconds, mid_seconds),  # the two run side by side
        )

    async def run(self, ctx: ProbeContext) -> Finding:
        from promptpath.probes.idle_timeout.watch import watch_idle

        if ctx.options.target.websocket:
            return await self._websocket(ctx)
        options = ctx.options
        cap = idle_max(ctx.settings)
        canary = is_canary(ctx.settings)
        state: dict[str, object] = {}
        timeout = min(options.timeout, REQUEST_TIMEOUT_S)
        ctx.progress(
            f"idle-timeout: holding a keep-alive connection idle for up to {cap:g} s"
            + (f"; pausing a canary stream for {cap:g} s (twice if it is cut)" if canary else "")
        )

        async def keepalive() -> None:
            state["watch"] = await watch_idle(
                options,
                cap_s=cap,
                request_timeout=timeout,
                progress=ctx.progress,
                max_tokens=min(options.max_tokens, PRIMING_TOKENS),
            )

        async def mid_stream() -> None:
            first, hops, check = await self._pause(ctx, cap, 0.0, "run 1/2")
            state["first"], state["hops"] = first, hops
            state["controls"] = check.evidence()
            if not check.ok:
                state["unchecked"] = check
                ctx.progress(f"idle-timeout: {check.problem}")
            elif first.cut and no_comments(options) is not None:
                ctx.progress(
                    f"idle-timeout: cut after {first.silence_s or 0:.1f} s of silence;"
                    f" {no_comments(options)}: no keepalive re-test"
                )
            elif first.cut:
                every = keepalive_interval(first.silence_s)
                ctx.progress(
                    f"idle-timeout: cut after {first.silence_s or 0:.1f} s of silence; the same"
                    f" pause with keepalive comments every {every:g} s"
                )
                second, _, check = await self._pause(ctx, cap, every, "run 2/2")
                # A re-test whose keepalives or pause did not happen as asked tells nothing.
                problem = check.problem or comments_lost(second)
                state["second"] = (
                    dataclasses.replace(second, outcome=None, error=problem) if problem else second
                )
            else:
                ctx.progress(f"idle-timeout: the stream survived a {cap:g} s pause")

        async with anyio.create_task_group() as tg:
            tg.start_soon(keepalive)
            if canary:
                tg.start_soon(mid_stream)
        watch = state.get("watch")
        first = state.get("first")
        second = state.get("second")
        hops = state.get("hops", [])
        unchecked = state.get("unchecked")
        if isinstance(unchecked, ControlCheck):
            first = second = None  # the pause did not happen: nothing to judge in it
        finding = judge(
            canary=canary,
            watch=watch if isinstance(watch, IdleWatch) else None,
            first=first if isinstance(first, PauseRun) else None,
            second=second if isinstance(second, PauseRun) else None,
            hops=hops if isinstance(hops, list) else [],
            context={"idle_max_s": cap, "controls": state.get("controls")},
            no_comments=no_comments(options),
        )
        if isinstance(unchecked, ControlCheck):
            return without_canary_part(finding, unchecked)
        return finding

    @staticmethod
    async def _websocket(ctx: ProbeContext) -> Finding:
        """Over WebSocket: a quiet socket after a response; when cut, the same with pings
        (a pause inside a response is the same silence to a hop that tunnels frames)."""
        from promptpath.probes.idle_timeout import ws_verdict as ws_idle_verdict
        from promptpath.probes.idle_timeout.ws_watch import watch_quiet

        options = ctx.options
        cap = idle_max(ctx.settings)
        timeout = min(options.timeout, REQUEST_TIMEOUT_S)
        tokens = min(options.max_tokens, PRIMING_TOKENS)
        ctx.progress(f"idle-timeout: one response, then its WebSocket quiet for up to {cap:g} s")
        quiet = await watch_quiet(
            options, cap_s=cap, request_timeout=timeout, progress=ctx.progress, max_tokens=tokens
        )
        pinged = None
        if quiet.cut and quiet.threshold_s is not None and quiet.error is None:
            every = ws_idle_verdict.ping_interval(quiet.threshold_s)
            # Twice the threshold shows the timer did not fire; never past the cap.
            window = round(min(cap, max(2 * quiet.threshold_s, quiet.threshold_s + 2.0)), 1)
            ctx.progress(
                f"idle-timeout: cut after {quiet.threshold_s:.1f} s quiet; again with a ping"
                f" every {every:g} s, watched {window:g} s"
            )
            pinged = await watch_quiet(
                options,
                cap_s=window,
                request_timeout=timeout,
                progress=ctx.progress,
                max_tokens=tokens,
                ping_every_s=every,
                label=" (pinged)",
            )
        return ws_idle_verdict.judge(quiet, pinged)

    @staticmethod
    async def _pause(
        ctx: ProbeContext, pause_s: float, keepalive_s: float, label: str
    ) -> tuple[PauseRun, list[str], ControlCheck]:
        from promptpath.tracer.orchestrator import trace

        via = controls_via(ctx.settings)
        opts = pause_options(ctx.options, pause_s, keepalive_s, via)
        async with anyio.create_task_group() as tg:

            async def tick() -> None:
                # A long pause is silent by design: say where we are in it.
                start = anyio.current_time()
                while True:
                    await anyio.sleep(PROGRESS_EVERY_S)
                    waited = anyio.current_time() - start
                    ctx.progress(f"idle-timeout: canary {label}, {waited:.0f} s of ≤ {pause_s:g} s")

            tg.start_soon(tick)
            result = await trace(opts)
            tg.cancel_scope.cancel()
        tl = result.timeline
        outcome, error = outcome_of(result.exc, tl.stream_end, tl.http_version, tl.close)
        run = measure_pause(
            tl,
            outcome=outcome,
            pause_after=PAUSE_AFTER,
            rate=PAUSE_RATE,
            pause_s=pause_s,
            keepalive_s=keepalive_s,
            error=error,
        )
        check = check_controls(
            tl,
            pause_controls(pause_s, keepalive_s),
            via,
            pause=(PAUSE_AFTER, pause_s),
        )
        return run, hops_named(tl.response_headers), check
