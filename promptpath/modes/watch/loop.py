"""`promptpath watch`: trace again and again in one process, keep rolling statistics,
call events, write the history; the live view on a terminal, JSON lines without one.

One trace at a time, each a whole ``trace()`` (fresh DNS, connect and handshake: every
stage is measured every time), then the probes or the path probe when their turn comes,
then a pause of ``--interval`` ± ``--jitter``. The screen is drawn between traces and on
a key, never while a stream is read (a busy reader delays the reads it measures).
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import anyio

from promptpath.exporter.guard import Action, CostGuard
from promptpath.modes.base import Report
from promptpath.modes.interrupts import exit_code_of
from promptpath.modes.watch.history import HistoryWriter, line_of, read_tail, utc_stamp
from promptpath.modes.watch.hops import PathHops
from promptpath.modes.watch.state import Event, WatchState
from promptpath.modes.watch.view import Header, screen

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live

    from promptpath.environment import Environment
    from promptpath.plan.plan import Plan
    from promptpath.plan.watch_plan import WatchPlan
    from promptpath.result import TraceResult

#: The live screen is redrawn this often while the watch waits between traces.
REDRAW_S = 0.5


class WatchMode:
    def __init__(self, plan: Plan, watch: WatchPlan, env: Environment, console: Console) -> None:
        self.plan, self.watch, self.env, self.console = plan, watch, env, console
        self.live_view = env.stdout_isatty and not watch.jsonl
        self.state = WatchState(window=watch.window, band_k=watch.band_k)
        self.hops = PathHops(window=watch.window) if watch.path else None
        self.seq = 0
        self.done = 0  # traces this process made
        self.stopped: str | None = None  # why the watch ended by itself (q, count, budget)
        self.paused = False
        self.show_path = True
        self.status = "starting"
        self.interval_s = watch.interval_s
        self.guard: CostGuard[bool] = CostGuard(max_in_flight=1)
        #: The --probe probes' stated tokens, worked out once (None: not yet).
        self._stated_probe_tokens: int | None = None
        self._wake = anyio.Event()
        self._live: Live | None = None
        self._writer: HistoryWriter | None = None
        self._rng = random.Random()

    # -- the loop ---------------------------------------------------------------------
    def prepare(self) -> None:
        """Before the first packet: the history read back and opened (UsageError naming
        the file when it cannot be), the cost stated."""
        self._seed()
        if self.watch.history is not None:
            self._writer = HistoryWriter(self.watch.history)
        self._announce()

    async def run(self) -> None:
        try:
            if self.live_view:
                await self._live_loop()
            else:
                await self._loop()
        finally:
            if self._writer is not None:
                self._writer.close()

    async def _live_loop(self) -> None:
        import sys

        from rich.live import Live

        from promptpath.modes.watch.keys import keys_read

        try:
            fd: int | None = sys.stdin.fileno()
        except (AttributeError, ValueError, OSError):
            fd = None
        with (
            Live(self._screen(), console=self.console, auto_refresh=False, transient=True) as live,
            keys_read(fd, self.key),
        ):
            self._live = live
            try:
                await self._loop()
            finally:
                self._live = None

    async def _loop(self) -> None:
        watch = self.watch
        began = time.monotonic()
        while self.stopped is None:
            if watch.count is not None and self.done >= watch.count:
                self.stopped = f"{watch.count} traces done"
                break
            if watch.duration_s is not None and time.monotonic() - began >= watch.duration_s:
                self.stopped = f"{watch.duration_s:g} s done"
                break
            if self.paused:
                self.status = "paused (p resumes)"
                await self._wait(REDRAW_S)
                continue
            if not await self._budget_allows():
                continue
            await self._one()
            if self.stopped is not None or (watch.count is not None and self.done >= watch.count):
                continue
            pause = self.interval_s * (1.0 + self._rng.uniform(-watch.jitter, watch.jitter))
            end = time.monotonic() + pause
            while self.stopped is None and not self.paused and time.monotonic() < end:
                self.status = f"next trace in {max(0.0, end - time.monotonic()):.1f} s"
                await self._wait(min(REDRAW_S, end - time.monotonic()))

    async def _wait(self, seconds: float) -> None:
        """Sleep up to ``seconds``; a key that changes something wakes it at once."""
        self._draw()
        with anyio.move_on_after(max(0.0, seconds)):
            await self._wake.wait()
        if self._wake.is_set():
            self._wake = anyio.Event()

    async def _one(self) -> None:
        from promptpath.tracer.orchestrator import trace

        self.seq += 1
        seq, at = self.seq, utc_stamp()
        self.status = f"tracing #{seq}"
        self._draw()
        options = self.plan.trace
        result = await trace(options)
        findings = await self._probes(result, seq)
        line, doc = self._document(result, seq, at)
        if self._writer is not None:
            self._writer.append(line)
        if not self.live_view:
            self.env.stdout.write(line + "\n")
            self.env.stdout.flush()
        events = self.state.feed(doc, seq=seq, at=at)
        if findings:
            events += self.state.probe_verdicts(findings, seq=seq, at=at)
        self.done += 1
        self._tell(events)

    async def _probes(self, result: TraceResult, seq: int) -> list[dict[str, Any]]:
        """The --probe probes and the path probe, when their turn comes (the first trace,
        then every N): their findings join the trace's document."""
        from promptpath.probes.suite import run_probes

        probes = []
        if self.plan.probes and (seq - 1) % self.watch.probe_every == 0:
            probes += list(self.plan.probes)
        path_turn = self.hops is not None and (seq - 1) % self.watch.path_every == 0
        if path_turn and not any(p.name == "path" for p in probes):
            from promptpath.probes.path.probe import PathProbe

            probes.append(PathProbe)
        if not probes:
            return []
        self.status = f"probes after #{seq}: " + ", ".join(p.name for p in probes)
        self._draw()
        found = await run_probes(
            self.plan.trace, result, probes, lambda _m: None, self.plan.probe_settings
        )
        result.findings = found
        dicts = [f.as_dict() for f in found]
        if self.hops is not None:
            for finding in dicts:
                if finding["probe"] == "path":
                    self.hops.feed(finding)
        # The path probe has its rows; the --probe probes are judged for events.
        asked = {p.name for p in self.plan.probes}
        return [f for f in dicts if f["probe"] in asked]

    def _document(self, result: TraceResult, seq: int, at: str) -> tuple[str, dict[str, Any]]:
        from promptpath.modes.outcome import exit_code_for, scrub_result
        from promptpath.report.json import result_json

        fail_on = self.plan.outputs.fail_on
        code = exit_code_for(result, fail_on)
        scrub_result(result)
        doc = result_json(result, exit_code=int(code), fail_on=fail_on)
        return line_of(seq, at, doc), doc

    # -- spend --------------------------------------------------------------------------
    def _probe_tokens(self, seq: int) -> int:
        """What the --probe probes say they may spend, on a trace whose turn runs them
        (their stated cost, as `probe` states it; the path probe sends no prompt)."""
        if not self.plan.probes or (seq - 1) % self.watch.probe_every != 0:
            return 0
        if self._stated_probe_tokens is None:
            from promptpath.probes.base import ProbeContext

            ctx = ProbeContext(
                options=self.plan.trace, result=None, settings=self.plan.probe_settings
            )
            self._stated_probe_tokens = sum(cls().cost(ctx).tokens for cls in self.plan.probes)
        return self._stated_probe_tokens

    async def _budget_allows(self) -> bool:
        watch = self.watch
        if not watch.budget:
            return True
        # The next trace's tokens, and its probes' when their turn comes with it.
        cost = watch.cost_per_trace + self._probe_tokens(self.seq + 1)
        now = datetime.now(UTC)
        hour = now.replace(minute=0, second=0, microsecond=0)
        key = (self.plan.trace.target.host, "watch")
        decision = self.guard.decide(
            key,
            now=time.monotonic(),
            day=hour,
            min_interval_s=0.0,
            budget=watch.budget,
            cost=cost,
        )
        if decision.action is not Action.OVER_BUDGET:
            ticket = self.guard.started(key, now=time.monotonic(), day=hour, cost=cost)
            self.guard.finished(key, True, ticket=ticket)
            return True
        turn = hour + timedelta(hours=1)
        spent = self.guard.spent(key[0], hour)
        if watch.budget_action == "stop":
            self.stopped = (
                f"budget reached: {spent:,} of {watch.budget:,} tokens this hour"
                f" (--budget-action stop)"
            )
            self._tell(
                [self.state.note("budget", "budget", self.stopped, seq=self.seq, at=utc_stamp())]
            )
            return False
        message = (
            f"budget reached: {spent:,} of {watch.budget:,} tokens this hour; waiting"
            f" until {turn:%H:%M} UTC (--budget raises it)"
        )
        self._tell([self.state.note("budget", "budget", message, seq=self.seq, at=utc_stamp())])
        self.status = f"budget: waiting until {turn:%H:%M} UTC"
        while self.stopped is None and datetime.now(UTC) < turn:
            await self._wait(min(REDRAW_S * 4, (turn - datetime.now(UTC)).total_seconds()))
        return False

    def _announce(self) -> None:
        """The cost, stated before the first trace (as the probes state theirs)."""
        watch = self.watch
        where = watch.where
        until = "until stopped"
        if watch.count is not None:
            until = f"{watch.count} traces"
        if watch.duration_s is not None:
            until = (
                f"for {watch.duration_s:g} s"
                if watch.count is None
                else until + f" or {watch.duration_s:g} s"
            )
        budget = (
            "no budget"
            if not watch.budget
            else f"budget {watch.budget:,} tokens/hour, then {watch.budget_action}"
        )
        if watch.budget and watch.budget_action == "slow" and watch.spend_per_hour > watch.budget:
            self.interval_s = watch.cost_per_trace * 3600.0 / watch.budget
            budget += f": interval stretched to {self.interval_s:.1f} s to fit"
        per_hour = watch.cost_per_trace * 3600.0 / max(self.interval_s, 0.001)
        self._say(
            f"promptpath watch: a trace every {self.interval_s:g} s ± {watch.jitter:.0%}, {until};"
            f" ≤{watch.cost_per_trace} tokens each, ≤{per_hour:,.0f} tokens/hour to {where}"
            f" ({budget})"
        )
        if self.plan.probes:
            names = ", ".join(p.name for p in self.plan.probes)
            self._say(
                f"promptpath watch: probes every {watch.probe_every} traces: {names}"
                " (each states its own cost when it runs; the budget counts it)"
            )

    # -- history ------------------------------------------------------------------------
    def _seed(self) -> None:
        if self.watch.history is None:
            return
        tail = read_tail(self.watch.history, keep=self.watch.window)
        for entry in tail.entries:
            self.state.feed(entry.run, seq=entry.seq, at=entry.at, quiet=True)
        self.seq = tail.last_seq
        if tail.entries:
            self._say(
                f"promptpath watch: {len(tail.entries)} traces read back from"
                f" {self.watch.history} (up to #{tail.last_seq}) seed the statistics"
                + (f"; {tail.skipped} torn line(s) skipped" if tail.skipped else "")
            )

    # -- keys and the screen -----------------------------------------------------------
    def key(self, char: str) -> None:
        """A key typed on the live view."""
        if char in "qQ":
            self.stopped = "q pressed"
        elif char in "pP":
            self.paused = not self.paused
            self.status = "paused (p resumes)" if self.paused else "resumed"
        elif char in "rR":
            self.state.reset()
            if self.hops is not None:
                self.hops.reset()
        elif char in "dD":
            self.show_path = not self.show_path
        else:
            return
        self._wake.set()
        self._draw()

    def _screen(self, *, keys: bool = True) -> Any:
        header = Header(target=self.plan.trace.target.url, status=self.status)
        return screen(self.state, self.hops, header, show_path=self.show_path, keys=keys)

    def _draw(self) -> None:
        if self._live is not None:
            self._live.update(self._screen(), refresh=True)

    def _tell(self, events: list[Event]) -> None:
        """Events as they happen: on the screen, or a line each on stderr."""
        if self.live_view:
            self._draw()
            return
        from promptpath.core.textsafe import visible

        for event in events:
            print(
                f"promptpath watch: #{event.seq} {event.kind}: {visible(event.message)}",
                file=self.env.stderr,
                flush=True,
            )

    def _say(self, line: str) -> None:
        from promptpath.core.textsafe import visible

        print(visible(line), file=self.env.stderr, flush=True)

    # -- the end ------------------------------------------------------------------------
    def report(self, signum: int | None) -> Report:
        code = 0 if signum is None else int(exit_code_of(signum))
        why = self.stopped or "done"
        if signum is not None:
            import signal

            why = f"stopped by {signal.Signals(signum).name}"
        status = f"ended: {why}"

        def render(console: Console) -> None:
            header = Header(target=self.plan.trace.target.url, status=status)
            console.print(screen(self.state, self.hops, header, show_path=True, keys=False))

        return Report(code=code, render=render)


__all__ = ["WatchMode"]
