"""What every mode needs to turn a traced run into a report: its exit code, its SLO
verdicts, its scrubbed messages, and the console the terminal report goes to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from promptpath.core.exitcodes import ExitCode
from promptpath.core.verdict import counts
from promptpath.environment import Environment
from promptpath.modes.interrupts import PipeConsole

if TYPE_CHECKING:
    from rich.console import Console

    from promptpath.core.slo import SLO, SLOResult
    from promptpath.tracer.orchestrator import TraceResult


def exit_code_for(result: TraceResult, fail_on: str) -> ExitCode:
    """The stage that failed decides; then findings at or above --fail-on give 1."""
    for res in (result, result.warm):
        if res is not None and res.exc is not None:
            return res.exc.exit_code
    if any(counts(f.verdict, fail_on) for f in result.findings):
        return ExitCode.FINDING
    return ExitCode.OK


def judge_single(result: TraceResult, slos: Sequence[SLO], code: int) -> list[SLOResult]:
    """A single run's SLOs, each judged against the run's own value (its p95 is itself)."""
    if not slos:
        return []
    from promptpath.core.series import sample_of, single_values
    from promptpath.core.slo import evaluate

    return evaluate(slos, single_values(sample_of(result.timeline, code)))


def scrub_result(result: TraceResult) -> None:
    """Servers echo keys in error bodies; take them out of the messages the terminal shows."""
    from promptpath.report.redact import Redactor

    redactor = Redactor.for_options(result.options)
    for res in (result, result.warm):
        if res is None:
            continue
        err = res.timeline.error
        if err is not None:
            err.message = redactor.text(err.message)
        if res.exc is not None:
            res.exc.message = redactor.text(res.exc.message)


def report_console(json_out: bool, env: Environment) -> Console:
    """Terminal report on stdout only when it is a terminal and JSON is not asked for.

    Into a file or a CI log nothing is wrapped: the verdict stays one greppable line."""
    to_stdout = not json_out and env.stdout_isatty
    file, isatty = (env.stdout, True) if to_stdout else (env.stderr, env.stderr_isatty)
    colour = env.colour(isatty)
    return PipeConsole(
        file=file,
        # The Environment decides, not the file object (a test's StringIO) nor os.environ.
        force_terminal=isatty or colour,
        color_system="auto" if colour else None,  # None: no escape codes, bold included
        highlight=False,
        # A server's ":warning:" stays those nine characters (rich would draw an emoji), and
        # rich's emoji table (~3,700 names, ~8 ms to import) is not loaded by every run.
        emoji=False,
        soft_wrap=not isatty,
        # rich's own hook for its tests: COLUMNS, TERM and COLORTERM come from env.environ.
        _environ=env.environ,
    )


__all__ = ["exit_code_for", "judge_single", "report_console", "scrub_result"]
