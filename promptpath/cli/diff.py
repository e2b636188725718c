"""`promptpath diff BEFORE AFTER`: two documents read, judged (core/change), reported.

Reads ``promptpath.run/1``, ``promptpath.series/1``, ``promptpath.compare/1`` and watch
histories (JSON Lines of ``promptpath.watch/1``), in any pairing; ``diff HISTORY --before
HH:MM-HH:MM --after HH:MM-HH:MM`` compares two time ranges (UTC) of one history. A file
that is not a promptpath document, or of a schema version this promptpath does not
know, is a one-line usage error naming the file (exit 2). Exit 1 when a metric regressed
beyond its noise, else 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promptpath.core.change.compose import Diff, Side, diff_runs
from promptpath.core.change.history import parse_range
from promptpath.core.errors import PromptpathError, UsageError
from promptpath.environment import Environment
from promptpath.modes.interrupts import quiet_on_closed_pipe
from promptpath.plan.documents import Loaded, load

__all__ = ["DiffArgs", "execute_diff", "shown_runs"]

_HTTP = {"2": "HTTP/2", "3": "HTTP/3"}


@dataclass(frozen=True, slots=True, kw_only=True)
class DiffArgs:
    """The diff command's values, as typer parsed them."""

    before_file: str
    after_file: str | None = None
    before_range: str | None = None
    after_range: str | None = None
    protocol: str = "2"
    json_out: bool = False
    html: str | None = None

    @classmethod
    def of(cls, values: Mapping[str, object]) -> DiffArgs:
        def text(key: str) -> str | None:
            value = values.get(key)
            return None if value is None else str(value)

        return cls(
            before_file=str(values["before_file"]),
            after_file=text("after_file"),
            before_range=text("before_range"),
            after_range=text("after_range"),
            protocol=text("protocol") or "2",
            json_out=bool(values.get("json_out", False)),
            html=text("html"),
        )


def _protocol_runs(loaded: Loaded, protocol: str) -> list[Mapping[str, Any]]:
    """A compare document's runs of one protocol (its HTTP/2 run or its HTTP/3 run)."""
    if loaded.kind != "compare":
        return loaded.runs
    want = _HTTP[protocol]
    return [r for r in loaded.runs if r.get("http_version") == want]


def _side(loaded: Loaded, runs: list[Mapping[str, Any]], range_text: str | None) -> Side:
    from promptpath.core.change.metrics import run_failed

    return Side(
        source=os.path.basename(loaded.path) or loaded.path,
        kind=loaded.kind,
        runs=len(runs),
        failed=sum(1 for r in runs if run_failed(r)),
        range=range_text,
    )


def _sides(args: DiffArgs) -> tuple[tuple[Side, list[Mapping[str, Any]]], ...]:
    if args.protocol not in _HTTP:
        raise UsageError(f"diff: --protocol {args.protocol!r}: use 2 or 3", kind="bad_option")
    from promptpath.plan.resolve import diff_ranges

    ranges = (args.before_range, args.after_range)
    diff_ranges(*ranges, one_file=args.after_file is None)
    first = load(args.before_file, "diff")
    if args.after_file is None:
        if first.history is None or ranges[0] is None:
            raise UsageError(
                "diff: give two documents (BEFORE AFTER), or one watch history with time "
                "ranges (HH:MM-HH:MM) before and after"
            )
        pairs = [(first, ranges[0]), (first, ranges[1])]
    else:
        pairs = [(first, None), (load(args.after_file, "diff"), None)]
    out = []
    for (loaded, range_text), word in zip(pairs, ("before", "after"), strict=True):
        if range_text is not None:
            assert loaded.history is not None
            try:
                window = parse_range(range_text)
            except ValueError as exc:
                raise UsageError(f"diff: --{word}: {exc}", kind="bad_option") from None
            runs = loaded.history.runs(window)
        else:
            runs = _protocol_runs(loaded, args.protocol)
        if not runs:
            where = f" between {range_text} UTC" if range_text else ""
            raise UsageError(f"diff: {loaded.path} holds no runs{where}")
        out.append((_side(loaded, runs, range_text), runs))
    return tuple(out)


def shown_runs(before: list[Mapping[str, Any]], after: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Each side's median-TTFT run among those that did not fail (None: every run failed),
    whose waterfall and token timeline the HTML page draws on one scale."""

    def ttft(run: Mapping[str, Any]) -> float | None:
        value = run.get("ttft_ms")
        start = value.get("from_start") if isinstance(value, Mapping) else None
        return float(start) if isinstance(start, int | float) else None

    def pick(runs: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
        timed = sorted(
            (
                (t, i)
                for i, r in enumerate(runs)
                if r.get("error") is None and (t := ttft(r)) is not None
            )
        )
        return runs[timed[len(timed) // 2][1]] if timed else None

    return {"before": pick(before), "after": pick(after)}


@quiet_on_closed_pipe
def execute_diff(values: Mapping[str, object], *, env: Environment) -> int:
    """`promptpath diff`: the exit code (0 nothing regressed, 1 regressed, 2 bad input)."""
    from promptpath.cli.commands import usage_failure
    from promptpath.modes.outcome import report_console

    args = DiffArgs.of(values)
    try:
        from promptpath.outputs.deliver import plan_exports

        exports = plan_exports({"html": args.html})
        (b_side, b_runs), (a_side, a_runs) = _sides(args)
    except PromptpathError as exc:
        return usage_failure(exc, args.json_out, env)
    diff: Diff = diff_runs(b_runs, a_runs, before_side=b_side, after_side=a_side)
    from promptpath.report.diff import diff_exit_code, diff_json, render_diff
    from promptpath.report.json import dumps

    console = report_console(args.json_out, env)
    render_diff(diff, console)
    body = diff_json(diff, shown_runs(b_runs, a_runs) if args.html else None)
    if args.json_out:
        print(dumps(body), file=env.stdout)
    return exports.finish(body, diff_exit_code(diff), env)
