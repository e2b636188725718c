"""Glue for a series (--count N, --concurrency C): the spend stated, runs traced with live
progress, aggregated, judged against --slo, reported, and one exit code back.

``commands.execute`` hands over here early; a single run stays there.
"""

from __future__ import annotations

import ipaddress
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import anyio

from promptpath.core.errors import UsageError
from promptpath.core.series import (
    SPEND_ASK_REQUESTS,
    SPEND_ASK_TOKENS,
    SeriesPlan,
    parse_plan,
    sample_of,
    series_exit_code,
    slo_values,
    summarize_series,
)
from promptpath.core.slo import SLO, SLOResult, evaluate, parse_slo
from promptpath.environment import Environment
from promptpath.interrupts import exit_code_of, stop_on_signals
from promptpath.options import RunOptions
from promptpath.tracer.orchestrator import TraceResult

if TYPE_CHECKING:
    from rich.console import Console

    from promptpath.report.series import Level

#: What a series needs from commands.py, handed in (commands imports this module).
Scrub = Callable[[TraceResult], None]
MarkInterrupted = Callable[[TraceResult, int], None]
Finish = Callable[[dict[str, Any], int], int]


@dataclass(kw_only=True)
class SeriesArgs:
    """The raw series and SLO options (RunArgs.series), before validation."""

    count: int = 1
    interval: float = 0.0
    reuse: bool = False
    concurrency: str | None = None  # "8", or a sweep "1,8,64"
    connections: int | None = None
    slo: list[str] = field(default_factory=list)
    yes: bool = False  # go ahead with a series above the spend threshold


def series_inputs(
    series: SeriesArgs,
    options: RunOptions,
    *,
    profile: str | None,
    env: Environment,
    clash: Mapping[str, bool],
) -> tuple[SeriesPlan, list[SLO]]:
    """The series plan and the SLOs (--slo, then the ``profile``'s), checked, and a series'
    spend stated: UsageError for any problem. ``clash``: options a series refuses, and
    whether each was given."""
    plan = parse_plan(
        count=series.count,
        interval_s=series.interval,
        reuse=series.reuse,
        concurrency=series.concurrency,
        connections=series.connections,
    )
    slos = [parse_slo(expr) for expr in series.slo]
    if profile is not None:
        named = {s.metric for s in slos}
        # The command line wins per metric: a profile's bound on one it names is dropped.
        slos += [s for s in profile_slos(profile, env.environ) if s.metric not in named]
    if slos and clash.get("--compare-http"):
        raise UsageError("--slo judges one run or a series, not --compare-http", kind="bad_option")
    if plan.is_series:
        given = [flag for flag, on in clash.items() if on]
        if given:
            raise UsageError(
                f"a series (--count, --concurrency) traces prompts only; drop {', '.join(given)}",
                kind="bad_option",
            )
        check_spend(plan, options, yes=series.yes, env=env)
    return plan, slos


def profile_slos(name: str, environ: Mapping[str, str]) -> list[SLO]:
    """``[profiles.NAME.slo]``: ``ttft_p95 = "<800ms"`` (or a list, for two bounds)."""
    from promptpath.config import config_path, load_profile

    table = load_profile(name, config_path(dict(environ))).get("slo", {})
    slos = []
    for metric, bounds in table.items():
        for bound in bounds if isinstance(bounds, list) else [bounds]:
            if not isinstance(bound, str):
                raise UsageError(
                    f'profile {name!r} slo {metric!r}: want a string like "<800ms", got {bound!r}',
                    kind="bad_config",
                )
            try:
                slos.append(parse_slo(f"{metric}{bound}"))
            except UsageError as exc:
                raise UsageError(f"profile {name!r}: {exc.message}", kind="bad_config") from exc
    return slos


def is_loopback(options: RunOptions) -> bool:
    """The target is this host: a loopback address, ``localhost``, or pinned to loopback
    by --resolve or --connect-to."""
    host, port = options.target.host, options.target.port
    rule = options.connect_to_for(host, port)
    if rule is not None:
        host, port = rule.destination(host, port)
    host = options.resolve_override(host, port) or host
    name = host.lower().rstrip(".")
    if name == "localhost" or name.endswith(".localhost"):  # RFC 6761 §6.3
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


def check_spend(plan: SeriesPlan, options: RunOptions, *, yes: bool, env: Environment) -> None:
    """State what the series may spend, as probes state their cost; above the threshold a
    non-loopback target needs --yes (UsageError). A loopback target is never refused."""
    requests = plan.requests
    tokens = requests * options.max_tokens
    loopback = is_loopback(options)
    where = "loopback" if loopback else options.target.host
    print(
        f"promptpath: series: {requests} request{'s' if requests != 1 else ''} ×"
        f" ≤{options.max_tokens} tokens = ≤{tokens:,} tokens to {where}",
        file=env.stderr,
    )
    if loopback or yes:
        return
    if requests > SPEND_ASK_REQUESTS or tokens > SPEND_ASK_TOKENS:
        raise UsageError(
            f"{requests} requests and ≤{tokens:,} tokens to {options.target.host} is above what"
            f" a series spends without asking ({SPEND_ASK_REQUESTS} requests or"
            f" {SPEND_ASK_TOKENS:,} tokens): add --yes to go ahead",
            kind="bad_option",
        )


def run_series(
    options: RunOptions,
    plan: SeriesPlan,
    slos: Sequence[SLO],
    *,
    json_out: bool,
    env: Environment,
    console: Console,
    scrub: Scrub,
    mark_interrupted: MarkInterrupted,
    finish: Finish | None = None,
) -> int:
    """Run the series ``series_inputs`` checked; its exit code (README, "Exit codes").

    ``finish(report, code)`` gets the series object and its code last (the exports) and
    returns the final code."""
    from promptpath.progress import LiveProgress, progress_console

    live = LiveProgress(progress_console(env), fallback=lambda _message: None)
    levels = plan.concurrency or (1,)
    started: list[list[TraceResult | None]] = [[None] * plan.count for _ in levels]
    finished: list[list[TraceResult | None]] = [[None] * plan.count for _ in levels]

    async def main() -> None:
        async with live.running():
            for at, level in enumerate(levels):
                await _level(at, level)

    async def _level(at: int, level: int) -> None:
        where = f" at concurrency {level}" if plan.concurrency else ""

        def on_start(index: int, result: TraceResult) -> None:
            started[at][index] = result
            live.watch(result.timeline)
            live.step(f"run {index + 1} of {plan.count}{where}")

        def on_run(index: int, result: TraceResult) -> None:
            finished[at][index] = result
            done = sum(r is not None for r in finished[at])
            live.step(f"{done} of {plan.count} done{where}")

        if level == 1:
            from promptpath.tracer.repeat import trace_repeated

            await trace_repeated(
                options,
                count=plan.count,
                interval_s=plan.interval_s,
                reuse=plan.reuse,
                on_start=on_start,
                on_run=on_run,
            )
        else:
            from promptpath.tracer.load import run_concurrent

            results = await run_concurrent(
                options,
                count=plan.count,
                concurrency=level,
                # 0: the protocol's default (one HTTP/2 or HTTP/3 connection, one
                # HTTP/1.1 connection per stream in flight).
                connections=0 if plan.connections is None else min(plan.connections, level),
                on_run=on_run,
            )
            finished[at][: len(results)] = results  # start order, whatever on_run saw

    with stop_on_signals() as stopper:
        anyio.run(stopper.run, main)
    signum = stopper.signum
    if signum is not None:
        print(f"promptpath: interrupted ({signal.Signals(signum).name})", file=env.stderr)
    for begun, done in zip(started, finished, strict=True):
        for index, result in enumerate(begun):
            # A run a signal cut short: reported with what it measured, as a single run is.
            if result is not None and done[index] is None and signum is not None:
                mark_interrupted(result, signum)
                done[index] = result
    for result in (r for done in finished for r in done if r is not None):
        scrub(result)
    measured = _levels(levels, finished)
    if not measured:  # stopped before the first run began
        assert signum is not None  # only a stop signal ends a series with no run
        return int(exit_code_of(signum))
    code, body = _report(
        plan, slos, measured, signum=signum, json_out=json_out, env=env, console=console
    )
    return code if finish is None else finish(body, code)


def _levels(levels: Sequence[int], finished: list[list[TraceResult | None]]) -> list[Level]:
    """Each level's runs, in start order, with their exit codes and summary."""
    from promptpath.report.series import Level

    out = []
    for level, done in zip(levels, finished, strict=True):
        results = [r for r in done if r is not None]
        if results:
            # No probes in a series: a run's code is its failure's, as exit_code_for gives.
            codes = [0 if r.exc is None else int(r.exc.exit_code) for r in results]
            samples = [sample_of(r.timeline, c) for r, c in zip(results, codes, strict=True)]
            summary = summarize_series(samples)
            out.append(Level(concurrency=level, results=results, codes=codes, summary=summary))
    return out


def _report(
    plan: SeriesPlan,
    slos: Sequence[SLO],
    levels: list[Level],
    *,
    signum: int | None,
    json_out: bool,
    env: Environment,
    console: Console,
) -> tuple[int, dict[str, Any]]:
    from promptpath.report.series import render_series, series_json

    samples = [
        sample_of(r.timeline, c)
        for level in levels
        for r, c in zip(level.results, level.codes, strict=True)
    ]
    total = summarize_series(samples)
    verdicts: list[SLOResult] = []
    if len(plan.concurrency) > 1:
        # A sweep is judged level by level: "p95 under 800 ms at 64 streams" is the claim.
        for at, level in enumerate(levels):
            judged = evaluate(slos, slo_values(level.summary), concurrency=level.concurrency)
            levels[at] = replace(level, slo=judged)
            verdicts += judged
    else:
        verdicts = evaluate(slos, slo_values(total))
    code = series_exit_code(samples, verdicts)
    if signum is not None:
        code = int(exit_code_of(signum))
    slo = verdicts if slos else None
    # Built whatever the output: it is the report object (exporters read it too).
    body = series_json(plan, levels, total=total, slo=slo, exit_code=code)
    render_series(console, plan, levels, total=total, slo=slo, exit_code=code)
    if json_out:
        from promptpath.report.json import dumps

        env.stdout.write(dumps(body) + "\n")
        env.stdout.flush()
    return code, body
