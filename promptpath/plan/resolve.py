"""Command-line values + profile + environment -> one checked, frozen Plan.

The one place where options are checked against each other: every conflict between two
options is a UsageError raised here (tests/unit/test_usage_sites.py holds that), and nothing
below re-checks. A value that is wrong on its own (a bad URL, a malformed --resolve entry)
is found by its parser (options.py, proxies.py, core/slo.py, outputs/deliver.py), called from here.

Values arrive as typer parsed them, keyed by each option's ``dest`` (promptpath/plan/flags.py);
``values_for(**given)`` builds them for library callers and tests, the defaults filled in.
"""

from __future__ import annotations

import errno
import math
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, get_args

from promptpath.core.errors import UsageError
from promptpath.core.files import MAX_PEM_BYTES, special_kind
from promptpath.core.headers import KEY_HEADERS
from promptpath.core.series_plan import MAX_INTERVAL_S, SeriesPlan
from promptpath.dialects.plugins import (
    detect_provider,
    dialect,
    dialects,
    key_from_env,
    model_from_path,
)
from promptpath.options import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_PROMPT,
    DEFAULT_TIMEOUT_S,
    AwsCredentials,
    ClientName,
    Guardrail,
    HTTPChoice,
    InputFileError,
    Provider,
    RunOptions,
    Target,
    check_client_cert,
    check_timeout,
    parse_connect_to,
    parse_guardrail,
    parse_headers,
    parse_resolve,
    parse_target,
    read_input,
)
from promptpath.outputs.formats import MACHINE_EXPORTS, going
from promptpath.plan import flags
from promptpath.plan.plan import ExporterPlan, FailOn, Outputs, Plan
from promptpath.probes.settings import ProbeSettings

if TYPE_CHECKING:
    from promptpath.core.slo import SLO
    from promptpath.plan.plan import Baseline

#: The values each choice accepts, read from the Literal types themselves (never re-spelt).
PROVIDERS: tuple[Provider, ...] = get_args(Provider)
HTTP_CHOICES: tuple[HTTPChoice, ...] = get_args(HTTPChoice)
FAIL_ON: tuple[FailOn, ...] = get_args(FailOn)

#: Profile keys that fill an option the command line left unsaid, by the option's dest.
#: (headers and resolve merge differently, url is the target; see _apply_profile.)
PROFILE_FILLS: Mapping[str, str] = {
    "provider": "provider",
    "model": "model",
    "prompt": "prompt",
    "max_tokens": "max_tokens",
    "api_key_env": "api_key_env",
    "http": "http",
    "cacert": "cacert",
    "insecure": "insecure",
    "timeout": "timeout",
    "resolver": "resolver",
    "proxy": "proxy",
    "noproxy": "noproxy",
    "cert": "cert",
    "key": "key",
    "as": "client",
}

Say = Callable[[str], None]


def _quiet(_line: str) -> None:
    return None


class Values:
    """The parsed options, read with their types (typer already parsed each one)."""

    def __init__(self, raw: Mapping[str, object]) -> None:
        unknown = set(raw) - set(flags.BY_DEST) - {"target"}
        if unknown:
            raise TypeError(f"unknown option values {sorted(unknown)}")
        self._raw = {**flags.defaults(), **raw}

    def get(self, dest: str) -> Any:
        return self._raw[dest]

    def text(self, dest: str) -> str | None:
        value = self._raw[dest]
        assert value is None or isinstance(value, str), (dest, value)
        return value

    def texts(self, dest: str) -> list[str]:
        value = self._raw[dest]
        assert value is None or isinstance(value, (list, tuple)), (dest, value)
        return [str(v) for v in value] if value else []

    def flag(self, dest: str) -> bool:
        return bool(self._raw[dest])

    def with_(self, **changes: object) -> Values:
        return Values({**self._raw, **changes})


def values_for(target: str, **given: object) -> Values:
    """Option values as the command line would give them (defaults for the rest)."""
    return Values({"target": target, **given})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Profile:
    values: Values
    api_key: str | None
    name: str | None  # the profile TARGET named, if any
    proxy_source: str


def _apply_profile(values: Values, environ: Mapping[str, str]) -> _Profile:
    """TARGET names a profile: fill what the command line left unsaid (an explicit value,
    even the default, wins)."""
    target = values.get("target")
    if "://" in target:
        return _Profile(values=values, api_key=None, name=None, proxy_source="--proxy")
    from promptpath.plan.profiles import config_path, load_profile

    profile = load_profile(target, config_path(dict(environ)))
    merged = _profile_fills(values, profile)
    return _Profile(
        values=values.with_(**merged),
        api_key=profile.get("api_key"),
        name=target,
        proxy_source="profile" if "proxy" in merged else "--proxy",
    )


def _profile_fills(values: Values, profile: Mapping[str, Any]) -> dict[str, object]:
    """The option values a profile (or an exporter module) fills: what the command line
    left unsaid, its headers before the command line's, its --resolve unless given."""
    merged: dict[str, object] = {"target": profile["url"]}
    for key, dest in PROFILE_FILLS.items():
        if key in profile and values.get(dest) is None:
            merged[dest] = profile[key]
    if "headers" in profile:
        merged["header"] = [f"{k}: {v}" for k, v in profile["headers"].items()] + values.texts(
            "header"
        )
    if "resolve" in profile and not values.texts("resolve"):
        merged["resolve"] = [str(r) for r in profile["resolve"]]
    return merged


def check_cacert(path: str, flag: str = "--cacert") -> None:
    """A CA option must name a readable PEM bundle: find out now, not as a TLS failure."""
    import ssl

    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise UsageError(f"{flag} file not found: {path}") from None
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read it ({exc.strerror or exc})") from exc
    kind = special_kind(mode)
    if kind == "directory":
        raise UsageError(
            f"{flag} {path}: is a directory; give the PEM bundle file of the CAs to trust"
        )
    if kind is not None:
        raise UsageError(
            f"{flag} {path}: is a {kind}, not a file; give the PEM bundle file of the CAs to trust"
        )
    try:  # a huge file, or one swapped for a FIFO since: refused before the ssl module
        read_input(path, MAX_PEM_BYTES)
    except InputFileError as exc:
        raise UsageError(f"{flag} {path}: cannot read the file ({exc})") from exc
    try:
        ssl.create_default_context(cafile=path)
    except (ssl.SSLError, OSError) as exc:
        raise UsageError(f"{flag} {path}: not a PEM certificate bundle ({exc})") from exc


def client_for(name: str | None, provider: Provider) -> ClientName:
    """--as NAME checked, or the provider's own SDK when none was given."""
    from promptpath.tracer.request import SHAPES

    if name is None:
        return dialect(provider).client
    for known in SHAPES:
        if known == name:
            return known
    raise UsageError(f"--as must be one of {', '.join(SHAPES)}, got {name!r}", kind="bad_option")


def _provider(given: str | None, path: str) -> Provider:
    if given is not None:
        for known in PROVIDERS:
            if known == given:
                return known
        raise UsageError(f"--provider must be one of {', '.join(PROVIDERS)}, got {given!r}")
    detected = detect_provider(path)
    if detected is None:
        raise UsageError(
            f"cannot tell the provider from the path {path!r}: pass --provider"
            f" ({', '.join(PROVIDERS)})"
        )
    return detected


def _guardrail(spec: str | None, provider: Provider) -> Guardrail | None:
    if spec is None:
        return None
    if not dialect(provider).guardrails:
        guarded = [d for d in dialects() if d.guardrails]
        apis = " and ".join(dict.fromkeys(d.title for d in guarded))
        raise UsageError(
            f"--guardrail applies to {apis} only, not the {provider} dialect: use"
            f" --provider {' or '.join(d.name for d in guarded)}",
            kind="bad_option",
        )
    return parse_guardrail(spec)


def _aws(
    provider: Provider,
    api_key: str | None,
    headers: tuple[tuple[str, str], ...],
    environ: Mapping[str, str],
    host: str,
) -> AwsCredentials | None:
    """SigV4 credentials for a run of a dialect that takes them (Bedrock) and has no key of
    another kind (a bearer token from AWS_BEARER_TOKEN_BEDROCK or a profile, a credential
    header given with -H)."""
    if dialect(provider).sigv4_service is None or api_key:
        return None
    if {name.lower() for name, _ in headers} & KEY_HEADERS:
        return None
    from promptpath.plan.aws_auth import load_credentials

    return load_credentials(environ, host)


def _http(given: str) -> HTTPChoice:
    for known in HTTP_CHOICES:
        if known == given:
            return known
    raise UsageError(f"--http must be one of {', '.join(HTTP_CHOICES)}, got {given!r}")


#: Most in-band pings one run may send (each is a frame on a metered connection).
MAX_WS_PINGS = 1000
#: Default ping count when only --ws-ping-ms is given.
DEFAULT_WS_PINGS = 10


def _websocket(
    values: Values, target: Target, provider: Provider, http: HTTPChoice
) -> tuple[float | None, int]:
    """A ws:// or wss:// target's dialect and HTTP version checked; the ping settings."""
    spec = dialect(provider)
    if target.websocket and spec.ws_messages is None:
        speakers = " or ".join(d.name for d in dialects() if d.ws_messages is not None)
        raise UsageError(
            f"a {target.url.split(':', 1)[0]}:// target speaks WebSocket, which the {provider}"
            f" dialect does not: use --provider {speakers}",
            kind="bad_target",
        )
    if spec.websocket_only is not None and not target.websocket:
        raise UsageError(spec.websocket_only, kind="bad_target")
    if target.websocket and http not in ("1.1", "auto"):
        raise UsageError(
            f"--http {http}: a WebSocket upgrade runs over HTTP/1.1 (ALPN offers http/1.1 only)",
            kind="bad_option",
        )
    interval, count = values.get("ws_ping_ms"), values.get("ws_ping_count")
    if (interval is not None or count is not None) and not target.websocket:
        raise UsageError(
            "--ws-ping-ms and --ws-ping-count go with a ws:// or wss:// target",
            kind="bad_option",
        )
    if count is not None and interval is None:
        raise UsageError("--ws-ping-count goes with --ws-ping-ms", kind="bad_option")
    if interval is None:
        return None, 0
    if not math.isfinite(interval) or interval < 1:
        raise UsageError(f"--ws-ping-ms must be at least 1 ms, got {interval:g}", kind="bad_option")
    pings = DEFAULT_WS_PINGS if count is None else int(count)
    if not 1 <= pings <= MAX_WS_PINGS:
        raise UsageError(
            f"--ws-ping-count must be between 1 and {MAX_WS_PINGS}, got {pings}", kind="bad_option"
        )
    return float(interval), pings


def _family(values: Values) -> int:
    ipv4, ipv6 = values.flag("ipv4"), values.flag("ipv6")
    if ipv4 and ipv6:
        raise UsageError("-4 and -6 exclude each other")
    return socket.AF_INET if ipv4 else socket.AF_INET6 if ipv6 else 0


def _keylog(environ: Mapping[str, str]) -> str | None:
    keylog_file = environ.get("SSLKEYLOGFILE") or None
    if keylog_file is not None:
        # The ssl module opens it inside every SSLContext (--cacert's check included), and
        # HTTP/3 appends to it: one clear message rather than a misleading one later.
        # Opened as open(path, "a") does, but without blocking: a FIFO with no reader
        # would hold open() (and then the ssl module's fopen) for ever; checked by hand,
        # build_options hung on `mkfifo keys.fifo` until killed.
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NONBLOCK", 0)
        try:
            os.close(os.open(keylog_file, flags, 0o666))
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # a FIFO (or socket file) nobody reads
                raise UsageError(
                    "SSLKEYLOGFILE is a FIFO with no reader: start the program that reads it"
                    " (e.g. Wireshark) first",
                    kind="bad_option",
                ) from exc
            raise UsageError(
                f"SSLKEYLOGFILE cannot be appended to ({exc.strerror or exc})", kind="bad_option"
            ) from exc
    return keylog_file


def _dns_server(flag: str, value: str | None) -> None:
    if value is not None:
        from promptpath.net.dnsmsg import parse_server

        try:
            parse_server(value)
        except UsageError as exc:
            raise UsageError(f"{flag}: {exc.message}", kind="bad_option") from exc


def trace_options(values: Values, environ: Mapping[str, str]) -> RunOptions:
    """The tracer's spec: the request, the path and the limits, checked."""
    given = _apply_profile(values, environ)
    values = given.values
    target = parse_target(values.get("target"))
    provider = _provider(values.text("provider"), target.path)
    client = client_for(values.text("client"), provider)
    from promptpath.tracer.request import SHAPES

    http = _http(values.text("http") or SHAPES[client].http)
    ws_ping_ms, ws_ping_count = _websocket(values, target, provider, http)
    family = _family(values)
    timeout = values.get("timeout")
    timeout = check_timeout(DEFAULT_TIMEOUT_S if timeout is None else timeout)
    max_tokens = values.get("max_tokens")
    max_tokens = DEFAULT_MAX_TOKENS if max_tokens is None else int(max_tokens)
    if max_tokens < 1:
        raise UsageError("--max-tokens must be at least 1")
    keylog_file = _keylog(environ)
    proxy_cacert = values.text("proxy_cacert")
    for flag, ca_file in (("--cacert", values.text("cacert")), ("--proxy-cacert", proxy_cacert)):
        if ca_file is not None:
            check_cacert(ca_file, flag)
    cert, key = values.text("cert"), values.text("key")
    if cert is None and key is not None:
        raise UsageError("--key needs --cert (the certificate it belongs to)", kind="bad_option")
    check_client_cert(cert, key)
    _dns_server("--resolver", values.text("resolver"))
    key_env, env_key = key_from_env(provider, values.text("api_key_env"), environ)
    api_key = env_key or given.api_key
    proxy_user = values.text("proxy_user")
    if proxy_user is not None and ":" not in proxy_user:
        raise UsageError("--proxy-user wants USER:PASS", kind="bad_option")
    from promptpath.proxies import select_proxy

    proxy, proxy_note = select_proxy(
        target.scheme,
        target.host,
        flag=values.text("proxy"),
        flag_source=given.proxy_source,
        noproxy=values.text("noproxy"),
        user=proxy_user,
        environ=environ,
    )
    prompt = values.text("prompt")
    headers = parse_headers(values.texts("header"))
    return RunOptions(
        target=target,
        provider=provider,
        model=values.text("model")
        or model_from_path(provider, target.path)
        or dialect(provider).default_model,
        prompt=prompt if prompt is not None else DEFAULT_PROMPT,
        max_tokens=max_tokens,
        headers=headers,
        guardrail=_guardrail(values.text("guardrail"), provider),
        aws=_aws(provider, api_key, headers, environ, target.host),
        api_key=api_key or None,
        api_key_env=key_env,
        client=client,
        http=http,
        ws_ping_ms=ws_ping_ms,
        ws_ping_count=ws_ping_count,
        resolve=tuple(parse_resolve(r) for r in values.texts("resolve")),
        cacert=values.text("cacert"),
        insecure=values.flag("insecure"),
        allow_cleartext=values.flag("allow_cleartext"),
        cert=cert,
        key=key,
        connect_to=tuple(parse_connect_to(c) for c in values.texts("connect_to")),
        family=family,
        timeout=timeout,
        warm=values.flag("warm"),
        resolver=values.text("resolver"),
        verbose=values.flag("verbose"),
        keylog_file=keylog_file,
        proxy=proxy,
        proxy_note=proxy_note,
        proxy_cacert=proxy_cacert,
    )


def probe_settings(values: Values) -> ProbeSettings:
    """Each probe's settings from the options that name them (``Flag.setting``), each
    checked by its own dataclass, whether or not a probe runs (as always)."""
    given: dict[str, dict[str, object]] = {}
    for flag in flags.FLAGS:
        if flag.setting is not None:
            probe, name = flag.setting.split(".")
            given.setdefault(probe, {})[name] = values.get(flag.dest)
    defaults = ProbeSettings()
    return ProbeSettings(
        **{probe: type(getattr(defaults, probe))(**kw) for probe, kw in given.items()}
    )


def parse_plan(
    *,
    count: int,
    interval_s: float,
    reuse: bool,
    concurrency: str | None,
    connections: int | None,
) -> SeriesPlan:
    """Check the series options together; every problem is a UsageError naming the option."""
    if count < 1:
        raise UsageError(f"--count must be at least 1, got {count}", kind="bad_option")
    if not math.isfinite(interval_s) or interval_s < 0:
        raise UsageError(
            f"--interval must be 0 or more seconds, got {interval_s:g}", kind="bad_option"
        )
    if interval_s > MAX_INTERVAL_S:
        raise UsageError(
            f"--interval must be at most {MAX_INTERVAL_S:g} s (a day), got {interval_s:g}",
            kind="bad_option",
        )
    levels: tuple[int, ...] = ()
    if concurrency is not None:
        levels = parse_levels(concurrency)
        over = [c for c in levels if c > count]
        if over:
            raise UsageError(
                f"--concurrency {over[0]} is more than --count {count}: raise --count to at"
                f" least {max(levels)} (each level runs --count prompts)",
                kind="bad_option",
            )
    if connections is not None:
        if connections < 1:
            raise UsageError(
                f"--connections must be at least 1, got {connections}", kind="bad_option"
            )
        if not levels:
            raise UsageError("--connections needs --concurrency", kind="bad_option")
        if connections > max(levels):
            raise UsageError(
                f"--connections {connections} is more than --concurrency {max(levels)}:"
                " a connection with no stream on it measures nothing",
                kind="bad_option",
            )
    if count == 1 and not levels and (reuse or interval_s):
        flag = "--reuse" if reuse else "--interval"
        raise UsageError(f"{flag} is for a series: add --count N (N > 1)", kind="bad_option")
    if reuse and levels:
        raise UsageError(
            "--reuse is for streams one after another; with --concurrency, --connections"
            " says how many connections the streams share",
            kind="bad_option",
        )
    if interval_s and levels:
        raise UsageError(
            "--interval paces runs one after another: not with --concurrency", kind="bad_option"
        )
    return SeriesPlan(
        count=count,
        interval_s=interval_s,
        reuse=reuse,
        concurrency=levels,
        connections=connections,
    )


def parse_levels(text: str) -> tuple[int, ...]:
    """--concurrency C or a sweep C1,C2,..: positive, none repeated."""
    levels = []
    for part in text.split(","):
        try:
            level = int(part.strip())
        except ValueError:
            level = 0
        if level < 1:
            raise UsageError(
                f"--concurrency wants a positive number or a list like 1,8,64; {part!r} is not one",
                kind="bad_option",
            )
        levels.append(level)
    if len(set(levels)) != len(levels):
        raise UsageError(f"--concurrency {text}: a level is repeated", kind="bad_option")
    return tuple(levels)


def _slos(values: Values, profile: str | None, environ: Mapping[str, str]) -> list[SLO]:
    exprs = values.texts("slo")
    if not exprs and profile is None:
        return []  # the SLO grammar loads only for a run that has SLOs to parse
    from promptpath.core.slo import parse_slo

    slos = [parse_slo(expr) for expr in exprs]
    if profile is not None:
        named = {s.metric for s in slos}
        # The command line wins per metric: a profile's bound on one it names is dropped.
        slos += [s for s in profile_slos(profile, environ) if s.metric not in named]
    return slos


def _baseline(path: str | None, is_series: bool, slos: list[SLO]) -> Baseline | None:
    """--baseline read; a baseline SLO without it, or it without a series, is refused."""
    relative = [s.expr for s in slos if s.baseline is not None]
    if path is None:
        if relative:
            raise UsageError(
                f"--slo {relative[0]!r} compares with a baseline: add --baseline FILE",
                kind="bad_option",
            )
        return None
    if not is_series:
        raise UsageError("--baseline holds a series to a saved one: add --count N (N ≥ 2)",
                         kind="bad_option")  # fmt: skip
    from promptpath.plan.documents import read_baseline

    return read_baseline(path)


def diff_ranges(before: str | None, after: str | None, *, one_file: bool) -> None:
    """`promptpath diff`'s options: two ranges of one history, or two documents."""
    if (before is None) != (after is None):
        raise UsageError("diff: --before and --after go together (two ranges of one history)",
                         kind="bad_option")  # fmt: skip
    if before is not None and not one_file:
        raise UsageError("diff: --before/--after select ranges of one history: give one file",
                         kind="bad_option")  # fmt: skip


def profile_slos(name: str, environ: Mapping[str, str]) -> list[SLO]:
    """``[profiles.NAME.slo]``: ``ttft_p95 = "<800ms"`` (or a list, for two bounds)."""
    from promptpath.core.slo import parse_slo
    from promptpath.plan.profiles import config_path, load_profile

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
    from promptpath.core.addr import is_loopback as host_is_loopback

    host, port = options.target.host, options.target.port
    rule = options.connect_to_for(host, port)
    if rule is not None:
        host, port = rule.destination(host, port)
    return host_is_loopback(options.resolve_override(host, port) or host)


def check_spend(plan: SeriesPlan, options: RunOptions, *, yes: bool, say: Say) -> None:
    """State what the series may spend, as probes state their cost; above the threshold a
    non-loopback target needs --yes (UsageError). A loopback target is never refused."""
    from promptpath.core.series import SPEND_ASK_REQUESTS, SPEND_ASK_TOKENS

    requests = plan.requests
    tokens = requests * options.max_tokens
    loopback = is_loopback(options)
    where = "loopback" if loopback else options.target.host
    say(
        f"promptpath: series: {requests} request{'s' if requests != 1 else ''} ×"
        f" ≤{options.max_tokens} tokens = ≤{tokens:,} tokens to {where}"
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


def _fail_on(values: Values) -> FailOn:
    given = values.get("fail_on")
    for known in FAIL_ON:
        if known == given:
            return known
    raise UsageError(f"--fail-on must be warn or fail, got {given!r}")


def resolve(
    raw: Mapping[str, object] | Values,
    *,
    environ: Mapping[str, str],
    say: Say = _quiet,
) -> Plan:
    """The Plan for these option values; UsageError (exit 2) for any problem, before any
    packet is sent. ``say`` gets the notices a user should read first (a series' spend)."""
    values = raw if isinstance(raw, Values) else Values(raw)
    fail_on = _fail_on(values)
    options = trace_options(values, environ)
    settings = probe_settings(values)
    target = values.get("target")
    profile = None if "://" in target else target
    series = parse_plan(
        count=int(values.get("count")),
        interval_s=float(values.get("interval")),
        reuse=values.flag("reuse"),
        concurrency=values.text("concurrency"),
        connections=values.get("connections"),
    )
    slos = _slos(values, profile, environ)
    baseline = _baseline(values.text("baseline"), series.is_series, slos)
    compare = values.flag("compare_http")
    if slos and compare:
        raise UsageError("--slo judges one run or a series, not --compare-http", kind="bad_option")
    probe_names = values.texts("probe")
    if series.is_series:
        given = [
            flag
            for flag, on in (
                ("--probe", bool(probe_names)),
                ("--warm", options.warm),
                ("--compare-http", compare),
            )
            if on
        ]
        if given:
            raise UsageError(
                f"a series (--count, --concurrency) traces prompts only; drop {', '.join(given)}",
                kind="bad_option",
            )
        check_spend(series, options, yes=values.flag("yes"), say=say)
    from promptpath.outputs.deliver import plan_exports

    exports = plan_exports(
        {fmt.dest: values.text(fmt.dest) for fmt in going("file", "push")},
        labels=values.texts("label"),
        fail_on=fail_on,
    )
    otlp_given = values.text("otlp_endpoint") is not None
    probes: tuple[Any, ...] = ()
    if probe_names:
        from promptpath.probes.suite import select

        probes = tuple(select(probe_names))
    if settings.path.names and not any(p.name == "path" for p in probes):
        raise UsageError(
            "--path-names names the hops the path probe finds: add --probe path (or all)",
            kind="bad_option",
        )
    compare_runs = _compare_runs(
        values, options, probes=bool(probes), exports=exports.wanted, otlp=otlp_given
    )
    from promptpath.outputs.otlp import plan_otlp

    # A comparison is not one operation: the environment's collector gets nothing from it.
    otlp = None if compare else plan_otlp(values.text("otlp_endpoint"), environ, say)
    if options.http == "3" and options.target.scheme != "https":
        raise UsageError("HTTP/3 needs an https:// target (QUIC always runs TLS)")
    if options.http == "3" and options.proxy is not None:
        raise UsageError(
            f"HTTP/3 cannot go through the proxy {options.proxy.url} ({options.proxy.source}):"
            " QUIC does not cross an HTTP CONNECT proxy. Use --http 2, or --noproxy"
            f" {options.target.host} to go direct",
            kind="bad_option",
        )
    return Plan(
        trace=options,
        probes=probes,
        probe_settings=settings,
        series=series,
        compare_runs=compare_runs,
        outputs=Outputs(
            json_out=values.flag("json_out"),
            fail_on=fail_on,
            slos=tuple(slos),
            exports=exports,
            otlp=otlp,
            baseline=baseline,
        ),
    )


def _compare_runs(
    values: Values, options: RunOptions, *, probes: bool, exports: bool, otlp: bool = False
) -> int | None:
    """--compare-http's runs per protocol, or None when not comparing."""
    runs = values.get("compare_runs")
    if not values.flag("compare_http"):
        if runs is not None:
            raise UsageError("--compare-runs goes with --compare-http", kind="bad_option")
        return None
    # The command line's own --http (a profile's is the default it replaces).
    http = values.text("http")
    clash = [
        flag
        for flag, given in (
            ("--probe", probes),
            ("--warm", options.warm),
            ("--http", http not in (None, "auto")),
            (MACHINE_EXPORTS, exports),
            ("--otlp-endpoint", otlp),
        )
        if given
    ]
    if clash:
        raise UsageError(f"--compare-http chooses the protocols itself; drop {', '.join(clash)}")
    if options.target.scheme != "https":
        raise UsageError("--compare-http needs an https:// target (HTTP/3 is TLS only)")
    if options.proxy is not None:
        # Its HTTP/3 half could only go direct, around the proxy the HTTP/2 half crossed.
        raise UsageError(
            f"--compare-http needs HTTP/3, and QUIC does not cross the HTTP CONNECT proxy"
            f" {options.proxy.url} ({options.proxy.source}): use --noproxy"
            f" {options.target.host} to compare the direct path",
            kind="bad_option",
        )
    from promptpath.core.differences import DEFAULT_RUNS

    runs = DEFAULT_RUNS if runs is None else int(runs)
    if runs < 1:
        raise UsageError("--compare-runs must be at least 1", kind="bad_option")
    return runs


def module_plan(
    profile: Mapping[str, Any], *, probes: list[str], environ: Mapping[str, str]
) -> Plan:
    """The Plan of one exporter probe: a module's table and its target's (merged, as a
    profile's keys: ``url`` and the rest), with the module's probes."""
    values = values_for(str(profile["url"]), probe=probes or None)
    return resolve(values.with_(**_profile_fills(values, profile)), environ=environ)


def parse_listen(text: str) -> tuple[str, int]:
    """--listen HOST:PORT, [V6]:PORT, or :PORT (every interface)."""
    host, sep, port_s = text.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
        raise UsageError(
            f"--listen wants HOST:PORT (e.g. 127.0.0.1:9479), got {text!r}", kind="bad_option"
        )
    return host or "0.0.0.0", int(port_s)


def exporter_plan(values: Values, environ: Mapping[str, str]) -> ExporterPlan:
    """`promptpath exporter`'s options, checked: the config file named, the address."""
    from pathlib import Path

    config = values.text("config") or environ.get("PROMPTPATH_EXPORTER_CONFIG")
    if not config:
        raise UsageError(
            "--config FILE is needed (or PROMPTPATH_EXPORTER_CONFIG): the exporter probes"
            " only the targets its config names",
            kind="bad_option",
        )
    host, port = parse_listen(str(values.get("listen")))
    drain = float(values.get("drain_timeout"))
    if not math.isfinite(drain) or drain < 0:
        raise UsageError(
            f"--drain-timeout must be 0 or more seconds, got {drain:g}", kind="bad_option"
        )
    return ExporterPlan(
        config=Path(config),
        host=host,
        port=port,
        drain_timeout_s=drain,
        check_only=values.flag("check_config"),
        enable_lifecycle=values.flag("enable_lifecycle"),
    )


__all__ = [
    "PROFILE_FILLS",
    "Values",
    "check_cacert",
    "check_spend",
    "client_for",
    "exporter_plan",
    "is_loopback",
    "module_plan",
    "parse_levels",
    "parse_listen",
    "parse_plan",
    "probe_settings",
    "profile_slos",
    "resolve",
    "trace_options",
    "values_for",
]
