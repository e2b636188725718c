"""`promptpath diff BEFORE AFTER`: two documents read, judged (core/change), reported.

Reads ``promptpath.run/1``, ``promptpath.series/1``, ``promptpath.compare/1`` and watch
histories (JSON Lines of ``promptpath.watch/1``), in any pairing; ``diff HISTORY --before
HH:MM-HH:MM --after HH:MM-HH:MM`` compares two time ranges (UTC) of one history. A file
that is not a promptpath document, or of a schema version this promptpath does not
know, is a one-line usage error naming the file (exit 2). Exit 1 when a metric regressed
beyond its noise, else 0.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from promptpath.core.change.compose import Diff, Side, diff_runs
from promptpath.core.change.documents import SCHEMAS, runs_of, schema_of
from promptpath.core.change.history import History, parse_history, parse_range
from promptpath.core.errors import PromptpathError, UsageError
from promptpath.environment import Environment

__all__ = ["MAX_DOCUMENT_BYTES", "DiffArgs", "Loaded", "execute_diff", "load", "shown_runs"]

#: A document read at most: a series of 1,000 runs is ~25 MB; a week of watch history
#: at one trace a minute ~250 MB.
MAX_DOCUMENT_BYTES = 512 << 20
_KIND = {
    "promptpath.run/1": "run",
    "promptpath.series/1": "series",
    "promptpath.compare/1": "compare",
    "promptpath.watch/1": "history",
}
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Loaded:
    """One file read: its kind, and its runs (or its history, for time ranges)."""

    path: str
    kind: str
    runs: list[Mapping[str, Any]]
    history: History | None = None


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"diff: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise UsageError(f"diff: {path} is larger than {MAX_DOCUMENT_BYTES >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"diff: {path} is not a promptpath document (not UTF-8 text)") from None


def _not_ours(path: str, doc: object) -> UsageError:
    schema = doc.get("schema") if isinstance(doc, Mapping) else None
    if isinstance(schema, str) and schema.startswith("promptpath.") and schema not in SCHEMAS:
        known = ", ".join(SCHEMAS)
        return UsageError(
            f"diff: {path}: unknown schema version {schema[:60]!r} (this promptpath reads {known})"
        )
    return UsageError(
        f"diff: {path} is not a promptpath document (no promptpath schema: want the output "
        "of run/probe --json, a series, --compare-http, or a watch history)"
    )


def load(path: str) -> Loaded:
    """Read one document (or history); UsageError naming the file otherwise."""
    text = _read(path)
    try:
        doc: object = json.loads(text)
    except ValueError:
        doc = None
    if doc is None and text.lstrip().startswith("{"):
        lines = text.splitlines()
        try:
            first = json.loads(lines[0]) if lines else None
        except ValueError:
            first = None
        if schema_of(first) == "promptpath.watch/1":
            try:
                history = parse_history(lines)
            except ValueError as exc:
                raise UsageError(f"diff: {path}: not a watch history: {exc}") from None
            return Loaded(path=path, kind="history", runs=history.runs(), history=history)
        raise _not_ours(path, first)
    schema = schema_of(doc)
    if schema is None:
        raise _not_ours(path, doc)
    assert isinstance(doc, Mapping)
    if schema == "promptpath.watch/1":  # a history of one line
        history = parse_history([text])
        return Loaded(path=path, kind="history", runs=history.runs(), history=history)
    return Loaded(path=path, kind=_KIND[schema], runs=runs_of(doc))


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
    ranges = (args.before_range, args.after_range)
    if any(r is not None for r in ranges) and None in ranges:
        raise UsageError("diff: --before and --after go together (two ranges of one history)")
    first = load(args.before_file)
    if args.after_file is None:
        if first.history is None or ranges[0] is None:
            raise UsageError(
                "diff: give two documents (BEFORE AFTER), or one watch history with "
                "--before HH:MM-HH:MM --after HH:MM-HH:MM"
            )
        pairs = [(first, ranges[0]), (first, ranges[1])]
    else:
        if ranges[0] is not None:
            raise UsageError("diff: --before/--after select ranges of one history: give one file")
        pairs = [(first, None), (load(args.after_file), None)]
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
