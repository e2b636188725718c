"""The command line: parse options → call the library → pick a reporter → exit code.

Nothing here measures or formats by itself.
"""

from __future__ import annotations

import dataclasses
import difflib
import socket
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from promptpath import __version__
from promptpath.core.errors import PromptpathError
from promptpath.core.exitcodes import ExitCode
from promptpath.environment import Environment


def _show_help(ctx: typer.Context, _param: Any, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        Environment.of(ctx.obj).stdout.write(ctx.get_help() + "\n")
        ctx.exit()


class _HelpToEnvironment:
    """click prints --help on sys.stdout itself: send it to the Environment's stdout."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        if option is not None:
            option.callback = _show_help
        return option


class _Group(_HelpToEnvironment, TyperGroup):
    pass


class _Argument(TyperArgument):
    """Typer shows an argument as ``{TARGET}`` and ``TARGET <str>``: the metavar alone reads
    better, and its help line says what it is."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None

    def _usage_display_name(self) -> str:
        # An optional argument spells its brackets in its metavar ("[NAME]...").
        return self.display_name_raw


class _Command(_HelpToEnvironment, TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Typer builds the parameters itself with no hook for their class; _Argument only
        # overrides two display methods, so changing the class of each one is safe.
        for param in self.params:
            if type(param) is TyperArgument:
                param.__class__ = _Argument


app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Network-path diagnostics for streaming AI APIs: one real prompt, every stage timed.",
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(ctx: typer.Context, value: bool) -> None:
    if value:
        print(f"promptpath {__version__}", file=Environment.of(ctx.obj).stdout)
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """promptpath: where did the time go on this prompt?"""


# -- option declarations shared by `run` and `probe` --------------------------------------
# The choices are spelled out here, not imported, so that `--help` stays fast; a unit test
# holds them equal to the Literal types the commands check values against.
_PROVIDER_CHOICES = "openai|responses|anthropic|ollama|gemini|vertex|azure"
_HTTP_CHOICES = "1.1|2|3|auto"
_CLIENT_CHOICES = "openai-python|anthropic-python|ollama-python|google-genai|curl|browser|identity"

Target = Annotated[
    str,
    typer.Argument(
        metavar="TARGET",
        help="Endpoint URL (e.g. https://api.openai.com/v1/chat/completions) or a profile name.",
    ),
]
ProviderOpt = Annotated[
    str | None,
    typer.Option(
        "--provider",
        metavar=_PROVIDER_CHOICES,
        help="The API dialect (default: from the URL path).",
    ),
]
ModelOpt = Annotated[str | None, typer.Option("--model", "-m", metavar="NAME", help="Model name.")]
PromptOpt = Annotated[
    str | None, typer.Option("--prompt", "-p", metavar="PROMPT", help="The prompt to send.")
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-tokens", metavar="N", help="Cap on generated tokens (default 64: probes cost money)."
    ),
]
HeaderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--header",
        "-H",
        metavar="'NAME: VALUE'",
        help="Extra request header 'Name: value' (repeatable).",
    ),
]
KeyEnvOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key-env",
        metavar="NAME",
        help="Env var holding the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY).",
    ),
]
HTTPOpt = Annotated[
    str | None,
    typer.Option(
        "--http",
        metavar=_HTTP_CHOICES,
        help="HTTP version; auto: h2 via ALPN, else 1.1."
        " [default: the --as client's: 1.1 for the Python SDKs, else auto]",
    ),
]
ResolveOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--resolve",
        metavar="HOST:PORT:ADDR",
        help="Connect to ADDR for HOST:PORT instead of resolving (repeatable).",
    ),
]
CACertOpt = Annotated[
    str | None, typer.Option("--cacert", metavar="FILE", help="PEM file of CAs to trust.")
]
InsecureOpt = Annotated[
    bool | None,
    typer.Option(
        "--insecure/--no-insecure", "-k", help="Do not verify the certificate (default: verify)."
    ),
]
AllowCleartextOpt = Annotated[
    bool,
    typer.Option(
        "--allow-cleartext",
        help="Send the API key over plain http:// to a non-loopback address too.",
    ),
]
IPv4Opt = Annotated[bool, typer.Option("-4", help="IPv4 only.")]
IPv6Opt = Annotated[bool, typer.Option("-6", help="IPv6 only.")]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        help="Deadline for the whole request, in seconds. [default: 60]",
    ),
]
JSONOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
FailOnOpt = Annotated[
    str,
    typer.Option(
        "--fail-on", metavar="warn|fail", help="Exit 1 when a finding is at or above this verdict."
    ),
]
ResolverOpt = Annotated[
    str | None,
    typer.Option(
        "--resolver",
        metavar="ADDR[:PORT]",
        help="Use this DNS resolver ADDR[:PORT] instead of the system's.",
    ),
]
AuthoritativeOpt = Annotated[
    str | None,
    typer.Option(
        "--authoritative",
        metavar="ADDR[:PORT]",
        help="Authoritative DNS server for the dns-cache probe.",
    ),
]
CanaryOpt = Annotated[
    bool,
    typer.Option(
        "--canary", help="TARGET is promptpath serve (maybe behind proxies): use its send times."
    ),
]
CanaryAdminOpt = Annotated[
    str | None,
    typer.Option(
        "--canary-admin",
        metavar="URL",
        help="ghost-stream probe: the canary's own address (promptpath serve), when the"
        " path does not pass GET /stats/requests/ID.",
    ),
]
CanaryControlsOpt = Annotated[
    str,
    typer.Option(
        "--canary-controls",
        metavar="both|headers|body",
        help="How --canary probes send their controls: x-promptpath-* headers, the body's"
        " promptpath field, or both.",
    ),
]
IdleMaxOpt = Annotated[
    float,
    typer.Option(
        "--idle-max", metavar="SECONDS", help="idle-timeout probe: longest idle wait, seconds."
    ),
]
WarmOpt = Annotated[
    bool, typer.Option("--warm", help="Then send a second request over the same connection.")
]
DNSRecheckOpt = Annotated[
    float,
    typer.Option(
        "--dns-recheck",
        metavar="SECONDS",
        help="dns-cache probe: seconds between the two TTL queries.",
    ),
]
TLSWarnDaysOpt = Annotated[
    int,
    typer.Option(
        "--tls-warn-days", metavar="DAYS", min=0, help="tls probe: warn this close to expiry."
    ),
]
TLSFailDaysOpt = Annotated[
    int,
    typer.Option(
        "--tls-fail-days", metavar="DAYS", min=0, help="tls probe: fail this close to expiry."
    ),
]
ProxyOpt = Annotated[
    str | None,
    typer.Option(
        "--proxy",
        "-x",
        metavar="URL",
        help="Forward proxy http(s)://[USER:PASS@]HOST:PORT (default: HTTPS_PROXY, HTTP_PROXY,"
        " ALL_PROXY); '' for none.",
    ),
]
NoProxyOpt = Annotated[
    str | None,
    typer.Option(
        "--noproxy",
        metavar="LIST",
        help="Hosts to reach directly: comma list of names, IPs, CIDRs or '*' (default: NO_PROXY).",
    ),
]
ProxyUserOpt = Annotated[
    str | None,
    typer.Option("--proxy-user", metavar="USER:PASS", help="Proxy credentials (Basic)."),
]
ProxyCACertOpt = Annotated[
    str | None,
    typer.Option(
        "--proxy-cacert", metavar="FILE", help="PEM CAs for an https:// proxy's certificate."
    ),
]
VerboseOpt = Annotated[
    bool, typer.Option("--verbose", "-v", help="Show request headers (keys redacted).")
]
ClientOpt = Annotated[
    str | None,
    typer.Option(
        "--as",
        metavar=_CLIENT_CHOICES,
        help="Shape the request like this client (its Accept-Encoding, User-Agent, Accept"
        " and HTTP version). [default: the provider's SDK]",
    ),
]

# -- client certificates (mTLS) and --connect-to ------------------------------------------
CertOpt = Annotated[
    str | None,
    typer.Option(
        "--cert",
        metavar="FILE",
        help="Client certificate (PEM) for servers that ask for one; may hold the key too.",
    ),
]
KeyOpt = Annotated[
    str | None,
    typer.Option("--key", metavar="FILE", help="Private key (PEM, unencrypted) for --cert."),
]
ConnectToOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--connect-to",
        metavar="HOST1:PORT1:HOST2:PORT2",
        help="Connect to HOST2:PORT2 for requests to HOST1:PORT1 (SNI and Host stay HOST1).",
    ),
]

# -- series (--count, --concurrency) and SLO thresholds -----------------------------------
CountOpt = Annotated[
    int,
    typer.Option(
        "--count",
        metavar="N",
        help="Trace N prompts in a row and aggregate them.",
    ),
]
IntervalOpt = Annotated[
    float,
    typer.Option(
        "--interval", metavar="SECONDS", help="Pause between the runs of a series, in seconds."
    ),
]
ReuseOpt = Annotated[
    bool,
    typer.Option("--reuse", help="A series keeps one connection (warm figures), not fresh ones."),
]
ConcurrencyOpt = Annotated[
    str | None,
    typer.Option(
        "--concurrency",
        metavar="C|C1,C2,..",
        help="Streams in flight at once (load mode); a list sweeps and prints the curve.",
    ),
]
ConnectionsOpt = Annotated[
    int | None,
    typer.Option(
        "--connections",
        metavar="K",
        help="Load mode: spread the streams over K connections [default: 1 for HTTP/2 and"
        " HTTP/3, one per stream for HTTP/1.1].",
    ),
]
SLOOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--slo",
        metavar="EXPR",
        help="Exit 9 unless METRIC OP VALUE holds, e.g. 'ttft_p95<800ms', 'error_rate<=5%'"
        " (repeatable).",
    ),
]
YesOpt = Annotated[
    bool,
    typer.Option("--yes", help="Go ahead with a series above the spend threshold."),
]
# -- exports for CI and monitoring (promptpath/export.py) -----------------------------------
JUnitOpt = Annotated[
    str | None,
    typer.Option("--junit", metavar="FILE", help="Also write the run as JUnit XML to FILE."),
]
HAROpt = Annotated[
    str | None,
    typer.Option("--har", metavar="FILE", help="Also write the run as a HAR 1.2 log to FILE."),
]
PromTextfileOpt = Annotated[
    str | None,
    typer.Option(
        "--prom-textfile",
        metavar="FILE",
        help="Also write Prometheus metrics to FILE (node_exporter textfile collector; atomic).",
    ),
]
PushgatewayOpt = Annotated[
    str | None,
    typer.Option(
        "--pushgateway",
        metavar="URL",
        help="Also push Prometheus metrics to this Pushgateway (job promptpath).",
    ),
]
LabelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--label",
        metavar="NAME=VALUE",
        help="Label on every exported metric, e.g. region=eu-west (repeatable).",
    ),
]


def _no_trio() -> None:
    """httpcore imports trio when it is installed (~90 ms measured) only to support it; the
    CLI runs on asyncio, so it tells Python there is no trio before httpcore loads. Library
    users who import promptpath.tracer.orchestrator directly are untouched."""
    if "trio" not in sys.modules and "httpcore" not in sys.modules:
        sys.modules["trio"] = None  # type: ignore[assignment]


def _family(ipv4: bool, ipv6: bool) -> int:
    return socket.AF_INET if ipv4 and not ipv6 else socket.AF_INET6 if ipv6 and not ipv4 else 0


@app.command(cls=_Command)
def run(
    ctx: typer.Context,
    target: Target,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    prompt: PromptOpt = None,
    max_tokens: MaxTokensOpt = None,
    header: HeaderOpt = None,
    client: ClientOpt = None,
    api_key_env: KeyEnvOpt = None,
    http: HTTPOpt = None,
    resolve: ResolveOpt = None,
    cacert: CACertOpt = None,
    insecure: InsecureOpt = None,
    allow_cleartext: AllowCleartextOpt = False,
    ipv4: IPv4Opt = False,
    ipv6: IPv6Opt = False,
    timeout: TimeoutOpt = None,
    warm: WarmOpt = False,
    json_out: JSONOpt = False,
    fail_on: FailOnOpt = "fail",
    resolver: ResolverOpt = None,
    authoritative: AuthoritativeOpt = None,
    probe: Annotated[
        list[str] | None,
        typer.Option(
            "--probe",
            metavar="NAME",
            help="Run a probe after the trace: buffering, idle-timeout, dns-cache,"
            " ghost-stream, ratelimit, tls, cors or all (repeatable).",
        ),
    ] = None,
    canary: CanaryOpt = False,
    canary_admin: CanaryAdminOpt = None,
    canary_controls: CanaryControlsOpt = "both",
    idle_max: IdleMaxOpt = 120.0,
    dns_recheck: DNSRecheckOpt = 3.0,
    tls_warn_days: TLSWarnDaysOpt = 30,
    tls_fail_days: TLSFailDaysOpt = 7,
    compare_http: Annotated[
        bool,
        typer.Option("--compare-http", help="Trace over HTTP/2 and HTTP/3 and compare them."),
    ] = False,
    compare_runs: Annotated[
        int | None,
        typer.Option(
            "--compare-runs",
            metavar="N",
            help="Runs per protocol for --compare-http, interleaved (default 5): each"
            " metric's noise floor comes from its own spread.",
        ),
    ] = None,
    proxy: ProxyOpt = None,
    noproxy: NoProxyOpt = None,
    proxy_user: ProxyUserOpt = None,
    proxy_cacert: ProxyCACertOpt = None,
    verbose: VerboseOpt = False,
    cert: CertOpt = None,
    key: KeyOpt = None,
    connect_to: ConnectToOpt = None,
    count: CountOpt = 1,
    interval: IntervalOpt = 0.0,
    reuse: ReuseOpt = False,
    concurrency: ConcurrencyOpt = None,
    connections: ConnectionsOpt = None,
    slo: SLOOpt = None,
    yes: YesOpt = False,
    junit: JUnitOpt = None,
    har: HAROpt = None,
    prom_textfile: PromTextfileOpt = None,
    pushgateway: PushgatewayOpt = None,
    label: LabelOpt = None,
) -> None:
    """Trace one streamed prompt to TARGET, stage by stage."""
    _no_trio()
    from promptpath.commands import RunArgs, execute
    from promptpath.series_command import SeriesArgs

    args = RunArgs(
        target=target,
        provider=provider,
        model=model,
        prompt=prompt,
        max_tokens=max_tokens,
        headers=header or [],
        client=client,
        api_key_env=api_key_env,
        http=http,
        resolve=resolve or [],
        cacert=cacert,
        insecure=insecure,
        allow_cleartext=allow_cleartext,
        family=_family(ipv4, ipv6),
        timeout=timeout,
        warm=warm,
        resolver=resolver,
        authoritative=authoritative,
        probes=probe or [],
        compare_http=compare_http,
        compare_runs=compare_runs,
        verbose=verbose,
        proxy=proxy,
        noproxy=noproxy,
        proxy_user=proxy_user,
        proxy_cacert=proxy_cacert,
        both_families=ipv4 and ipv6,
        probe_options={
            "canary": canary,
            "canary_admin": canary_admin,
            "canary_controls": canary_controls,
            "idle_max": idle_max,
            "dns_recheck_s": dns_recheck,
            "tls_warn_days": tls_warn_days,
            "tls_fail_days": tls_fail_days,
        },
        cert=cert,
        key=key,
        connect_to=connect_to or [],
        series=SeriesArgs(
            count=count,
            interval=interval,
            reuse=reuse,
            concurrency=concurrency,
            connections=connections,
            slo=slo or [],
            yes=yes,
        ),
        junit=junit,
        har=har,
        prom_textfile=prom_textfile,
        pushgateway=pushgateway,
        labels=label or [],
    )
    env = Environment.of(ctx.obj)
    raise typer.Exit(execute(args, json_out=json_out, fail_on=fail_on, env=env))


@app.command(cls=_Command)
def probe(
    ctx: typer.Context,
    target: Target,
    names: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[NAME]...",
            help="Probes to run: buffering, idle-timeout, dns-cache, ghost-stream, ratelimit,"
            " tls, cors (default: all).",
        ),
    ] = None,
    provider: ProviderOpt = None,
    model: ModelOpt = None,
    prompt: PromptOpt = None,
    max_tokens: MaxTokensOpt = None,
    header: HeaderOpt = None,
    client: ClientOpt = None,
    api_key_env: KeyEnvOpt = None,
    http: HTTPOpt = None,
    resolve: ResolveOpt = None,
    cacert: CACertOpt = None,
    insecure: InsecureOpt = None,
    allow_cleartext: AllowCleartextOpt = False,
    ipv4: IPv4Opt = False,
    ipv6: IPv6Opt = False,
    timeout: TimeoutOpt = None,
    warm: WarmOpt = False,
    json_out: JSONOpt = False,
    fail_on: FailOnOpt = "fail",
    resolver: ResolverOpt = None,
    authoritative: AuthoritativeOpt = None,
    canary: CanaryOpt = False,
    canary_admin: CanaryAdminOpt = None,
    canary_controls: CanaryControlsOpt = "both",
    idle_max: IdleMaxOpt = 120.0,
    dns_recheck: DNSRecheckOpt = 3.0,
    tls_warn_days: TLSWarnDaysOpt = 30,
    tls_fail_days: TLSFailDaysOpt = 7,
    proxy: ProxyOpt = None,
    noproxy: NoProxyOpt = None,
    proxy_user: ProxyUserOpt = None,
    proxy_cacert: ProxyCACertOpt = None,
    verbose: VerboseOpt = False,
    cert: CertOpt = None,
    key: KeyOpt = None,
    connect_to: ConnectToOpt = None,
) -> None:
    """Trace one prompt to TARGET, then run probes (all of them unless named)."""
    # The same trace as `run`, with the probe names as positional arguments.
    options = dict(locals())
    names = options.pop("names")
    run(**options, probe=names or ["all"])


@app.command(cls=_Command)
def demo(
    ctx: typer.Context,
    http: Annotated[str, typer.Option("--http", metavar="1.1|2|3", help="HTTP version.")] = "2",
    provider: Annotated[
        str,
        typer.Option("--provider", metavar=_PROVIDER_CHOICES, help="The API dialect."),
    ] = "openai",
    json_out: JSONOpt = False,
    warm: Annotated[bool, typer.Option("--warm", help="Also show a warm request.")] = False,
) -> None:
    """Trace a prompt against a built-in reference endpoint on loopback (no network, no key)."""
    _no_trio()
    from promptpath.demo import run_demo

    env = Environment.of(ctx.obj)
    raise typer.Exit(run_demo(http=http, provider=provider, json_out=json_out, warm=warm, env=env))


_SERVE_HELP = """Run the reference endpoint (a streaming API you control).

Every behaviour option below (--ttft-ms to --accel-buffering) is also a request header,
x-promptpath-<option>, that overrides it for that request alone, e.g.
'x-promptpath-pause-after: 3' and 'x-promptpath-pause-s: 30'; an unknown x-promptpath-*
header is refused rather than ignored. The same controls may ride in the request body's
"promptpath" object ({"promptpath": {"pause-after": 3, "pause-s": "30"}}) for gateways that
strip x- headers; a header wins over the body. The first event of each stream reports the
controls applied and where each came from.

GET /stats answers JSON counters (requests, completions, tokens_sent, tokens_generated,
client_disconnects and the recent requests); GET /metrics the same in Prometheus text with
TTFT and stream-duration histograms; GET /stats/requests/ID the request a probe tagged with
'x-promptpath-probe-id: ID'; GET /healthz answers 200. None of them counts as a request.
"""


def _register_serve() -> None:
    from promptpath.server.command import serve

    app.command("serve", cls=_Command, help=_SERVE_HELP)(serve)


_register_serve()


def main(argv: Sequence[str] | None = None, env: Environment | None = None) -> int:
    """The command line, as an exit code: the contract; tracebacks never reach users.

    The console script passes nothing (the real process); tests pass an Environment of
    StringIO streams and a dict, and ``argv`` without the program name."""
    if env is None:
        env = Environment.from_process()
    if argv is not None:
        env = dataclasses.replace(env, argv=tuple(argv))
    from promptpath.core.errors import UsageError
    from promptpath.options import check_argv_utf8

    try:
        # Before click sees them: an argument from bytes that are not UTF-8 carries lone
        # surrogates (surrogateescape) that would otherwise reach the server.
        check_argv_utf8(env.argv)
    except UsageError as exc:
        print(f"promptpath: {exc.message}", file=env.stderr)
        if "--json" in env.argv:
            from promptpath.commands import usage_json

            print(usage_json(exc), file=env.stdout)
        return int(exc.exit_code)
    try:
        # Not standalone: click would print usage errors without JSON and turn Ctrl-C into
        # "Aborted!" with exit 1. The Environment rides on the click context (ctx.obj).
        code = app(args=list(env.argv), prog_name="promptpath", standalone_mode=False, obj=env)
    except KeyboardInterrupt:
        print("promptpath: interrupted", file=env.stderr)
        return int(ExitCode.INTERRUPTED)
    except PromptpathError as exc:  # errors raised before a reporter took over
        print(f"promptpath: {exc.message}", file=env.stderr)
        return int(exc.exit_code)
    except Exception as exc:
        return _click_or_bug(exc, env)
    return code if isinstance(code, int) else 0


def _click_or_bug(exc: Exception, env: Environment) -> int:
    # Typer ships its own copy of click, so its exceptions are recognised by shape.
    if type(exc).__name__ == "Abort":
        print("promptpath: interrupted", file=env.stderr)
        return int(ExitCode.INTERRUPTED)
    show = getattr(exc, "show", None)
    exit_code = getattr(exc, "exit_code", None)
    if callable(show) and isinstance(exit_code, int):
        message = getattr(exc, "format_message", lambda: str(exc))()
        unknown = _unknown_option(exc)
        if unknown is not None:
            message = unknown
            print(f"promptpath: {unknown}", file=env.stderr)
        else:
            show(file=env.stderr)
        if "--json" in env.argv and exit_code == ExitCode.USAGE:
            from promptpath.commands import usage_json
            from promptpath.core.errors import UsageError

            print(usage_json(UsageError(str(message))), file=env.stdout)
        return exit_code
    if env.debug:
        raise exc
    # A bug of ours: one line, a distinct code, no traceback.
    print(f"promptpath: internal error: {type(exc).__name__}: {exc}", file=env.stderr)
    print("promptpath: set PROMPTPATH_DEBUG=1 for the traceback", file=env.stderr)
    return int(ExitCode.INTERNAL)


def _unknown_option(exc: Exception) -> str | None:
    """click's NoSuchOption as one line naming the nearest real option, if one is near."""
    name = getattr(exc, "option_name", None)
    command = getattr(getattr(exc, "ctx", None), "command", None)
    if not isinstance(name, str) or command is None:
        return None
    known = [o for p in command.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if near:
        return f"no such option {name}: did you mean {near[0]}?"
    return f"no such option {name} (promptpath {command.name} --help lists them)"


__all__ = ["app", "main"]
