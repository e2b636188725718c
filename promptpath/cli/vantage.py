"""`promptpath vantage`: what a fleet of exporters recorded, read back through Prometheus.

Options checked into a ``VantagePlan`` (a problem is one line, exit 2, before any query),
the six instant queries of core/vantage/queries.py asked at one instant
(net/promapi.py), the table built and judged (core/vantage/), the result printed (the
table, or --json's ``promptpath.vantage/1`` object) and --html written. Prometheus that
cannot be reached, a query it refuses, an answer that is not its API's: one line naming
which, the stage's exit code (3, 4, 5, 6, 7, 8). No series for the selection: exit 2.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from promptpath import __version__
from promptpath.core.errors import PromptpathError, StreamError, UsageError
from promptpath.core.vantage.queries import Selection, check_label, parse_since
from promptpath.environment import Environment
from promptpath.net.promapi import Endpoint
from promptpath.report.vantage import Comparison

ENV_URL = "PROMPTPATH_PROMETHEUS_URL"
MAX_TIMEOUT_S = 300.0


@dataclass(frozen=True, slots=True, kw_only=True)
class VantagePlan:
    endpoint: Endpoint
    selection: Selection
    timeout_s: float
    json_out: bool = False
    html: Path | None = None


def _text(values: Mapping[str, object], dest: str) -> str | None:
    value = values.get(dest)
    return None if value is None or value == "" else str(value)


def plan_of(values: Mapping[str, object], environ: Mapping[str, str]) -> VantagePlan:
    """The options checked: every problem a UsageError naming the option."""
    from promptpath.net.promapi import endpoint

    url = _text(values, "prometheus") or environ.get(ENV_URL)
    if not url:
        raise UsageError(
            f"--prometheus URL is needed (or {ENV_URL}): the Prometheus that scrapes the exporters",
            kind="bad_option",
        )
    timeout = float(values.get("timeout") or 0)  # type: ignore[arg-type]
    if not math.isfinite(timeout) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise UsageError(
            f"--timeout must be above 0 and at most {MAX_TIMEOUT_S:g} s, got {timeout:g}",
            kind="bad_option",
        )
    selection = Selection(
        by=check_label(str(values.get("by") or "vantage"), "--by"),
        target=_text(values, "target"),
        module=_text(values, "module"),
        since_s=parse_since(str(values.get("since") or "1h")),
    )
    selection.queries()  # a --target or --module PromQL cannot quote fails here
    html = _text(values, "html")
    if html is not None:
        from promptpath.outputs.deliver import check_writable

        check_writable(Path(html), "--html")
    return VantagePlan(
        endpoint=endpoint(url, cacert=_text(values, "cacert")),
        selection=selection,
        timeout_s=timeout,
        json_out=bool(values.get("json_out")),
        html=None if html is None else Path(html),
    )


def compare(plan: VantagePlan, *, now: float) -> Comparison:
    """Ask, build, judge: the comparison, or the error that stopped it."""
    from promptpath.core.vantage.judge import judge
    from promptpath.core.vantage.table import BadAnswer, build
    from promptpath.net.promapi import query

    deadline = time.monotonic() + plan.timeout_s
    answers = {}
    for name, promql in plan.selection.queries().items():
        left = deadline - time.monotonic()
        if left <= 0:
            from promptpath.core.errors import TraceTimeout

            raise TraceTimeout(
                f"Prometheus at {plan.endpoint.where} did not answer every query within"
                f" --timeout {plan.timeout_s:g} s",
                stage="response",
                kind="timeout",
            )
        answers[name] = query(
            plan.endpoint,
            promql,
            at=now,
            timeout_s=left,
            user_agent=f"promptpath/{__version__}",
        )
    try:
        table = build(answers, plan.selection.by)
    except BadAnswer as exc:
        raise StreamError(
            f"Prometheus at {plan.endpoint.where}: the answer is not a Prometheus vector: {exc}",
            stage="response",
            kind="malformed",
        ) from None
    if not table.rows:
        raise UsageError(
            f"no series: Prometheus at {plan.endpoint.where} has no promptpath_stage_duration"
            f"_seconds or promptpath_success for {plan.selection.describe()} (is the"
            f" {plan.selection.by!r} label set: the exporter's vantage or --label?)"
        )
    at = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
    return Comparison(
        prometheus=plan.endpoint.where,
        at=at.replace("+00:00", "Z"),
        selection=plan.selection,
        table=table,
        verdict=judge(table),
    )


def _failed(exc: PromptpathError, json_out: bool, env: Environment) -> int:
    from promptpath.core.textsafe import valid_unicode, visible
    from promptpath.report.vantage import error_document

    print(f"promptpath: vantage: {visible(exc.message)}", file=env.stderr)
    if json_out:
        error = {"stage": exc.stage, "kind": exc.kind, "message": valid_unicode(exc.message)}
        print(json.dumps(error_document(int(exc.exit_code), error)), file=env.stdout)
    return int(exc.exit_code)


def execute_vantage(values: Mapping[str, object], *, env: Environment) -> int:
    """`promptpath vantage`: 0 with the table printed (whether a vantage stands out or
    not), else the failure's exit code."""
    from promptpath.report.vantage import document, render_html, terminal

    json_out = bool(values.get("json_out"))
    try:
        plan = plan_of(values, env.environ)
        found = compare(plan, now=time.time())
    except PromptpathError as exc:
        return _failed(exc, json_out, env)
    if plan.json_out:
        env.stdout.write(json.dumps(document(found), indent=2) + "\n")
    else:
        env.stdout.write(terminal(found))
    env.stdout.flush()
    if plan.html is not None:
        try:
            plan.html.write_text(render_html(found), encoding="utf-8")
        except OSError as exc:
            print(f"promptpath: export failed: --html {plan.html}: {exc.strerror}", file=env.stderr)
            from promptpath.core.exitcodes import ExitCode

            return int(ExitCode.EXPORT)
    return 0


__all__ = ["VantagePlan", "compare", "execute_vantage", "plan_of"]
