"""One scrape's probe: the module's trace and probes, inside the scrape's deadline.

The trace gets the deadline as its --timeout, so a stalled endpoint ends as any timed-out
run does: its error names the stage it stalled in. The whole probe (the module's probes
after the trace included) runs in a cancel scope of the same length; a probe that scope
cuts becomes an ``error`` finding naming it, and the answer is still the report of what
was measured.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from promptpath.plan.plan import Plan

if TYPE_CHECKING:
    from promptpath.core.errors import ErrorStage, PromptpathError

#: The trace's own timeout ends this long before the scope: its error (with the stage)
#: is recorded by the tracer itself, at the deadline, rather than by the cancellation.
_TRACE_MARGIN_S = 0.05


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one probe measured, as the exports read it (the JSON report), and how it ended."""

    report: dict[str, Any]
    success: bool
    duration_s: float
    deadline_s: float
    #: Where the deadline cut it: a trace stage ("first_token"), "probe:NAME", or None.
    timed_out_in: str | None
    #: The stage of the trace's error, if it failed.
    failed_stage: str | None
    exit_code: int
    #: The stop signal whose drain cut the probe (then ``timed_out_in`` says where).
    cut_by: str | None = None

    @property
    def result(self) -> str:
        """success, failure or timeout: the ``result`` label of the exporter's counters."""
        if self.timed_out_in is not None:
            return "timeout"
        return "success" if self.success else "failure"


class Stop:
    """The probes running now, to cut at once when the drain runs out (run.py)."""

    def __init__(self, why: str = "the exporter's drain ran out") -> None:
        self._scopes: set[anyio.CancelScope] = set()
        #: The stop signal, once ``cut`` was called.
        self.signal: signal.Signals | None = None
        #: What a cut run's error says after the signal's name (`promptpath mcp`: its own).
        self.why = why

    def cut(self, signum: signal.Signals) -> int:
        """Cut every probe running now (and any started later); how many were running."""
        self.signal = signum
        for scope in self._scopes:
            scope.cancel()
        return len(self._scopes)

    @contextmanager
    def scope(self, deadline_s: float) -> Iterator[anyio.CancelScope]:
        """A cancel scope, entered, that ends at the deadline or when ``cut`` is called."""
        with anyio.CancelScope(deadline=anyio.current_time() + deadline_s) as scope:
            self._scopes.add(scope)
            if self.signal is not None:
                scope.cancel()
            try:
                yield scope
            finally:
                self._scopes.discard(scope)


async def run_probe(plan: Plan, deadline_s: float, *, stop: Stop | None = None) -> Outcome:
    """Run ``plan``'s trace and probes within ``deadline_s`` seconds (or until ``stop``
    cuts it)."""
    from promptpath.core.findings import Finding, Verdict
    from promptpath.modes.outcome import exit_code_for, scrub_result
    from promptpath.probes.suite import run_probes
    from promptpath.result import TraceResult
    from promptpath.tracer.failure import phase_of, record_error, timeout_error
    from promptpath.tracer.orchestrator import trace

    options = plan.trace.derive(
        timeout=max(0.01, min(plan.trace.timeout, deadline_s - _TRACE_MARGIN_S))
    )
    started: list[TraceResult] = []
    result: TraceResult | None = None
    running: str | None = None
    begin = time.perf_counter()
    stop = stop or Stop()
    with stop.scope(deadline_s) as scope:
        result = await trace(options, on_start=started.append)
        for cls in plan.probes:
            running = f"probe:{cls.name}"
            result.findings += await run_probes(options, result, [cls], _quiet, plan.probe_settings)
        running = None
    duration = time.perf_counter() - begin
    timed_out_in: str | None = None
    cut_by = stop.signal if scope.cancelled_caught else None
    if scope.cancelled_caught:
        if result is None:  # cut inside the trace, before the tracer's own deadline
            from promptpath.tracer.session import new_timeline

            result = (
                started[0] if started else TraceResult(options=options, timeline=new_timeline())
            )
            stage = phase_of(result.timeline, options)
            record_error(
                result.timeline,
                timeout_error(options, stage) if cut_by is None else _cut(cut_by, stage, stop.why),
            )
            timed_out_in = stage
        elif running is not None:
            timed_out_in = running
            result.findings.append(
                Finding(
                    probe=running.removeprefix("probe:"),
                    verdict=Verdict.ERROR,
                    summary=f"stopped at the scrape's deadline ({deadline_s:g} s)"
                    if cut_by is None
                    else f"stopped by {cut_by.name}: {stop.why}",
                )
            )
    assert result is not None
    error = result.timeline.error
    if timed_out_in is None and error is not None and error.kind == "timeout":
        timed_out_in = str(error.stage)  # the tracer's own deadline (the same one)
    code = int(exit_code_for(result, plan.outputs.fail_on))
    scrub_result(result)
    from promptpath.report.json import result_json

    report = result_json(result, exit_code=code, fail_on=plan.outputs.fail_on)
    return Outcome(
        report=report,
        success=code == 0,
        duration_s=duration,
        deadline_s=deadline_s,
        timed_out_in=timed_out_in,
        failed_stage=None if error is None else str(error.stage),
        exit_code=code,
        cut_by=None if cut_by is None or timed_out_in is None else cut_by.name,
    )


def _cut(signum: signal.Signals, stage: ErrorStage, why: str) -> PromptpathError:
    """The error of a trace the drain cut: the signal, in the stage it cut (its exit code
    128 + the signal, as a run that signal interrupts)."""
    from promptpath.core.errors import Interrupted
    from promptpath.core.exitcodes import ExitCode

    error = Interrupted(
        f"interrupted by {signum.name} in stage {stage!r}: {why}",
        stage=stage,
        kind="interrupted",
    )
    error.exit_code = ExitCode(128 + int(signum))
    return error


def _quiet(_message: str) -> None:
    return None


__all__ = ["Outcome", "Stop", "run_probe"]
