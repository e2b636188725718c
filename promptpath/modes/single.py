"""One traced prompt (and its --warm second request), then the probes asked for."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from promptpath.core.exitcodes import ExitCode
from promptpath.modes.base import Report
from promptpath.modes.interrupts import exit_code_of
from promptpath.modes.outcome import exit_code_for, judge_single, scrub_result
from promptpath.modes.runner import mark_interrupted

if TYPE_CHECKING:
    from rich.console import Console

    from promptpath.core.slo import SLOResult
    from promptpath.environment import Environment
    from promptpath.plan.plan import Plan
    from promptpath.tracer.orchestrator import TraceResult


class SingleMode:
    def __init__(self, plan: Plan, env: Environment, console: Console) -> None:
        self.plan, self.env, self.console = plan, env, console
        self.started: TraceResult | None = None
        self.result: TraceResult | None = None

    async def run(self) -> None:
        from rich.text import Text

        from promptpath.modes.progress import LiveProgress, progress_console
        from promptpath.report.redact import Redactor

        def progress_line(message: str) -> None:
            # Text, not markup: a probe's message may quote a server's "[/dim]".
            self.console.print(Text(f"… {message}", style="dim"))

        live = LiveProgress(
            progress_console(self.env),
            fallback=progress_line,
            redactor=Redactor.for_options(self.plan.trace),
        )

        def on_start(result: TraceResult) -> None:
            self.started = result
            live.watch(result.timeline)

        async with live.running():
            self.result = await self._traced(on_start, live.note)

    async def _traced(self, on_start: Any, note: Any) -> TraceResult:
        from promptpath.tracer.orchestrator import trace

        options = self.plan.trace
        result = await trace(options, on_start=on_start)
        if options.http != "3" and options.target.scheme == "https" and result.timeline.status:
            from promptpath.tracer.h3discovery import discover_h3

            result.h3 = await discover_h3(result)
        if options.proxy is not None:
            from promptpath.tracer.direct import compare_with_direct

            await compare_with_direct(result)
        if self.plan.probes:
            from promptpath.probes.suite import run_probes

            # Probes run even when the trace failed: a refused connection to a stale
            # address is exactly when the DNS probe matters.
            result.findings = await run_probes(
                options, result, list(self.plan.probes), note, self.plan.probe_settings
            )
        return result

    def report(self, signum: int | None) -> Report:
        result = self.result
        if result is None:
            assert signum is not None  # only a stop signal cancels the run
            if self.started is None:
                return Report(code=int(exit_code_of(signum)))
            # Report what was measured up to the signal: a CI job still gets its JSON.
            result = self.started
            mark_interrupted(result, signum)
        outputs = self.plan.outputs
        code = exit_code_for(result, outputs.fail_on)
        scrub_result(result)
        verdicts = judge_single(result, outputs.slos, int(code))
        if any(not v.ok for v in verdicts) and code in (ExitCode.OK, ExitCode.FINDING):
            code = ExitCode.SLO  # a failed run's own code comes first (README, "Exit codes")
        final = int(code)
        fail_on = outputs.fail_on
        return Report(
            code=final,
            render=lambda console: _render(console, result, verdicts, fail_on),
            build=lambda: _body(result, verdicts, final, bool(outputs.slos), fail_on),
        )


def _render(console: Console, result: TraceResult, verdicts: list[SLOResult], fail_on: str) -> None:
    from promptpath.report import terminal

    terminal.render(console, result, fail_on=fail_on, slos=verdicts)


def _body(
    result: TraceResult, verdicts: list[SLOResult], code: int, slos: bool, fail_on: str
) -> dict[str, Any]:
    from promptpath.report.json import result_json

    # result_json redacts by structure, inside string values.
    body = result_json(result, exit_code=code, fail_on=fail_on, slos=verdicts)
    if slos:
        body["slo"] = [v.as_dict() for v in verdicts]
    return body
