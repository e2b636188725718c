"""The live line on a terminal's stderr while a run waits: stage, elapsed time, probe news.

It only *reads* the timeline, from its own task a few times a second; the transport and
the ingest code never call it. A tick costs the event loop a render of one short line,
so a read that completes during a tick is stamped that much later: the tick rate is low
(``TICK_S``) and ``benchmarks/bench_trace.py --progress`` measures the gap error with it on.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
from rich.console import Console
from rich.text import Text

from promptpath.core.redaction import Redactor
from promptpath.core.textsafe import visible
from promptpath.core.timeline import MILESTONES, Timeline
from promptpath.environment import Environment

if TYPE_CHECKING:
    from rich.live import Live
    from rich.spinner import Spinner

#: Between two renders: often enough to look alive, rare enough to stay off the clock.
TICK_S = 0.15

#: With no stage open, what the run waits for after the last milestone it reached.
_AWAITING = {
    "dns_done": "connect",
    "connected": "request",
    "tls_done": "request",
    "request_sent": "ttfb",
    "ttfb": "first_token",
    "first_event": "first_token",
    "ttft": "stream",
    "first_output": "stream",
    "last_token": "stream",
    "end": "closing",
}


def stage_label(timeline: Timeline) -> str:
    """The stage open now, or what the run waits for after its last milestone."""
    open_stage = timeline.current_stage
    if open_stage is not None:
        return open_stage
    reached = [m for m in MILESTONES if m in timeline.milestones]
    if not reached:
        return "starting"
    label = _AWAITING[reached[-1]]
    if label == "stream":
        return f"stream · {len(timeline.events) + timeline.not_kept.events} events"
    return label


def progress_console(env: Environment) -> Console | None:
    """A console on stderr when stderr is a terminal; None (no live line) otherwise.

    NO_COLOR takes the colour out of the line but not the line: no-color.org is about
    colour, and the line's cursor codes go to the terminal's stderr only, erased before
    the report. A ``TERM=dumb`` terminal cannot move its cursor, so it gets none."""
    if not env.stderr_isatty or env.environ.get("TERM") == "dumb":
        return None
    colour = env.colour(True)
    return Console(
        file=env.stderr,
        force_terminal=True,
        color_system="auto" if colour else None,
        highlight=False,
        emoji=False,  # as the report's console (reporting.report_console)
        _environ=env.environ,
    )


class LiveProgress:
    """What the live line shows; ``running()`` draws it while the run lasts.

    ``watch`` fits ``trace(on_start=...)``; ``note`` takes a probe's progress message.
    With no console, ``note`` hands the message to ``fallback`` (today's "… message"
    lines) and nothing else happens. A probe's message may quote what a server sent: it
    is redacted with ``redactor`` and its control characters spelled out, on the live
    line and in the fallback alike."""

    def __init__(
        self,
        console: Console | None,
        fallback: Callable[[str], None],
        redactor: Redactor | None = None,
    ) -> None:
        self._console = console
        self._fallback = fallback
        self._redactor = redactor
        self._timeline: Timeline | None = None
        self._note: str | None = None
        self._note_ns = 0
        self._step: str | None = None
        self._started_ns = time.perf_counter_ns()

    def watch(self, timeline: Timeline) -> None:
        self._timeline = timeline

    def note(self, message: str) -> None:
        if self._redactor is not None:
            message = self._redactor.text(message)
        message = visible(message)
        if self._console is None:
            self._fallback(message)
            return
        self._note, self._note_ns = message, time.perf_counter_ns()

    def step(self, label: str) -> None:
        """Where a series is ("run 3 of 20"), shown before the stage; the live line only:
        without one, a per-run line would repeat what the report lists."""
        self._step = label

    def line(self, now_ns: int) -> str:
        """The text beside the spinner at ``now_ns``."""
        step = "" if self._step is None else f"{self._step} · "
        if self._note is not None:
            return f"{step}{self._note} · {(now_ns - self._note_ns) / 1e9:.1f} s"
        tl = self._timeline
        if tl is None:
            return f"{step}starting · {(now_ns - self._started_ns) / 1e9:.1f} s"
        return f"{step}{stage_label(tl)} · {(now_ns - tl.t0_ns) / 1e9:.1f} s"

    @asynccontextmanager
    async def running(self) -> AsyncIterator[LiveProgress]:
        """Draw the line until the block ends (a signal's cancellation included), then
        erase it, so the report starts on a clean line."""
        if self._console is None:
            yield self
            return
        # Only for a terminal: a run into a pipe or a CI log has no live line to draw.
        from rich.live import Live
        from rich.spinner import Spinner

        spinner = Spinner("dots")
        # No auto refresh: rich would render from its own thread, taking the GIL at
        # moments the event loop does not choose. Redirects off: stdout is not ours to wrap.
        live = Live(
            spinner,
            console=self._console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )
        live.start()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._tick, live, spinner)
                try:
                    yield self
                finally:
                    tg.cancel_scope.cancel()
        finally:
            live.stop()

    async def _tick(self, live: Live, spinner: Spinner) -> None:
        while True:
            spinner.update(text=Text(self.line(time.perf_counter_ns())))
            live.refresh()
            await anyio.sleep(TICK_S)


__all__ = ["TICK_S", "LiveProgress", "progress_console", "stage_label"]
