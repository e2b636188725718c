"""Glue between the CLI and the library: options in, report out, exit code back."""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import anyio
from rich.console import Console

from promptpath.core.errors import PromptpathError, UsageError
from promptpath.core.exitcodes import ExitCode
from promptpath.core.findings import Verdict
from promptpath.core.slo import SLO, SLOResult
from promptpath.environment import Environment
from promptpath.export import ExportPlan
from promptpath.interrupts import (
    PipeConsole,
    exit_code_of,
    quiet_on_closed_pipe,
    stop_on_signals,
)
from promptpath.options import (
    DEFAULT_CLIENT,
    DEFAULT_KEY_ENV,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MODEL,
    DEFAULT_PROMPT,
    DEFAULT_TIMEOUT_S,
    ClientName,
    HTTPChoice,
    Provider,
    RunOptions,
    check_client_cert,
    check_timeout,
    detect_provider,
    parse_connect_to,
    parse_headers,
    parse_resolve,
    parse_target,
)
from promptpath.proxies import select_proxy
from promptpath.series_command import SeriesArgs, run_series, series_inputs
from promptpath.tracer.orchestrator import TraceResult
from promptpath.tracer.request import SHAPES

PROVIDERS: tuple[Provider, ...] = ("openai", "responses", "anthropic", "ollama")
HTTP_CHOICES: tuple[HTTPChoice, ...] = ("1.1", "2", "3", "auto")


@dataclass(kw_only=True)
class RunArgs:
    """Raw CLI values, before validation."""

    target: str
    provider: str | None = None
    model: str | None = None
    prompt: str | None = None
    max_tokens: int | None = None
    headers: list[str] = field(default_factory=list)
    client: str | None = None  # --as; None: not given (profile, else the provider's SDK)
    api_key_env: str | None = None
    http: str | None = None  # None: not given (profile, else "auto")
    resolve: list[str] = field(default_factory=list)
    cacert: str | None = None
    insecure: bool | None = None
    allow_cleartext: bool = False
    family: int = 0
    timeout: float | None = None
    warm: bool = False
    resolver: str | None = None
    authoritative: str | None = None
    probes: list[str] = field(default_factory=list)
    verbose: bool = False
    both_families: bool = False
    probe_options: dict[str, object] = field(default_factory=dict)
    compare_http: bool = False
    compare_runs: int | None = None  # None: not given (DEFAULT_RUNS with --compare-http)
    proxy: str | None = None  # None: not given ("" turns the environment's proxy off)
    noproxy: str | None = None
    proxy_user: str | None = field(default=None, repr=False)
    proxy_cacert: str | None = None
    proxy_source: str = "--proxy"  # "profile" when the profile's proxy filled --proxy
    # mTLS and --connect-to
    cert: str | None = None
    key: str | None = None
    connect_to: list[str] = field(default_factory=list)
    series: SeriesArgs = field(default_factory=SeriesArgs)  # --count, --concurrency, --slo
    # exports (promptpath/export.py)
    junit: str | None = None
    har: str | None = None
    prom_textfile: str | None = None
    pushgateway: str | None = None
    labels: list[str] = field(default_factory=list)


def apply_profile(args: RunArgs, env: Mapping[str, str]) -> tuple[RunArgs, str | None]:
    """TARGET names a profile: fill what the command line left at its default."""
    import dataclasses

    from promptpath.config import config_path, load_profile

    profile = load_profile(args.target, config_path(dict(env)))
    merged: dict[str, object] = {"target": profile["url"]}
    for key in (
        "provider",
        "model",
        "prompt",
        "max_tokens",
        "api_key_env",
        "http",
        "cacert",
        "insecure",
        "timeout",
        "resolver",
        "proxy",
        "noproxy",
        "cert",
        "key",
    ):
        # Only what the command line left unsaid: an explicit value, even the default, wins.
        if key in profile and getattr(args, key) is None:
            merged[key] = profile[key]
    if "proxy" in merged:
        merged["proxy_source"] = "profile"
    if "headers" in profile:
        merged["headers"] = [f"{k}: {v}" for k, v in profile["headers"].items()] + args.headers
    if "as" in profile and args.client is None:  # `as` is a Python keyword: RunArgs.client
        merged["client"] = profile["as"]
    if "resolve" in profile and not args.resolve:
        merged["resolve"] = [str(r) for r in profile["resolve"]]
    return dataclasses.replace(args, **merged), profile.get("api_key")  # type: ignore[arg-type]


def check_cacert(path: str) -> None:
    """--cacert must be a readable PEM bundle: find out now, not as a TLS failure later."""
    import ssl

    if not os.path.isfile(path):
        raise UsageError(f"--cacert file not found: {path}")
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError) as exc:
        raise UsageError(f"--cacert {path}: not a PEM certificate bundle ({exc})") from exc


def build_options(args: RunArgs, environ: Mapping[str, str] | None = None) -> RunOptions:
    """Validate CLI values into RunOptions; every problem is a UsageError (exit 2)."""
    env = os.environ if environ is None else environ
    profile_key: str | None = None
    if "://" not in args.target:
        args, profile_key = apply_profile(args, env)
    target = parse_target(args.target)
    if args.provider is not None:
        if args.provider not in PROVIDERS:
            raise UsageError(
                f"--provider must be one of {', '.join(PROVIDERS)}, got {args.provider!r}"
            )
        provider: Provider = args.provider  # type: ignore[assignment]
    else:
        detected = detect_provider(target.path)
        if detected is None:
            raise UsageError(
                f"cannot tell the provider from the path {target.path!r}: pass --provider"
                f" ({', '.join(PROVIDERS)})"
            )
        provider = detected
    client = client_for(args.client, provider)
    http = args.http or SHAPES[client].http
    timeout = DEFAULT_TIMEOUT_S if args.timeout is None else args.timeout
    if http not in HTTP_CHOICES:
        raise UsageError(f"--http must be one of {', '.join(HTTP_CHOICES)}, got {http!r}")
    if args.both_families:
        raise UsageError("-4 and -6 exclude each other")
    timeout = check_timeout(timeout)
    max_tokens = DEFAULT_MAX_TOKENS if args.max_tokens is None else args.max_tokens
    if max_tokens < 1:
        raise UsageError("--max-tokens must be at least 1")
    keylog_file = env.get("SSLKEYLOGFILE") or None
    if keylog_file is not None:
        # The ssl module opens it inside every SSLContext (--cacert's check included), and
        # HTTP/3 appends to it: one clear message rather than a misleading one later.
        try:
            with open(keylog_file, "a", encoding="ascii"):
                pass
        except OSError as exc:
            raise UsageError(
                f"SSLKEYLOGFILE cannot be appended to ({exc.strerror or exc})", kind="bad_option"
            ) from exc
    for ca_file in (args.cacert, args.proxy_cacert):
        if ca_file is not None:
            check_cacert(ca_file)
    check_client_cert(args.cert, args.key)
    for flag, value in (("--resolver", args.resolver), ("--authoritative", args.authoritative)):
        if value is not None:
            from promptpath.net.dnsmsg import parse_server

            try:
                parse_server(value)
            except UsageError as exc:
                raise UsageError(f"{flag}: {exc.message}", kind="bad_option") from exc
    idle_max = args.probe_options.get("idle_max")
    if isinstance(idle_max, (int, float)) and idle_max <= 0:
        raise UsageError("--idle-max must be positive")
    via = args.probe_options.get("canary_controls", "both")
    from promptpath.probes.canary import VIA_CHOICES

    if via not in VIA_CHOICES:
        raise UsageError(f"--canary-controls must be one of {', '.join(VIA_CHOICES)}")
    recheck = args.probe_options.get("dns_recheck_s")
    if isinstance(recheck, (int, float)):
        from promptpath.probes.dns_cache import MIN_RECHECK_S

        if recheck < MIN_RECHECK_S:
            raise UsageError(
                f"--dns-recheck must be at least {MIN_RECHECK_S:g} s: two whole-second TTLs"
                " closer together may be equal"
            )
    key_env = args.api_key_env or DEFAULT_KEY_ENV[provider]
    api_key = (env.get(key_env) if key_env else None) or profile_key
    if args.proxy_user is not None and ":" not in args.proxy_user:
        raise UsageError("--proxy-user wants USER:PASS", kind="bad_option")
    proxy, proxy_note = select_proxy(
        target.scheme,
        target.host,
        flag=args.proxy,
        flag_source=args.proxy_source,
        noproxy=args.noproxy,
        user=args.proxy_user,
        environ=env,
    )
    return RunOptions(
        target=target,
        provider=provider,
        model=args.model or DEFAULT_MODEL[provider],
        prompt=args.prompt if args.prompt is not None else DEFAULT_PROMPT,
        max_tokens=max_tokens,
        headers=parse_headers(args.headers),
        api_key=api_key or None,
        api_key_env=key_env,
        client=client,
        http=http,  # type: ignore[arg-type]
        resolve=tuple(parse_resolve(r) for r in args.resolve),
        cacert=args.cacert,
        insecure=bool(args.insecure),
        allow_cleartext=args.allow_cleartext,
        cert=args.cert,
        key=args.key,
        connect_to=tuple(parse_connect_to(c) for c in args.connect_to),
        family=args.family,
        timeout=timeout,
        warm=args.warm,
        resolver=args.resolver,
        authoritative=args.authoritative,
        verbose=args.verbose,
        keylog_file=keylog_file,
        probe_options=dict(args.probe_options),
        proxy=proxy,
        proxy_note=proxy_note,
        proxy_cacert=args.proxy_cacert,
    )


def client_for(name: str | None, provider: Provider) -> ClientName:
    """--as NAME checked, or the provider's own SDK when none was given."""
    if name is None:
        return DEFAULT_CLIENT[provider]
    for known in SHAPES:
        if known == name:
            return known
    raise UsageError(f"--as must be one of {', '.join(SHAPES)}, got {name!r}", kind="bad_option")


def exit_code_for(result: TraceResult, fail_on: str) -> ExitCode:
    """The stage that failed decides; then findings at or above --fail-on give 1."""
    for res in (result, result.warm):
        if res is not None and res.exc is not None:
            return res.exc.exit_code
    threshold = Verdict.WARN.severity if fail_on == "warn" else Verdict.FAIL.severity
    if any(f.verdict.severity >= threshold for f in result.findings):
        return ExitCode.FINDING
    return ExitCode.OK


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
        soft_wrap=not isatty,
        # rich's own hook for its tests: COLUMNS, TERM and COLORTERM come from env.environ.
        _environ=env.environ,
    )


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


def emit(
    result: TraceResult,
    *,
    json_out: bool,
    fail_on: str,
    env: Environment,
    console: Console | None = None,
    slos: Sequence[SLO] = (),
) -> int:
    from promptpath.report import terminal

    code = exit_code_for(result, fail_on)
    console = console or report_console(json_out, env)
    scrub_result(result)
    terminal.render(console, result)
    verdicts = judge_single(result, slos, int(code))
    if any(not v.ok for v in verdicts) and code in (ExitCode.OK, ExitCode.FINDING):
        code = ExitCode.SLO  # a failed run's own code comes first (README, "Exit codes")
    for verdict in verdicts:
        console.print(verdict.describe(), style="green" if verdict.ok else "red", markup=False)
    if json_out:
        from promptpath.report.json import dumps, result_json

        # result_json redacts by structure, inside string values, never in this text.
        body = result_json(result, exit_code=int(code))
        if slos:
            body["slo"] = [v.as_dict() for v in verdicts]
        text = dumps(body)
        env.stdout.write(text + "\n")
        env.stdout.flush()
    return int(code)


def judge_single(result: TraceResult, slos: Sequence[SLO], code: int) -> list[SLOResult]:
    """A single run's SLOs, each judged against the run's own value (its p95 is itself)."""
    from promptpath.core.series import sample_of, single_values
    from promptpath.core.slo import evaluate

    return evaluate(slos, single_values(sample_of(result.timeline, code))) if slos else []


def usage_json(exc: PromptpathError) -> str:
    """The short JSON object for an error found before anything was sent."""
    import json

    return json.dumps(
        {
            "schema": "promptpath.run/1",
            "ok": False,
            "exit_code": int(exc.exit_code),
            "error": {"stage": exc.stage, "kind": exc.kind, "message": exc.message},
        }
    )


def usage_failure(exc: PromptpathError, json_out: bool, env: Environment) -> int:
    """A problem found before any packet was sent: one line, and JSON if asked for."""
    print(f"promptpath: {exc.message}", file=env.stderr)
    if json_out:
        print(usage_json(exc), file=env.stdout)
    return int(exc.exit_code)


@quiet_on_closed_pipe
def execute(args: RunArgs, *, json_out: bool, fail_on: str, env: Environment) -> int:
    if fail_on not in ("warn", "fail"):
        return usage_failure(
            UsageError(f"--fail-on must be warn or fail, got {fail_on!r}"), json_out, env
        )
    try:
        options = build_options(args, env.environ)
        plan, slos = series_inputs(
            args.series,
            options,
            profile=None if "://" in args.target else args.target,
            env=env,
            clash={
                "--probe": bool(args.probes),
                "--warm": args.warm,
                "--compare-http": args.compare_http,
            },
        )
        exports = plan_exports(args, fail_on)
    except PromptpathError as exc:
        return usage_failure(exc, json_out, env)
    if plan.is_series:
        return run_series(
            options,
            plan,
            slos,
            json_out=json_out,
            env=env,
            console=report_console(json_out, env),
            scrub=scrub_result,
            mark_interrupted=_mark_interrupted,
            finish=lambda body, code: exports.finish(body, code, env) if exports.wanted else code,
        )
    for entry in options.unused_resolve():
        where = f"{options.target.host}:{options.target.port}"
        print(f"promptpath: warning: --resolve {entry} matches nothing ({where})", file=env.stderr)
    from promptpath.probes.suite import run_probes, select
    from promptpath.tracer.orchestrator import trace

    console = report_console(json_out, env)
    try:
        probes = select(args.probes) if args.probes else []
    except PromptpathError as exc:
        return usage_failure(exc, json_out, env)

    def progress_line(message: str) -> None:
        console.print(f"[dim]… {message}[/dim]")

    from promptpath.progress import LiveProgress, progress_console

    live = LiveProgress(progress_console(env), fallback=progress_line)

    if args.compare_http:
        clash = [
            flag
            for flag, given in (
                ("--probe", bool(probes)),
                ("--warm", args.warm),
                ("--http", args.http not in (None, "auto")),
                ("--junit/--har/--prom-textfile/--pushgateway", exports.wanted),
            )
            if given
        ]
        if clash:
            return usage_failure(
                UsageError(f"--compare-http chooses the protocols itself; drop {', '.join(clash)}"),
                json_out,
                env,
            )
        if options.target.scheme != "https":
            return usage_failure(
                UsageError("--compare-http needs an https:// target (HTTP/3 is TLS only)"),
                json_out,
                env,
            )
        from promptpath.core.compare import DEFAULT_RUNS

        runs = DEFAULT_RUNS if args.compare_runs is None else args.compare_runs
        if runs < 1:
            return usage_failure(
                UsageError("--compare-runs must be at least 1", kind="bad_option"), json_out, env
            )
        return _compare(options, runs=runs, json_out=json_out, console=console, env=env)
    if args.compare_runs is not None:
        return usage_failure(
            UsageError("--compare-runs goes with --compare-http", kind="bad_option"),
            json_out,
            env,
        )

    started: list[TraceResult] = []

    def on_start(result: TraceResult) -> None:
        started.append(result)
        live.watch(result.timeline)

    async def main() -> TraceResult:
        async with live.running():
            return await traced()

    async def traced() -> TraceResult:
        result = await trace(options, on_start=on_start)
        if options.http != "3" and options.target.scheme == "https" and result.timeline.status:
            from promptpath.tracer.h3discovery import discover_h3

            result.h3 = await discover_h3(result)
        if options.proxy is not None:
            from promptpath.tracer.direct import compare_with_direct

            await compare_with_direct(result)
        if probes:
            # Probes run even when the trace failed: a refused connection to a stale
            # address is exactly when the DNS probe matters.
            result.findings = await run_probes(options, result, probes, live.note)
        return result

    with stop_on_signals() as stopper:
        result = anyio.run(stopper.run, main)
    if result is None:
        signum = stopper.signum
        assert signum is not None  # only a stop signal cancels the run
        print(f"promptpath: interrupted ({signal.Signals(signum).name})", file=env.stderr)
        if not started:
            return int(exit_code_of(signum))
        # Report what was measured up to the signal: a CI job still gets its JSON.
        result = started[0]
        _mark_interrupted(result, signum)
    code = emit(result, json_out=json_out, fail_on=fail_on, env=env, console=console, slos=slos)
    if not exports.wanted:
        return code
    from promptpath.report.json import result_json

    body = result_json(result, exit_code=code)
    if slos:
        run_code = int(exit_code_for(result, fail_on))
        body["slo"] = [v.as_dict() for v in judge_single(result, slos, run_code)]
    return exports.finish(body, code, env)


def plan_exports(args: RunArgs, fail_on: str) -> ExportPlan:
    """--junit, --har, --prom-textfile, --pushgateway and --label, checked before the run."""
    from promptpath.export import plan_exports as plan

    return plan(
        junit=args.junit,
        har=args.har,
        prom_textfile=args.prom_textfile,
        pushgateway=args.pushgateway,
        labels=args.labels,
        fail_on=fail_on,
    )


def _mark_interrupted(result: TraceResult, signum: int, *, before_start: bool = False) -> None:
    from promptpath.core.errors import Interrupted
    from promptpath.tracer.orchestrator import phase_of, record_error

    stage = phase_of(result.timeline, result.options)
    name = signal.Signals(signum).name
    message = (
        f"interrupted by {name} before this run started"
        if before_start
        else f"interrupted by {name} in stage {stage!r}"
    )
    error = Interrupted(message, stage=stage, kind="interrupted")
    error.exit_code = exit_code_of(signum)  # the class's 130 is SIGINT's
    record_error(result.timeline, error)


def _compare(
    options: RunOptions, *, runs: int, json_out: bool, console: Console, env: Environment
) -> int:
    """--compare-http: the same prompt over HTTP/2 and HTTP/3, ``runs`` times each,
    interleaved, fresh connections each."""
    from promptpath.report.compare import compare_json, render_compare
    from promptpath.tracer import trace_pair

    started: list[TraceResult] = []

    async def both() -> list[TraceResult]:
        return await trace_pair(options, runs=runs, on_start=started.append)

    with stop_on_signals() as stopper:
        results = anyio.run(stopper.run, both)
    if results is None:
        signum = stopper.signum
        assert signum is not None  # only a stop signal cancels the run
        print(f"promptpath: interrupted ({signal.Signals(signum).name})", file=env.stderr)
        if not started:
            return int(exit_code_of(signum))
        _mark_interrupted(started[-1], signum)
        if not any(r.options.http == "3" for r in started):
            # Still on the first HTTP/2 run: HTTP/3 never began, but a reader of this
            # schema expects both runs, each with its error.
            from promptpath.tracer.orchestrator import new_timeline, pair_options

            h3 = TraceResult(options=pair_options(options)[1], timeline=new_timeline())
            _mark_interrupted(h3, signum, before_start=True)
            started.append(h3)
        results = started
    codes = [int(exit_code_for(r, "fail")) for r in results]
    render_compare(console, results)
    if json_out:
        from promptpath.report.json import dumps

        env.stdout.write(dumps(compare_json(results, exit_codes=codes)) + "\n")
        env.stdout.flush()
    # HTTP/2's failure first (the path every client has), then HTTP/3's.
    by_protocol = sorted(zip(results, codes, strict=True), key=lambda rc: rc[0].options.http == "3")
    return next((c for _r, c in by_protocol if c != 0), 0)
