"""`promptpath watch`: its options resolved, the watch run until it stops, the summary."""

from __future__ import annotations

from collections.abc import Mapping

from promptpath.core.errors import PromptpathError
from promptpath.environment import Environment
from promptpath.modes.interrupts import quiet_on_closed_pipe


@quiet_on_closed_pipe
def execute_watch(values: Mapping[str, object], *, env: Environment) -> int:
    """The exit code: 0 when the watch ended (q, --count, --duration, the budget), 2 for
    bad options, 128+N for a stop signal (Ctrl-C: 130), as every command."""
    from promptpath.cli.commands import usage_failure
    from promptpath.modes.outcome import report_console
    from promptpath.modes.runner import interruptible
    from promptpath.modes.watch import WatchMode
    from promptpath.plan.watch_options import resolve_watch

    with interruptible(env) as runner:
        try:
            plan, watch = resolve_watch(values, environ=env.environ)
            live = env.stdout_isatty and not watch.jsonl
            mode = WatchMode(plan, watch, env, report_console(not live, env))
            mode.prepare()
        except PromptpathError as exc:
            return usage_failure(exc, False, env)
        signum = runner.run(mode.run)
    report = mode.report(signum)
    # The summary: where the screen was, or on stderr beside the JSON lines.
    report.render(report_console(not live, env))
    return report.code


__all__ = ["execute_watch"]
