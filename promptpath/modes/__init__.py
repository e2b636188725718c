"""The modes a run can take, behind one interface: single (with --warm), compare, series
(one after another, or --concurrency load).

Each mode is built from the Plan, the Environment and the report console; ``run()`` does
the work (runner.run_interruptibly cancels it on a stop signal), and ``report(signum)``
returns a Report: the exit code, the terminal rendering, and the JSON object, built at most
once and read by --json and every export alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from promptpath.modes.base import Mode, Report

if TYPE_CHECKING:
    from rich.console import Console

    from promptpath.environment import Environment
    from promptpath.plan.plan import Plan


def mode_for(plan: Plan, env: Environment, console: Console) -> Mode:
    """The mode the plan asks for."""
    if plan.mode == "compare-http":
        from promptpath.modes.compare_http import CompareMode

        return CompareMode(plan, env)
    if plan.mode in ("series", "load"):
        from promptpath.modes.series import SeriesMode

        return SeriesMode(plan, env)
    from promptpath.modes.single import SingleMode

    return SingleMode(plan, env, console)


__all__ = ["Mode", "Report", "mode_for"]
