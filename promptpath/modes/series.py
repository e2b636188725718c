"""A series (--count N, --concurrency C, a sweep C1,C2,..): runs traced with live progress,
aggregated, judged against --slo, one report and one exit code.

Nothing here grows with --count before a run has begun: the runs are kept as they start
(a dict per level, by index), and the progress counts finished runs with a counter. A stop
signal leaves the runs in flight marked interrupted, in sequential and load mode alike.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from promptpath.core.series import sample_of, series_exit_code, slo_values, summarize_series
from promptpath.core.slo import SLOResult, evaluate
from promptpath.modes.base import Report
from promptpath.modes.interrupts import exit_code_of
from promptpath.modes.outcome import scrub_result
from promptpath.modes.runner import mark_interrupted

if TYPE_CHECKING:
    from promptpath.core.change.compose import Diff
    from promptpath.environment import Environment
    from promptpath.plan.plan import Baseline, Plan
    from promptpath.report.series import Level
    from promptpath.result import TraceResult


class _LevelRuns:
    """One concurrency level's runs, by index, as they start and finish."""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.started: dict[int, TraceResult] = {}
        self.finished: dict[int, TraceResult] = {}

    def in_start_order(self) -> list[TraceResult]:
        return [self.finished[i] for i in sorted(self.finished)]


class SeriesMode:
    def __init__(self, plan: Plan, env: Environment) -> None:
        self.plan, self.env = plan, env
        self.levels = [_LevelRuns(c) for c in plan.series.concurrency or (1,)]

    async def run(self) -> None:
        from promptpath.modes.progress import LiveProgress, progress_console
        from promptpath.report.redact import Redactor

        live = LiveProgress(
            progress_console(self.env),
            fallback=lambda _message: None,
            redactor=Redactor.for_options(self.plan.trace),
        )
        async with live.running():
            for runs in self.levels:
                await self._level(runs, live)

    async def _level(self, runs: _LevelRuns, live: Any) -> None:
        series, options = self.plan.series, self.plan.trace
        count = series.count
        where = f" at concurrency {runs.concurrency}" if series.concurrency else ""

        def on_start(index: int, result: TraceResult) -> None:
            runs.started[index] = result
            live.watch(result.timeline)
            live.step(f"run {index + 1} of {count}{where}")

        def on_run(index: int, result: TraceResult) -> None:
            runs.finished[index] = result
            live.step(f"{len(runs.finished)} of {count} done{where}")

        if runs.concurrency == 1:
            from promptpath.tracer.repeat import trace_repeated

            await trace_repeated(
                options,
                count=count,
                interval_s=series.interval_s,
                reuse=series.reuse,
                on_start=on_start,
                on_run=on_run,
            )
            return
        from promptpath.tracer.load import run_concurrent

        results = await run_concurrent(
            options,
            count=count,
            concurrency=runs.concurrency,
            # 0: the protocol's default (one HTTP/2 or HTTP/3 connection, one HTTP/1.1
            # connection per stream in flight).
            connections=0
            if series.connections is None
            else min(series.connections, runs.concurrency),
            on_run=on_run,
            on_start=on_start,
        )
        runs.finished = dict(enumerate(results))  # start order, whatever on_run saw

    def report(self, signum: int | None) -> Report:
        if signum is not None:
            for runs in self.levels:
                for index, result in runs.started.items():
                    # A run a signal cut short: reported with what it measured, as a
                    # single run is.
                    if index not in runs.finished:
                        mark_interrupted(result, signum)
                        runs.finished[index] = result
        for runs in self.levels:
            for result in runs.finished.values():
                scrub_result(result)
        measured = _levels(self.levels)
        if not measured:  # stopped before the first run began
            assert signum is not None  # only a stop signal ends a series with no run
            return Report(code=int(exit_code_of(signum)))
        return self._judged(measured, signum)

    def _judged(self, levels: list[Level], signum: int | None) -> Report:
        from promptpath.report.series import render_series, series_json

        plan, slos = self.plan.series, self.plan.outputs.slos
        baseline = self.plan.outputs.baseline
        if baseline is not None:
            from promptpath.core.slo import with_baseline

            slos = tuple(with_baseline(slos, baseline.values))
        samples = [
            sample_of(r.timeline, c)
            for level in levels
            for r, c in zip(level.results, level.codes, strict=True)
        ]
        total = summarize_series(samples)
        verdicts: list[SLOResult] = []
        if len(plan.concurrency) > 1:
            # A sweep is judged level by level: "p95 under 800 ms at 64 streams" is the claim.
            for at, level in enumerate(levels):
                judged = evaluate(slos, slo_values(level.summary), concurrency=level.concurrency)
                levels[at] = replace(level, slo=judged)
                verdicts += judged
        else:
            verdicts = evaluate(slos, slo_values(total))
        code = series_exit_code(samples, verdicts)
        if signum is not None:
            code = int(exit_code_of(signum))
        slo = verdicts if slos else None
        against = _Against(baseline, levels)

        def render(console: Any) -> None:
            against.render(console)
            render_series(console, plan, levels, total=total, slo=slo, exit_code=code)

        def build() -> dict[str, Any]:
            body = series_json(plan, levels, total=total, slo=slo, exit_code=code)
            return against.attach(body)

        return Report(code=code, render=render, build=build)


class _Against:
    """The series against --baseline: one diff (core/change), computed once, shown above the
    series' own table and attached to its JSON as ``baseline`` (a promptpath.diff/1 object)."""

    def __init__(self, baseline: Baseline | None, levels: list[Level]) -> None:
        self.baseline, self.levels = baseline, levels
        self._diff: Diff | None = None

    def diff(self) -> Diff | None:
        if self.baseline is None:
            return None
        if self._diff is None:
            from promptpath.core.change.compose import Side, diff_runs
            from promptpath.core.change.metrics import run_failed
            from promptpath.report.json import result_json

            runs = [
                result_json(r, exit_code=c)
                for level in self.levels
                for r, c in zip(level.results, level.codes, strict=True)
            ]
            base = self.baseline
            self._diff = diff_runs(
                list(base.runs),
                runs,
                before_side=Side(source=base.source, kind=base.kind, runs=len(base.runs),
                                 failed=sum(1 for r in base.runs if run_failed(r))),
                after_side=Side(source="this series", kind="series", runs=len(runs),
                                failed=sum(1 for r in runs if run_failed(r))),
            )  # fmt: skip
        return self._diff

    def render(self, console: Any) -> None:
        diff = self.diff()
        if diff is None:
            return
        from rich.text import Text

        from promptpath.report.diff import render_diff

        console.print(Text("Against the baseline", style="bold"))
        render_diff(diff, console)
        console.print()

    def attach(self, body: dict[str, Any]) -> dict[str, Any]:
        diff = self.diff()
        if diff is not None:
            from promptpath.report.diff import diff_json

            body["baseline"] = diff_json(diff)
        return body


def _levels(levels: list[_LevelRuns]) -> list[Level]:
    """Each level's runs, in start order, with their exit codes and summary."""
    from promptpath.report.series import Level

    out = []
    for runs in levels:
        results = runs.in_start_order()
        if results:
            # No probes in a series: a run's code is its failure's, as exit_code_for gives.
            codes = [0 if r.exc is None else int(r.exc.exit_code) for r in results]
            samples = [sample_of(r.timeline, c) for r, c in zip(results, codes, strict=True)]
            summary = summarize_series(samples)
            out.append(
                Level(concurrency=runs.concurrency, results=results, codes=codes, summary=summary)
            )
    return out


__all__ = ["SeriesMode"]
