"""`promptpath watch`'s options: run's request and path options, and the loop's own.

The request and path rows are run's own (plan/flags.py), so a watch sends exactly what
`run` would; the rows below are watch's. ``resolve_watch`` turns the parsed values into
the ordinary Plan (the trace, the probes) and a WatchPlan (the loop), every conflict
checked before the first packet.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from promptpath.core.errors import UsageError
from promptpath.plan import flags
from promptpath.plan.flags import Flag
from promptpath.plan.watch_plan import (
    DEFAULT_BAND_K,
    DEFAULT_BUDGET,
    DEFAULT_INTERVAL_S,
    DEFAULT_JITTER,
    DEFAULT_MAX_TOKENS,
    DEFAULT_PATH_EVERY,
    DEFAULT_PROBE_EVERY,
    DEFAULT_WINDOW,
    WatchPlan,
)

if TYPE_CHECKING:
    from promptpath.plan.plan import Plan

WATCH: Final = frozenset({"watch"})
PANEL: Final = "Watch"
#: run's rows a watch takes as they are: the request and the path.
_SHARED_PANELS = (flags.TARGET, flags.PATH)


def _shared() -> tuple[Flag, ...]:
    rows = []
    for flag in flags.FLAGS:
        if flag.panel not in _SHARED_PANELS or "probe" not in flag.commands:
            continue
        if flag.dest == "max_tokens":
            flag = dataclasses.replace(
                flag,
                help=f"Cap on generated tokens (default {DEFAULT_MAX_TOKENS}: watch spends"
                " on every trace).",
            )
        rows.append(dataclasses.replace(flag, commands=WATCH))
    return tuple(rows)


def _row(
    dest: str,
    decls: tuple[str, ...],
    type_: object,
    default: object,
    help_: str,
    metavar: str | None = None,
) -> Flag:
    return Flag(
        dest=dest,
        decls=decls,
        type=type_,
        default=default,
        help=help_,
        panel=PANEL,
        metavar=metavar,
        commands=WATCH,
    )


OWN: tuple[Flag, ...] = (
    _row(
        "interval",
        ("--interval", "-i"),
        float,
        DEFAULT_INTERVAL_S,
        "Seconds from the end of one trace to the start of the next.",
        "SECONDS",
    ),
    _row(
        "jitter",
        ("--jitter",),
        float,
        DEFAULT_JITTER,
        "Each pause is the interval × (1 ± this), at random, so a fleet does not synchronise.",
        "FRACTION",
    ),
    _row("count", ("--count", "-c"), int | None, None, "Stop after N traces.", "N"),
    _row(
        "duration", ("--duration",), float | None, None, "Stop after this many seconds.", "SECONDS"
    ),
    _row(
        "history",
        ("--history",),
        str | None,
        None,
        "Append one JSON line per trace to FILE (read back first: its tail seeds the statistics).",
        "FILE.jsonl",
    ),
    _row(
        "probe",
        ("--probe",),
        list[str] | None,
        None,
        "Also run this probe every --probe-every traces; an event when it starts failing"
        " (repeatable).",
        "NAME",
    ),
    _row(
        "probe_every",
        ("--probe-every",),
        int,
        DEFAULT_PROBE_EVERY,
        "Traces between two runs of the --probe probes.",
        "N",
    ),
    _row(
        "path",
        ("--path",),
        bool,
        False,
        "Show the network path's hops (the path probe) beside the stages, mtr-style.",
        None,
    ),
    _row(
        "path_every",
        ("--path-every",),
        int,
        DEFAULT_PATH_EVERY,
        "Traces between two path traces.",
        "N",
    ),
    _row(
        "window",
        ("--window",),
        int,
        DEFAULT_WINDOW,
        "Traces the rolling statistics and bands hold.",
        "N",
    ),
    _row(
        "band_k",
        ("--band-k",),
        float,
        DEFAULT_BAND_K,
        "Band half-width in scaled MADs (median ± k·MAD).",
        "K",
    ),
    _row(
        "budget",
        ("--budget",),
        int,
        DEFAULT_BUDGET,
        "Tokens a watch may spend per UTC hour: each trace's --max-tokens, and the --probe"
        " probes' stated tokens when they run (0: no budget).",
        "TOKENS",
    ),
    _row(
        "budget_action",
        ("--budget-action",),
        str,
        "slow",
        "At the budget: slow (stretch the interval to fit, wait for the next hour) or stop.",
        "slow|stop",
    ),
    _row(
        "jsonl",
        ("--jsonl",),
        bool,
        False,
        "One JSON line per trace on stdout even on a terminal (always without one).",
        None,
    ),
)

FLAGS: tuple[Flag, ...] = (*_shared(), *OWN)
_OWN_DESTS = frozenset(f.dest for f in OWN)


def resolve_watch(
    values: Mapping[str, object], *, environ: Mapping[str, str]
) -> tuple[Plan, WatchPlan]:
    """The trace's Plan and the loop's WatchPlan; UsageError (exit 2) for any problem."""
    from promptpath.plan.resolve import resolve

    own = {k: v for k, v in values.items() if k in _OWN_DESTS}
    trace = {k: v for k, v in values.items() if k not in _OWN_DESTS}
    if trace.get("max_tokens") is None:
        trace["max_tokens"] = DEFAULT_MAX_TOKENS
    given = own.get("probe")
    probes = [str(p) for p in given] if isinstance(given, (list, tuple)) else []
    plan = resolve({**trace, "probe": probes or None}, environ=environ)
    watch = _watch_plan(own, plan)
    return plan, watch


def _positive(name: str, value: float, *, zero: bool = False) -> None:
    if value < 0 or (value == 0 and not zero):
        raise UsageError(
            f"{name} must be {'0 or more' if zero else 'above 0'}, got {value:g}", kind="bad_option"
        )


def _watch_plan(own: Mapping[str, object], plan: Plan) -> WatchPlan:
    from promptpath.plan.resolve import is_loopback

    def get(dest: str) -> object:
        return own.get(dest, next(f.default for f in OWN if f.dest == dest))

    interval = float(get("interval"))  # type: ignore[arg-type]
    jitter = float(get("jitter"))  # type: ignore[arg-type]
    _positive("--interval", interval, zero=True)
    if not 0 <= jitter < 1:
        raise UsageError(f"--jitter must be from 0 to below 1, got {jitter:g}", kind="bad_option")
    count, duration = get("count"), get("duration")
    if count is not None:
        _positive("--count", int(count))  # type: ignore[call-overload]
    if duration is not None:
        _positive("--duration", float(duration))  # type: ignore[arg-type]
    window = int(get("window"))  # type: ignore[call-overload]
    if not 8 <= window <= 10_000:
        raise UsageError(f"--window must be 8 to 10000 traces, got {window}", kind="bad_option")
    band_k = float(get("band_k"))  # type: ignore[arg-type]
    _positive("--band-k", band_k)
    path_every, probe_every = int(get("path_every")), int(get("probe_every"))  # type: ignore[call-overload]
    _positive("--path-every", path_every)
    _positive("--probe-every", probe_every)
    budget = int(get("budget"))  # type: ignore[call-overload]
    _positive("--budget", budget, zero=True)
    action = get("budget_action")
    if action not in ("slow", "stop"):
        raise UsageError(f"--budget-action must be slow or stop, got {action!r}", kind="bad_option")
    history = get("history")
    path = None if history is None else _history_path(str(history))
    if bool(get("path")) and plan.trace.proxy is not None:
        raise UsageError(
            "--path traces toward the address the trace connected to; through a"
            " forward proxy that is the proxy: drop --path or go direct",
            kind="bad_option",
        )
    return WatchPlan(
        interval_s=interval,
        jitter=jitter,
        count=None if count is None else int(count),  # type: ignore[call-overload]
        duration_s=None if duration is None else float(duration),  # type: ignore[arg-type]
        history=path,
        path=bool(get("path")),
        path_every=path_every,
        probe_every=probe_every,
        window=window,
        band_k=band_k,
        budget=budget,
        budget_action="slow" if action == "slow" else "stop",
        jsonl=bool(get("jsonl")),
        cost_per_trace=plan.trace.max_tokens,
        where="loopback" if is_loopback(plan.trace) else plan.trace.target.host,
    )


def _history_path(text: str) -> Path:
    path = Path(text)
    if path.is_dir():
        raise UsageError(f"--history {text}: is a directory", kind="bad_option")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"--history {text}: no directory {parent}", kind="bad_option")
    return path


__all__ = ["FLAGS", "OWN", "WATCH", "resolve_watch"]
