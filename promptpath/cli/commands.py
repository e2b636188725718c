"""The run and probe commands: option values in, one Plan, its mode run, the report out.

``execute`` is the whole path: ``resolve`` checks every option into a Plan (a problem is a
usage error before any packet is sent), ``modes.mode_for`` picks the mode, ``runner`` runs
it interruptibly, and ``deliver`` hands its one Report to the terminal, --json and the
exports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from promptpath.core.errors import PromptpathError
from promptpath.environment import Environment
from promptpath.modes.interrupts import quiet_on_closed_pipe
from promptpath.modes.outcome import exit_code_for, judge_single, report_console, scrub_result
from promptpath.outputs.formats import BY_DEST

#: --json's row of the formats table: its writer prints the report on stdout.
JSON = BY_DEST["json_out"]

if TYPE_CHECKING:
    from rich.console import Console

    from promptpath.modes.base import Report
    from promptpath.options import RunOptions
    from promptpath.outputs.otlp import OtlpPlan
    from promptpath.plan.plan import Plan
    from promptpath.plan.resolve import Values


def usage_json(exc: PromptpathError) -> str:
    """The short JSON object for an error found before anything was sent."""
    import json

    from promptpath.core.textsafe import valid_unicode

    # valid_unicode: an argument that was not UTF-8 reaches the message as a lone surrogate.
    return json.dumps(
        {
            "schema": "promptpath.run/1",
            "ok": False,
            "exit_code": int(exc.exit_code),
            "error": {"stage": exc.stage, "kind": exc.kind, "message": valid_unicode(exc.message)},
        }
    )


def usage_failure(exc: PromptpathError, json_out: bool, env: Environment) -> int:
    """A problem found before any packet was sent: one line, and JSON if asked for."""
    from promptpath.core.textsafe import visible

    # Line by line: an --slo error draws a caret under the expression on its own lines.
    shown = "\n".join(visible(line) for line in exc.message.split("\n"))
    print(f"promptpath: {shown}", file=env.stderr)
    if json_out:
        print(usage_json(exc), file=env.stdout)
    return int(exc.exit_code)


@quiet_on_closed_pipe
def execute(values: Mapping[str, object] | Values, *, env: Environment) -> int:
    """`run` and `probe`: the exit code (README, "Exit codes")."""
    from promptpath.modes.runner import interruptible
    from promptpath.plan.resolve import Values, resolve

    def say(line: str) -> None:
        print(line, file=env.stderr)

    # The stop signals are ours from here: a SIGTERM while the options are resolved
    # cancels the run before it begins (exit 143), instead of killing the process.
    with interruptible(env) as runner:
        try:
            plan = resolve(values, environ=env.environ, say=say)
        except PromptpathError as exc:
            json_out = (
                values.flag("json_out")
                if isinstance(values, Values)
                else bool(values.get("json_out", False))
            )
            return usage_failure(exc, json_out, env)
        from promptpath.modes import mode_for

        if plan.mode in ("single", "compare"):
            _warn_unused_resolve(plan.trace, env)
        console = report_console(plan.outputs.json_out, env)
        mode = mode_for(plan, env, console)
        signum = runner.run(mode.run)
    return deliver(mode.report(signum), plan, env, console)


def execute_exporter(values: Mapping[str, object], *, env: Environment) -> int:
    """`promptpath exporter`: its options resolved, then the service until it stops."""
    from promptpath.plan.resolve import Values, exporter_plan

    try:
        plan = exporter_plan(Values(values), env.environ)
    except PromptpathError as exc:
        return usage_failure(exc, False, env)
    from promptpath.exporter.run import run_exporter

    return run_exporter(plan, env)


def _warn_unused_resolve(options: RunOptions, env: Environment) -> None:
    for entry in options.unused_resolve():
        where = f"{options.target.host}:{options.target.port}"
        print(f"promptpath: warning: --resolve {entry} matches nothing ({where})", file=env.stderr)


def deliver(report: Report, plan: Plan, env: Environment, console: Console) -> int:
    """The report on the terminal, on stdout as JSON (--json), and to every export; the
    exit code, an export's failure included."""
    if report.build is None:  # nothing was measured: the exit code says why
        return report.code
    report.render(console)
    if plan.outputs.otlp is not None:
        _send_otlp(report, plan.outputs.otlp, env)
    exports = plan.outputs.exports
    if plan.outputs.json_out:
        env.stdout.write(JSON.render(report.json(), exports) + "\n")
        env.stdout.flush()
    if not exports.any:
        return report.code
    if exports.files:  # the writers that show the command line (--html) read it there
        exports = dataclasses.replace(exports, command=reproduce(plan, env))
    return exports.finish(report.json(), report.code, env)


def _send_otlp(report: Report, otlp: OtlpPlan, env: Environment) -> None:
    """Spans and metrics to the collector, before --json prints: the report says how it
    went (``otlp``). A failure is one warning line; the exit code stays the run's."""
    from promptpath.core.textsafe import visible
    from promptpath.outputs.otlp import send_otlp

    body = report.json()
    outcome = send_otlp(body, otlp)
    body["otlp"] = outcome.as_dict()
    if outcome.error is not None:
        print(
            f"promptpath: warning: OTLP export to {visible(outcome.endpoint)} ({otlp.source})"
            f" failed: {visible(outcome.error)} (the exit code is the run's)",
            file=env.stderr,
        )


def reproduce(plan: Plan, env: Environment) -> tuple[str, ...]:
    """The command line as given, the run's credentials taken out by their place (a
    header, a URL's userinfo and key-like query values, --proxy-user) whatever their
    length, and searched for in every argument as everywhere else."""
    from promptpath.core.urlsafe import url_credentials
    from promptpath.options import secret_values
    from promptpath.report.redact import Redactor, command_line

    otlp = plan.outputs.otlp
    urls = (
        plan.outputs.exports.pushgateway,
        None if otlp is None else otlp.traces_url or otlp.metrics_url,
        plan.probe_settings.ghost_stream.admin,
    )
    values = [*secret_values(plan.trace), *(v for u in urls if u for v in url_credentials(u))]
    return ("promptpath", *command_line(env.argv, Redactor.of(values)))


# -- for library callers and tests written against the old entry points -------------------
def RunArgs(target: str, **given: Any) -> Values:
    """Option values by the old RunArgs field names (headers, probes, labels, family)."""
    import socket

    from promptpath.plan.resolve import values_for

    renames = {"headers": "header", "probes": "probe", "labels": "label"}
    values = {renames.get(k, k): v for k, v in given.items()}
    family = values.pop("family", 0)
    values["ipv4"] = values.get("ipv4") or family == socket.AF_INET
    values["ipv6"] = values.get("ipv6") or family == socket.AF_INET6
    if values.pop("both_families", False):
        values["ipv4"] = values["ipv6"] = True
    return values_for(target, **values)


def build_options(args: Values, environ: Mapping[str, str] | None = None) -> RunOptions:
    """The tracer's spec for these values (the environment: os.environ unless given)."""
    import os

    from promptpath.plan.resolve import trace_options

    return trace_options(args, os.environ if environ is None else environ)


__all__ = [
    "RunArgs",
    "build_options",
    "deliver",
    "execute",
    "execute_exporter",
    "exit_code_for",
    "judge_single",
    "report_console",
    "scrub_result",
    "usage_failure",
    "usage_json",
]
