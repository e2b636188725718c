"""Every option of `run`, `probe` and `demo`, declared once, in the groups `--help` shows.

A ``Flag`` is one row: the parameter name the command receives (``dest``), its spellings,
type, default, help line and help panel. ``cli/faces.py`` builds each command's signature
from this table (``signature``), so `run`, `probe` and `demo` share one declaration of every
option they take; ``resolve.py`` turns the parsed values into a Plan. Adding an option is
one row here plus the code that reads it in the Plan. The output formats' rows (--json,
--junit, ..., --svg) come from their own table, outputs/formats.py.

This module must stay cheap to import (`--help` and `--version` load it): typer, the
standard library, the formats table (itself the standard library only), the probes' names
and the dialects' names. The choices of --provider and --as are the names of the dialects'
registry (``dialects/registry.py``, names only: no plug-in is loaded for them); --http's
are spelled out, and tests/unit/test_cli_help.py holds them equal to the Literal type the
values are checked against. Defaults a probe owns come from ``probes/settings.py``, a
module of plain dataclasses kept cheap for this reason, and the probes' names from
``probes/catalog.py``, which imports nothing.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, TypeVar

import typer

from promptpath.dialects.registry import CLIENTS, DEMO, NAMES
from promptpath.outputs.formats import Format, going
from promptpath.probes.catalog import listed_names
from promptpath.probes.settings import (
    CanarySettings,
    DNSCacheSettings,
    IdleTimeoutSettings,
    PathSettings,
    TLSSettings,
)

# -- help panels (curl's --help categories) -------------------------------------------------
TARGET: Final = "Target and request"
PATH: Final = "Path, TLS and proxy"
PROBES: Final = "Probes"
SERIES: Final = "Series and load"
OUTPUT: Final = "Output and exports"
PANELS: Final = (TARGET, PATH, PROBES, SERIES, OUTPUT)

PROVIDER_CHOICES: Final = "|".join(NAMES)
HTTP_CHOICES: Final = "1.1|2|3|auto"
CLIENT_CHOICES: Final = "|".join(CLIENTS)

F = TypeVar("F", bound=Callable[..., None])

RUN: Final = frozenset({"run"})
BOTH: Final = frozenset({"run", "probe"})
#: The options `demo` shares with `run` (the rest of its run is fixed by the demo itself).
WITH_DEMO: Final = frozenset({"run", "probe", "demo"})
DEMO_ONLY: Final = frozenset({"demo"})
EXPORTER_ONLY: Final = frozenset({"exporter"})
#: The exporter's panel (its own command; not one of run's PANELS).
EXPORTER: Final = "Exporter"
DIFF_ONLY: Final = frozenset({"diff"})
#: diff's own panel.
DIFF: Final = "Diff"
#: Loopback by default: exposing the exporter is a choice (--listen).
DEFAULT_LISTEN: Final = "127.0.0.1:9479"


@dataclass(frozen=True, slots=True, kw_only=True)
class Flag:
    """One option: how it is spelt, typed and shown, and which commands take it."""

    dest: str  # the parameter name, and the key of the parsed value (resolve.Values)
    decls: tuple[str, ...]
    type: Any  # the annotation typer parses the value into
    default: object
    help: str
    panel: str
    metavar: str | None = None
    commands: frozenset[str] = BOTH
    extra: Mapping[str, Any] = field(default_factory=dict)  # more typer.Option arguments
    #: The probe setting this option fills, as "<probe field>.<setting>" of
    #: probes.settings.ProbeSettings (resolve.probe_settings fills them from the table).
    setting: str | None = None
    #: command -> what differs there ("default", "metavar", "help"): `demo` fixes --http
    #: and --provider to what its endpoint serves, with defaults of its own.
    per_command: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def parameter(self, command: str | None = None) -> inspect.Parameter:
        there = self.per_command.get(command or "", {})
        option = typer.Option(
            *self.decls,
            help=str(there.get("help", self.help)),
            metavar=there.get("metavar", self.metavar),
            rich_help_panel=self.panel,
            **self.extra,
        )
        return inspect.Parameter(
            self.dest,
            inspect.Parameter.KEYWORD_ONLY,
            default=there.get("default", self.default),
            annotation=Annotated[self.type, option],
        )


def output_flag(fmt: Format) -> Flag:
    """The option row of an output format (outputs/formats.py): a switch, or a value."""
    return Flag(
        dest=fmt.dest,
        decls=(fmt.flag,),
        type=bool if fmt.metavar is None else str | None,
        default=False if fmt.metavar is None else None,
        metavar=fmt.metavar,
        help=fmt.help,
        panel=OUTPUT,
        commands=fmt.commands,
    )


_canary = CanarySettings()
_dns = DNSCacheSettings()
_idle = IdleTimeoutSettings()
_tls = TLSSettings()
_path = PathSettings()

FLAGS: tuple[Flag, ...] = (
    # -- target and request ------------------------------------------------------------
    Flag(
        dest="provider",
        decls=("--provider",),
        type=str | None,
        default=None,
        metavar=PROVIDER_CHOICES,
        help="The API dialect (default: from the URL path).",
        panel=TARGET,
        commands=WITH_DEMO,
        per_command={"demo": {"default": DEMO, "help": "The API dialect."}},
    ),
    Flag(
        dest="model",
        decls=("--model", "-m"),
        type=str | None,
        default=None,
        metavar="NAME",
        help="Model name.",
        panel=TARGET,
    ),
    Flag(
        dest="prompt",
        decls=("--prompt", "-p"),
        type=str | None,
        default=None,
        metavar="PROMPT",
        help="The prompt to send.",
        panel=TARGET,
    ),
    Flag(
        dest="max_tokens",
        decls=("--max-tokens",),
        type=int | None,
        default=None,
        metavar="N",
        help="Cap on generated tokens (default 64: probes cost money).",
        panel=TARGET,
    ),
    Flag(
        dest="header",
        decls=("--header", "-H"),
        type=list[str] | None,
        default=None,
        metavar="'NAME: VALUE'",
        help="Extra request header 'Name: value' (repeatable).",
        panel=TARGET,
    ),
    Flag(
        dest="client",
        decls=("--as",),
        type=str | None,
        default=None,
        metavar=CLIENT_CHOICES,
        help="Shape the request like this client (its Accept-Encoding, User-Agent, Accept"
        " and HTTP version). [default: the provider's SDK]",
        panel=TARGET,
    ),
    Flag(
        dest="guardrail",
        decls=("--guardrail",),
        type=str | None,
        default=None,
        metavar="ID:VERSION[:async]",
        help="Bedrock: apply this guardrail (synchronous streaming mode unless ':async').",
        panel=TARGET,
    ),
    Flag(
        dest="api_key_env",
        decls=("--api-key-env",),
        type=str | None,
        default=None,
        metavar="NAME",
        help="Env var holding the API key (default OPENAI_API_KEY / ANTHROPIC_API_KEY).",
        panel=TARGET,
    ),
    Flag(
        dest="timeout",
        decls=("--timeout",),
        type=float | None,
        default=None,
        metavar="SECONDS",
        help="Deadline for the whole request, in seconds. [default: 60]",
        panel=TARGET,
    ),
    Flag(
        dest="ws_ping_ms",
        decls=("--ws-ping-ms",),
        type=float | None,
        default=None,
        metavar="MS",
        help="WebSocket only: send an in-band ping every MS ms while the stream runs; the"
        " pong round trips are reported beside the TCP handshake's.",
        panel=PATH,
    ),
    Flag(
        dest="ws_ping_count",
        decls=("--ws-ping-count",),
        type=int | None,
        default=None,
        metavar="N",
        help="WebSocket only: at most N pings (default 10 with --ws-ping-ms).",
        panel=PATH,
    ),
    Flag(
        dest="warm",
        decls=("--warm",),
        type=bool,
        default=False,
        help="Then send a second request over the same connection.",
        panel=SERIES,
        commands=WITH_DEMO,
    ),
    Flag(
        dest="compare_http",
        decls=("--compare-http",),
        type=bool,
        default=False,
        help="Trace over HTTP/2 and HTTP/3 and compare them.",
        panel=SERIES,
        commands=RUN,
    ),
    Flag(
        dest="compare_runs",
        decls=("--compare-runs",),
        type=int | None,
        default=None,
        metavar="N",
        help="Runs per protocol for --compare-http, interleaved (default 5): each"
        " metric's noise floor comes from its own spread.",
        panel=SERIES,
        commands=RUN,
    ),
    # -- path, TLS and proxy -----------------------------------------------------------
    Flag(
        dest="http",
        decls=("--http",),
        type=str | None,
        default=None,
        metavar=HTTP_CHOICES,
        help="HTTP version; auto: h2 via ALPN, else 1.1."
        " [default: the --as client's: 1.1 for the Python SDKs, else auto]",
        panel=PATH,
        commands=WITH_DEMO,
        per_command={"demo": {"default": "2", "metavar": "1.1|2|3", "help": "HTTP version."}},
    ),
    Flag(
        dest="hop",
        decls=("--hop",),
        type=str | None,
        default=None,
        metavar="buffering|idle-timeout|compression|ghost-stream|clean",
        help="Put a misbehaving hop of this kind between the client and the endpoint,"
        " and run the probe that finds it.",
        panel=PATH,
        commands=DEMO_ONLY,
    ),
    Flag(
        dest="resolve",
        decls=("--resolve",),
        type=list[str] | None,
        default=None,
        metavar="HOST:PORT:ADDR",
        help="Connect to ADDR for HOST:PORT instead of resolving (repeatable).",
        panel=PATH,
    ),
    Flag(
        dest="connect_to",
        decls=("--connect-to",),
        type=list[str] | None,
        default=None,
        metavar="HOST1:PORT1:HOST2:PORT2",
        help="Connect to HOST2:PORT2 for requests to HOST1:PORT1 (SNI and Host stay HOST1).",
        panel=PATH,
    ),
    Flag(
        dest="ipv4",
        decls=("-4",),
        type=bool,
        default=False,
        help="IPv4 only.",
        panel=PATH,
    ),
    Flag(
        dest="ipv6",
        decls=("-6",),
        type=bool,
        default=False,
        help="IPv6 only.",
        panel=PATH,
    ),
    Flag(
        dest="resolver",
        decls=("--resolver",),
        type=str | None,
        default=None,
        metavar="ADDR[:PORT]",
        help="Use this DNS resolver ADDR[:PORT] instead of the system's.",
        panel=PATH,
    ),
    Flag(
        dest="cacert",
        decls=("--cacert",),
        type=str | None,
        default=None,
        metavar="FILE",
        help="PEM file of CAs to trust.",
        panel=PATH,
    ),
    Flag(
        dest="insecure",
        decls=("--insecure/--no-insecure", "-k"),
        type=bool | None,
        default=None,
        help="Do not verify the certificate (default: verify).",
        panel=PATH,
    ),
    Flag(
        dest="cert",
        decls=("--cert",),
        type=str | None,
        default=None,
        metavar="FILE",
        help="Client certificate (PEM) for servers that ask for one; may hold the key too.",
        panel=PATH,
    ),
    Flag(
        dest="key",
        decls=("--key",),
        type=str | None,
        default=None,
        metavar="FILE",
        help="Private key (PEM, unencrypted) for --cert.",
        panel=PATH,
    ),
    Flag(
        dest="allow_cleartext",
        decls=("--allow-cleartext",),
        type=bool,
        default=False,
        help="Send the API key over plain http:// to a non-loopback address too.",
        panel=PATH,
    ),
    Flag(
        dest="proxy",
        decls=("--proxy", "-x"),
        type=str | None,
        default=None,
        metavar="URL",
        help="Forward proxy http(s)://[USER:PASS@]HOST:PORT (default: HTTPS_PROXY, HTTP_PROXY,"
        " ALL_PROXY); '' for none.",
        panel=PATH,
    ),
    Flag(
        dest="noproxy",
        decls=("--noproxy",),
        type=str | None,
        default=None,
        metavar="LIST",
        help="Hosts to reach directly: comma list of names, IPs, CIDRs or '*' (default: NO_PROXY).",
        panel=PATH,
    ),
    Flag(
        dest="proxy_user",
        decls=("--proxy-user",),
        type=str | None,
        default=None,
        metavar="USER:PASS",
        help="Proxy credentials (Basic).",
        panel=PATH,
    ),
    Flag(
        dest="proxy_cacert",
        decls=("--proxy-cacert",),
        type=str | None,
        default=None,
        metavar="FILE",
        help="PEM CAs for an https:// proxy's certificate.",
        panel=PATH,
    ),
    # -- probes ------------------------------------------------------------------------
    Flag(
        dest="probe",
        decls=("--probe",),
        type=list[str] | None,
        default=None,
        metavar="NAME",
        help=f"Run a probe after the trace: {listed_names()} or all (repeatable).",
        panel=PROBES,
        commands=RUN,
    ),
    Flag(
        dest="authoritative",
        decls=("--authoritative",),
        type=str | None,
        default=_dns.authoritative,
        metavar="ADDR[:PORT]",
        help="Authoritative DNS server for the dns-cache probe.",
        panel=PROBES,
        setting="dns_cache.authoritative",
    ),
    Flag(
        dest="dns_recheck",
        decls=("--dns-recheck",),
        type=float,
        default=_dns.recheck_s,
        metavar="SECONDS",
        help="dns-cache probe: seconds between the two TTL queries.",
        panel=PROBES,
        setting="dns_cache.recheck_s",
    ),
    Flag(
        dest="idle_max",
        decls=("--idle-max",),
        type=float,
        default=_idle.max_s,
        metavar="SECONDS",
        help="idle-timeout probe: longest idle wait, seconds.",
        panel=PROBES,
        setting="idle_timeout.max_s",
    ),
    Flag(
        dest="tls_warn_days",
        decls=("--tls-warn-days",),
        type=int,
        default=_tls.warn_days,
        metavar="DAYS",
        help="tls probe: warn this close to expiry.",
        panel=PROBES,
        setting="tls.warn_days",
        extra={"min": 0},
    ),
    Flag(
        dest="tls_fail_days",
        decls=("--tls-fail-days",),
        type=int,
        default=_tls.fail_days,
        metavar="DAYS",
        help="tls probe: fail this close to expiry.",
        panel=PROBES,
        setting="tls.fail_days",
        extra={"min": 0},
    ),
    Flag(
        dest="path_names",
        decls=("--path-names",),
        type=bool,
        default=_path.names,
        help="path probe: look up each hop's reverse name (PTR) with the trace's resolver"
        " (--resolve pins, --resolver, or the system's); no PTR query is sent without it.",
        panel=PROBES,
        setting="path.names",
    ),
    Flag(
        dest="canary",
        decls=("--canary",),
        type=bool,
        default=_canary.on,
        help="TARGET is promptpath serve (maybe behind proxies): use its send times.",
        panel=PROBES,
        setting="canary.on",
    ),
    Flag(
        dest="canary_admin",
        decls=("--canary-admin",),
        type=str | None,
        default=None,
        metavar="URL",
        help="ghost-stream probe: the canary's own address (promptpath serve), when the"
        " path does not pass GET /stats/requests/ID.",
        panel=PROBES,
        setting="ghost_stream.admin",
    ),
    Flag(
        dest="canary_controls",
        decls=("--canary-controls",),
        type=str,
        default=_canary.controls,
        metavar="both|headers|body",
        help="How --canary probes send their controls: x-promptpath-* headers, the body's"
        " promptpath field, or both.",
        panel=PROBES,
        setting="canary.controls",
    ),
    # -- series and load ---------------------------------------------------------------
    Flag(
        dest="count",
        decls=("--count",),
        type=int,
        default=1,
        metavar="N",
        help="Trace N prompts in a row and aggregate them.",
        panel=SERIES,
        commands=RUN,
    ),
    Flag(
        dest="interval",
        decls=("--interval",),
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="Pause between the runs of a series, in seconds.",
        panel=SERIES,
        commands=RUN,
    ),
    Flag(
        dest="reuse",
        decls=("--reuse",),
        type=bool,
        default=False,
        help="A series keeps one connection (warm figures), not fresh ones.",
        panel=SERIES,
        commands=RUN,
    ),
    Flag(
        dest="concurrency",
        decls=("--concurrency",),
        type=str | None,
        default=None,
        metavar="C|C1,C2,..",
        help="Streams in flight at once (load mode); a list sweeps and prints the curve.",
        panel=SERIES,
        commands=RUN,
    ),
    Flag(
        dest="connections",
        decls=("--connections",),
        type=int | None,
        default=None,
        metavar="K",
        help="Load mode: spread the streams over K connections [default: 1 for HTTP/2 and"
        " HTTP/3, one per stream for HTTP/1.1].",
        panel=SERIES,
        commands=RUN,
    ),
    Flag(
        dest="slo",
        decls=("--slo",),
        type=list[str] | None,
        default=None,
        metavar="EXPR",
        help="Exit 9 unless METRIC OP VALUE holds, e.g. 'ttft_p95<800ms', 'error_rate<=5%'"
        " (repeatable).",
        panel=SERIES,
        commands=RUN,
    ),
    Flag(
        dest="baseline",
        decls=("--baseline",),
        type=str | None,
        default=None,
        metavar="FILE",
        help="A saved series or run (--json) to hold this series to: the report shows what"
        " changed against it, and --slo takes 'ttft_p95<1.5x baseline',"
        " 'connect_p50<baseline+10ms'.",
        panel=SERIES,
        commands=RUN,
    ),
    Flag(
        dest="yes",
        decls=("--yes",),
        type=bool,
        default=False,
        help="Go ahead with a series above the spend threshold.",
        panel=SERIES,
        commands=RUN,
    ),
    # -- output and exports: the formats' rows come from outputs/formats.py ----------------
    *(output_flag(fmt) for fmt in going("stdout")),
    Flag(
        dest="fail_on",
        decls=("--fail-on",),
        type=str,
        default="fail",
        metavar="warn|fail",
        help="Exit 1 when a finding is at or above this verdict.",
        panel=OUTPUT,
    ),
    Flag(
        dest="verbose",
        decls=("--verbose", "-v"),
        type=bool,
        default=False,
        help="Show request headers (keys redacted).",
        panel=OUTPUT,
    ),
    *(output_flag(fmt) for fmt in going("file", "push", "collector")),
    Flag(
        dest="label",
        decls=("--label",),
        type=list[str] | None,
        default=None,
        metavar="NAME=VALUE",
        help="Label on every exported metric, e.g. region=eu-west (repeatable).",
        panel=OUTPUT,
        commands=RUN,
    ),
    # -- diff (promptpath diff) ----------------------------------------------------------
    Flag(
        dest="before_range",
        decls=("--before",),
        type=str | None,
        default=None,
        metavar="HH:MM-HH:MM",
        help="With one watch history: the traces of this time range (UTC) are the before side.",
        panel=DIFF,
        commands=DIFF_ONLY,
    ),
    Flag(
        dest="after_range",
        decls=("--after",),
        type=str | None,
        default=None,
        metavar="HH:MM-HH:MM",
        help="With one watch history: the traces of this time range (UTC) are the after side.",
        panel=DIFF,
        commands=DIFF_ONLY,
    ),
    Flag(
        dest="protocol",
        decls=("--protocol",),
        type=str,
        default="2",
        metavar="2|3",
        help="Which run of a --compare-http document to compare: HTTP/2's or HTTP/3's.",
        panel=DIFF,
        commands=DIFF_ONLY,
    ),
    # -- the exporter (promptpath exporter) ----------------------------------------------
    Flag(
        dest="config",
        decls=("--config", "-c"),
        type=str | None,
        default=None,
        metavar="FILE",
        help="The exporter's TOML config: modules and the targets it may probe"
        " (default: $PROMPTPATH_EXPORTER_CONFIG).",
        panel=EXPORTER,
        commands=EXPORTER_ONLY,
    ),
    Flag(
        dest="listen",
        decls=("--listen",),
        type=str,
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help="Address to serve /probe and /metrics on (loopback unless you say otherwise;"
        " ':9479' is every interface).",
        panel=EXPORTER,
        commands=EXPORTER_ONLY,
    ),
    Flag(
        dest="drain_timeout",
        decls=("--drain-timeout",),
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="On SIGTERM, how long probes in flight may finish before they are cut.",
        panel=EXPORTER,
        commands=EXPORTER_ONLY,
    ),
    Flag(
        dest="enable_lifecycle",
        decls=("--web.enable-lifecycle",),
        type=bool,
        default=False,
        help="Answer POST /-/reload (off by default, as in Prometheus: a web page must not"
        " reload the config; SIGHUP reloads either way).",
        panel=EXPORTER,
        commands=EXPORTER_ONLY,
    ),
    Flag(
        dest="check_config",
        decls=("--check-config",),
        type=bool,
        default=False,
        help="Load the config, resolve every target and module, print a summary, exit"
        " (0, or 2 naming what is wrong).",
        panel=EXPORTER,
        commands=EXPORTER_ONLY,
    ),
)

BY_DEST: Final[Mapping[str, Flag]] = {flag.dest: flag for flag in FLAGS}


def flags_of(command: str, table: Iterable[Flag] = FLAGS) -> tuple[Flag, ...]:
    """The options ``command`` takes, in declaration (and --help) order (``table``: serve's
    own, server/command.py, which only `serve` imports)."""
    return tuple(flag for flag in table if command in flag.commands)


def defaults() -> dict[str, object]:
    """Every option's value when none is given (what `probe` passes for `run`-only ones)."""
    return {flag.dest: flag.default for flag in FLAGS}


def signature(
    leading: Iterable[inspect.Parameter], command: str, table: Iterable[Flag] = FLAGS
) -> inspect.Signature:
    """The signature typer reads for ``command``: ``leading`` (context, arguments), then
    every option the table gives it."""
    params = [*leading, *(flag.parameter(command) for flag in flags_of(command, table))]
    return inspect.Signature(params, return_annotation=None)


def declare(
    command: str, *leading: inspect.Parameter, table: Iterable[Flag] = FLAGS
) -> Callable[[F], F]:
    """Decorator: give a ``(ctx, ..., **values)`` function the table's options as its
    signature, so typer declares them and passes them back as keyword arguments.

    The signature is made when the command is built (``signed``), not when the module is
    imported: `promptpath --help` and `promptpath run` build no other command's options."""

    def apply(func: F) -> F:
        func.__promptpath_declared__ = (command, leading, table)  # type: ignore[attr-defined]
        return func

    return apply


def signed(func: F) -> F:
    """``func`` with the signature ``declare`` gave it, made on first use; a function
    that was not declared is returned as it is."""
    declared = getattr(func, "__promptpath_declared__", None)
    if declared is not None and "__signature__" not in vars(func):
        command, leading, table = declared
        sig = signature(leading, command, table)
        func.__signature__ = sig  # type: ignore[attr-defined]
        func.__annotations__ = {p.name: p.annotation for p in sig.parameters.values()}
    return func


__all__ = [
    "BY_DEST",
    "FLAGS",
    "PANELS",
    "Flag",
    "declare",
    "defaults",
    "flags_of",
    "output_flag",
    "signature",
    "signed",
]
