"""--compare-http: the same prompt over HTTP/2 and HTTP/3, ``runs`` times each, interleaved,
fresh connections each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from promptpath.modes.base import Report
from promptpath.modes.interrupts import exit_code_of
from promptpath.modes.outcome import exit_code_for
from promptpath.modes.runner import mark_interrupted

if TYPE_CHECKING:
    from rich.console import Console

    from promptpath.environment import Environment
    from promptpath.plan.plan import Plan
    from promptpath.result import TraceResult


class CompareMode:
    def __init__(self, plan: Plan, env: Environment) -> None:
        assert plan.compare_runs is not None
        self.plan, self.env, self.runs = plan, env, plan.compare_runs
        self.started: list[TraceResult] = []
        self.results: list[TraceResult] | None = None

    async def run(self) -> None:
        from promptpath.tracer import trace_pair

        self.results = await trace_pair(
            self.plan.trace, runs=self.runs, on_start=self.started.append
        )

    def report(self, signum: int | None) -> Report:
        results = self.results
        if results is None:
            assert signum is not None  # only a stop signal cancels the run
            if not self.started:
                return Report(code=int(exit_code_of(signum)))
            results = self._interrupted(signum)
        codes = [int(exit_code_for(r, "fail")) for r in results]
        # HTTP/2's failure first (the path every client has), then HTTP/3's.
        by_protocol = sorted(
            zip(results, codes, strict=True), key=lambda rc: rc[0].options.http == "3"
        )
        code = next((c for _r, c in by_protocol if c != 0), 0)
        return Report(
            code=code,
            render=lambda console: _render(console, results),
            build=lambda: _body(results, codes),
        )

    def _interrupted(self, signum: int) -> list[TraceResult]:
        started = self.started
        mark_interrupted(started[-1], signum)
        if not any(r.options.http == "3" for r in started):
            # Still on the first HTTP/2 run: HTTP/3 never began, but a reader of this
            # schema expects both runs, each with its error.
            from promptpath.result import TraceResult
            from promptpath.tracer.orchestrator import new_timeline, pair_options

            h3 = TraceResult(options=pair_options(self.plan.trace)[1], timeline=new_timeline())
            mark_interrupted(h3, signum, before_start=True)
            started.append(h3)
        return started


def _render(console: Console, results: list[TraceResult]) -> None:
    from promptpath.report.compare_http import render_compare

    render_compare(console, results)


def _body(results: list[TraceResult], codes: list[int]) -> dict[str, Any]:
    from promptpath.report.compare_http import compare_json

    return compare_json(results, exit_codes=codes)
