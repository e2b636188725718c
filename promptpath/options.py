"""What the user asked for, parsed and validated: one frozen object every layer reads."""

from __future__ import annotations

import errno
import math
import os
import re
import socket
from dataclasses import dataclass, field, replace
from typing import Literal
from urllib.parse import parse_qsl, urlsplit

from promptpath.core.addr import wire_host
from promptpath.core.errors import UsageError
from promptpath.core.files import MAX_PEM_BYTES, special_kind
from promptpath.core.headers import is_credential
from promptpath.core.urlsafe import is_secret_query as is_secret_query
from promptpath.core.urlsafe import shown_url
from promptpath.dialects.registry import ClientName as ClientName  # re-exported: field types
from promptpath.dialects.registry import Provider as Provider
from promptpath.proxies import ProxyChoice

HTTPChoice = Literal["1.1", "2", "3", "auto"]

DEFAULT_PROMPT = "Why does my BGP session keep flapping?"
DEFAULT_MAX_TOKENS = 64
DEFAULT_TIMEOUT_S = 60.0
#: The longest --timeout taken: a day. Longer is a typo (1e300 overflowed the deadline's
#: nanoseconds), and no stream is worth waiting for past it.
MAX_TIMEOUT_S = 86_400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Guardrail:
    """A Bedrock guardrail the request applies (converse's ``guardrailConfig``, invoke's
    ``X-Amzn-Bedrock-Guardrail*`` headers) and its streaming mode."""

    identifier: str
    version: str
    mode: Literal["sync", "async"] = "sync"  # Bedrock's default is synchronous


def parse_guardrail(spec: str) -> Guardrail:
    """``ID:VERSION`` or ``ID:VERSION:async`` (``sync`` may be written too)."""
    parts = spec.split(":")
    mode = parts.pop() if len(parts) == 3 else "sync"
    if len(parts) != 2 or not all(parts) or mode not in ("sync", "async"):
        raise UsageError(
            f"--guardrail wants ID:VERSION[:sync|async], got {spec!r}", kind="bad_option"
        )
    if not all(p.isascii() and p.replace("-", "").replace("_", "").isalnum() for p in parts):
        raise UsageError(
            f"--guardrail: {spec!r} is not a guardrail id and version", kind="bad_option"
        )
    return Guardrail(
        identifier=parts[0], version=parts[1], mode="async" if mode == "async" else "sync"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class AwsCredentials:
    """What SigV4 signs Bedrock requests with (found as botocore finds them: resolve.py)."""

    access_key: str
    secret_key: str = field(repr=False)  # never sent, never printed
    token: str | None = field(default=None, repr=False)  # a session token (temporary keys)
    region: str
    source: str  # where they came from: "environment", "shared-credentials-file", ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    url: str
    scheme: Literal["http", "https"]  # ws:// is http, wss:// https (``websocket`` set)
    host: str
    port: int
    path: str  # path plus query, as sent
    websocket: bool = False  # a ws:// or wss:// URL: the upgrade, then messages


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectTo:
    """curl's ``--connect-to HOST1:PORT1:HOST2:PORT2``: requests for HOST1:PORT1 connect to
    HOST2:PORT2 instead; SNI and Host stay HOST1. An empty HOST1 or PORT1 matches any; an
    empty HOST2 or PORT2 keeps the request's own."""

    host: str | None
    port: int | None
    to_host: str | None
    to_port: int | None
    spec: str  # as the user wrote it (reports show it)

    def matches(self, host: str, port: int) -> bool:
        return (self.host is None or self.host.lower() == host.lower()) and (
            self.port is None or self.port == port
        )

    def destination(self, host: str, port: int) -> tuple[str, int]:
        """Where a request for ``host:port`` connects under this rule."""
        return self.to_host or host, port if self.to_port is None else self.to_port


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    target: Target
    provider: Provider
    model: str
    prompt: str = DEFAULT_PROMPT
    max_tokens: int = DEFAULT_MAX_TOKENS
    headers: tuple[tuple[str, str], ...] = ()
    api_key: str | None = field(default=None, repr=False)  # never printed
    api_key_env: str | None = None
    http: HTTPChoice = "auto"
    resolve: tuple[tuple[str, int, str], ...] = ()  # (host, port, address), curl --resolve
    cacert: str | None = None
    insecure: bool = False
    allow_cleartext: bool = False  # send a key over plain http:// off loopback too
    cert: str | None = None  # client certificate PEM (mTLS); may hold the key as well
    key: str | None = None  # its private key, when not in ``cert``
    connect_to: tuple[ConnectTo, ...] = ()
    family: int = 0  # 0, socket.AF_INET or socket.AF_INET6
    timeout: float = DEFAULT_TIMEOUT_S
    warm: bool = False
    resolver: str | None = None  # ADDR[:PORT] to use instead of the system resolver
    # The library default is today's plain request; the CLI defaults to the provider's SDK.
    client: ClientName = "identity"
    proxy: ProxyChoice | None = None  # the forward proxy this run goes through
    proxy_note: str | None = None  # why a configured proxy was not used (NO_PROXY, ...)
    proxy_cacert: str | None = None  # CAs for an https:// proxy's own certificate
    verbose: bool = False
    # SSLKEYLOGFILE from the environment the CLI was given: aioquic's secrets go there
    # (over TCP the ssl module reads the variable itself).
    keylog_file: str | None = None
    guardrail: Guardrail | None = None  # a Bedrock guardrail the request applies
    # SigV4 credentials for Bedrock (none: not Bedrock, or a bearer token / -H key is used)
    aws: AwsCredentials | None = field(default=None, repr=False)
    # Reference-endpoint controls sent in the body's "promptpath" object (canary probes):
    # they reach it through gateways that strip x-promptpath-* headers.
    body_controls: tuple[tuple[str, str], ...] = ()
    # WebSocket only: in-band pings every ``ws_ping_ms`` while the stream runs, at most
    # ``ws_ping_count`` of them (None: no pings).
    ws_ping_ms: float | None = None
    ws_ping_count: int = 0
    # The prompt's first ``cache_prefix`` characters are a prefix to cache (the prefill
    # probe): an API that caches only what a request marks (the plug-in's ``cache_mark``)
    # gets the mark after them; every other API gets the prompt whole. 0: no mark.
    cache_prefix: int = 0

    def derive(
        self,
        *,
        prompt: str | None = None,
        max_tokens: int | None = None,
        timeout: float | None = None,
        http: HTTPChoice | None = None,
        headers: tuple[tuple[str, str], ...] | None = None,
        body_controls: tuple[tuple[str, str], ...] | None = None,
        keyless: bool = False,
        ws_pings: tuple[float | None, int] | None = None,
    ) -> RunOptions:
        """The same path and client with another request: what a probe may change (its
        prompt, token cap, deadline, HTTP version, headers, canary controls; ``keyless``
        drops the key; ``ws_pings`` a WebSocket's in-band pings, (None, 0) for none). A
        derived request is never a --warm pair."""
        changes: dict[str, object] = {"warm": False}
        if ws_pings is not None:
            changes["ws_ping_ms"], changes["ws_ping_count"] = ws_pings
        for name, value in (
            ("prompt", prompt),
            ("max_tokens", max_tokens),
            ("timeout", timeout),
            ("http", http),
            ("headers", headers),
            ("body_controls", body_controls),
        ):
            if value is not None:
                changes[name] = value
        if keyless:
            changes["api_key"] = None
            changes["aws"] = None
        return replace(self, **changes)  # type: ignore[arg-type]

    def resolve_override(self, host: str, port: int) -> str | None:
        for r_host, r_port, r_addr in self.resolve:
            if r_host.lower() == host.lower() and r_port == port:
                return r_addr
        return None

    def unused_resolve(self) -> list[str]:
        """The --resolve entries (as HOST:PORT:ADDR) that name no host:port this run looks
        up: the target, a --connect-to destination, or the proxy. curl ignores them
        silently, which hides a typo behind a real DNS answer."""
        t = self.target
        used = {(t.host.lower(), t.port)}
        rule = self.connect_to_for(t.host, t.port)
        if rule is not None:
            used.add(((rule.to_host or t.host).lower(), rule.to_port or t.port))
        if self.proxy is not None:
            used.add((self.proxy.host.lower(), self.proxy.port))
        return [
            f"{host}:{port}:{addr}"
            for host, port, addr in self.resolve
            if (host.lower(), port) not in used
        ]

    def connect_to_for(self, host: str, port: int) -> ConnectTo | None:
        """The first --connect-to rule for ``host:port`` (curl's order), if any."""
        return next((rule for rule in self.connect_to if rule.matches(host, port)), None)


def check_timeout(value: float, flag: str = "--timeout") -> float:
    """``value`` when it is a usable number of seconds: finite, positive, at most a day."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{flag} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{flag} must be a positive number of seconds")
    if value > MAX_TIMEOUT_S:
        raise UsageError(f"{flag} must be at most {MAX_TIMEOUT_S:g} s (a day), got {value:g}")
    return float(value)


def parse_target(url: str) -> Target:
    """Validate a target URL; the error says what is wrong with it (showing the URL with
    its credentials taken out: core/urlsafe.py). A fragment is never sent, and is dropped
    here so that no output can show it (``#token=…`` pasted from a browser)."""
    shown = shown_url(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - urlsplit checks the port and brackets lazily
    except ValueError as exc:
        raise UsageError(
            f"target is not a valid URL: {shown!r} ({exc})", kind="bad_target"
        ) from exc
    if parts.scheme not in ("http", "https", "ws", "wss"):
        raise UsageError(
            f"target must be an http://, https://, ws:// or wss:// URL, got {shown!r}",
            kind="bad_target",
        )
    if not parts.hostname:
        raise UsageError(f"target URL has no host: {shown!r}", kind="bad_target")
    try:
        host = wire_host(parts.hostname)
    except ValueError as exc:
        raise UsageError(f"target host name {exc}", kind="bad_target") from None
    if parts.username is not None or parts.password is not None:
        # Credentials in a URL end up in shell history, logs and reports, and we would
        # not send them anyway: say where a key belongs instead.
        raise UsageError(
            "credentials in the target URL are not supported: use --api-key-env or -H",
            kind="bad_target",
        )
    try:
        port = parts.port
    except ValueError as exc:
        raise UsageError(f"target URL has a bad port: {shown!r}", kind="bad_target") from exc
    if port == 0:  # urlsplit allows it; it used to become the default port silently
        raise UsageError(
            f"target URL has port 0, which no server listens on: {shown!r}", kind="bad_target"
        )
    url = url.partition("#")[0]
    secure = parts.scheme in ("https", "wss")
    if port is None:  # none given, or "host:" (RFC 3986: the scheme's default)
        port = 443 if secure else 80
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    scheme: Literal["http", "https"] = "https" if secure else "http"
    return Target(
        url=url,
        scheme=scheme,
        host=host,
        port=port,
        path=path,
        websocket=parts.scheme in ("ws", "wss"),
    )


def parse_resolve(spec: str) -> tuple[str, int, str]:
    """curl-style HOST:PORT:ADDR (ADDR may be a bracketed IPv6 literal, brackets balanced)."""
    host, sep, rest = spec.partition(":")
    port_s, sep2, addr = rest.partition(":")
    if not (sep and sep2 and host and addr and port_s.isdigit()):
        raise UsageError(f"--resolve wants HOST:PORT:ADDR, got {spec!r}", kind="bad_option")
    if not 1 <= int(port_s) <= 65535:
        raise UsageError(
            f"--resolve: {port_s!r} is not a port (1-65535) in {spec!r}", kind="bad_option"
        )
    if addr.startswith("[") != addr.endswith("]") or addr.count("[") > 1 or addr.count("]") > 1:
        raise UsageError(
            f"--resolve: unbalanced brackets in the address {addr!r}", kind="bad_option"
        )
    bracketed = addr.startswith("[")
    addr = addr[1:-1] if bracketed else addr
    family = socket.AF_INET6 if ":" in addr else socket.AF_INET
    if bracketed and family != socket.AF_INET6:
        raise UsageError(
            f"--resolve: brackets hold an IPv6 literal, not {addr!r}", kind="bad_option"
        )
    try:
        socket.inet_pton(family, addr)
    except OSError as exc:
        raise UsageError(
            f"--resolve address is not an IP literal: {addr!r}", kind="bad_option"
        ) from exc
    return _option_host(host, "--resolve"), int(port_s), addr


def _option_host(host: str, flag: str) -> str:
    """A host name an option gives, as the target's is written on the wire (wire_host)."""
    try:
        return wire_host(host.lower())
    except ValueError as exc:
        raise UsageError(f"{flag}: the host name {exc}", kind="bad_option") from None


def _connect_to_fields(spec: str) -> list[str]:
    """Split on ':' outside brackets, so an IPv6 literal may be written [::1]."""
    fields, current, depth = [], "", 0
    for ch in spec:
        if ch == ":" and depth == 0:
            fields.append(current)
            current = ""
            continue
        depth += {"[": 1, "]": -1}.get(ch, 0)
        current += ch
    fields.append(current)
    return fields


def parse_connect_to(spec: str) -> ConnectTo:
    """curl-style HOST1:PORT1:HOST2:PORT2 (a host may be an [IPv6] literal; empty = any)."""
    fields = _connect_to_fields(spec)
    if len(fields) != 4:
        raise UsageError(
            f"--connect-to wants HOST1:PORT1:HOST2:PORT2 (4 fields), got {len(fields)} in {spec!r}",
            kind="bad_option",
        )
    ports: list[int | None] = []
    for raw in (fields[1], fields[3]):
        if raw == "":
            ports.append(None)
        elif raw.isdigit() and 1 <= int(raw) <= 65535:
            ports.append(int(raw))
        else:
            raise UsageError(
                f"--connect-to: {raw!r} is not a port (1-65535) in {spec!r}", kind="bad_option"
            )
    for raw in (fields[0], fields[2]):
        if raw.startswith("[") != raw.endswith("]") or raw.count("[") + raw.count("]") > 2:
            raise UsageError(
                f"--connect-to: unbalanced brackets in {raw!r} in {spec!r}", kind="bad_option"
            )
    host, to_host = (
        _option_host(bare, "--connect-to") if bare else None
        for bare in (f.removeprefix("[").removesuffix("]") for f in (fields[0], fields[2]))
    )
    return ConnectTo(host=host, port=ports[0], to_host=to_host, to_port=ports[1], spec=spec)


class InputFileError(Exception):
    """A file a user named cannot be read as one: why, in words ("is a FIFO")."""


def read_input(path: str | os.PathLike[str], limit: int) -> bytes:
    """A file a user names, whole, if it is a regular file of at most ``limit`` bytes.

    Opened without blocking, as SSLKEYLOGFILE's check opens it: a FIFO with no writer
    held a plain open() (and, before it, nothing answered SIGTERM or SIGINT) for good.
    The kind is the open descriptor's, so what is read is what was checked. A device
    (/dev/zero grew a run to 2.6 GB), a FIFO or a directory is refused unread; a file
    past ``limit`` is refused after ``limit`` + 1 bytes. InputFileError says why."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputFileError(exc.strerror or errno.errorcode.get(exc.errno or 0, "error")) from exc
    try:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise InputFileError(f"is a {kind}, not a regular file")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            piece = os.read(fd, min(1 << 20, limit + 1 - size))
            if not piece:
                return b"".join(chunks)
            chunks.append(piece)
            size += len(piece)
        raise InputFileError(f"is larger than {limit >> 20} MiB")
    except OSError as exc:
        raise InputFileError(exc.strerror or "cannot be read") from exc
    finally:
        os.close(fd)


class _NoPassword(Exception):
    """The key is encrypted: promptpath never asks for a password (it runs unattended)."""


def _no_password() -> str:
    raise _NoPassword


def check_client_cert(cert: str | None, key: str | None) -> None:
    """--cert/--key must load as one certificate and its key, before anything is sent.

    Messages name the option, never a path: a key file's name is the user's business."""
    import ssl

    if cert is None:  # --key without --cert: resolve.py refuses the pair
        return
    texts: dict[str, bytes] = {}
    for flag, path in (("--cert", cert), ("--key", key)):
        if path is None:
            continue
        try:
            texts[flag] = read_input(path, MAX_PEM_BYTES)
        except InputFileError as exc:
            raise UsageError(f"{flag}: cannot read the file ({exc})", kind="bad_option") from exc
    if b"-----BEGIN CERTIFICATE-----" not in texts["--cert"]:
        raise UsageError("--cert: no PEM certificate in the file", kind="bad_option")
    key_flag = "--key" if key is not None else "--cert"
    if b"PRIVATE KEY-----" not in texts[key_flag]:
        raise UsageError(
            "--key: no PEM private key in the file"
            if key is not None
            else "--cert holds no private key: pass --key FILE (or one PEM file with both)",
            kind="bad_option",
        )
    try:
        ssl.create_default_context().load_cert_chain(cert, key, password=_no_password)
    except _NoPassword as exc:
        raise UsageError(
            f"{key_flag}: the private key is encrypted, and promptpath never asks for a"
            " password: give it an unencrypted copy (openssl pkey -in ENCRYPTED -out PLAIN)",
            kind="bad_option",
        ) from exc
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise UsageError(
                "--cert and --key do not match: the key is not the certificate's",
                kind="bad_option",
            ) from exc
        reason = exc.reason or type(exc).__name__
        raise UsageError(
            f"--cert/--key: not a usable certificate and key ({reason})", kind="bad_option"
        ) from exc
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"--cert/--key: cannot load them ({reason})", kind="bad_option") from exc


#: RFC 9110 token characters, the only ones a header name may contain.
_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

#: -H names promptpath refuses, and why. Every request carries a body whose length
#: promptpath knows, so it frames it itself, the same way on HTTP/1.1, /2 and /3:
#: curl 7.88.1 (checked on loopback) sends a -H Content-Length that does not match the
#: body as given, switches HTTP/1.1 to chunked for -H Transfer-Encoding but drops it on
#: HTTP/2, and drops Connection on HTTP/2 while keeping it on HTTP/1.1: requests that
#: differ by version, or a framing a hop can read two ways (RFC 9112 section 6.3).
_REFUSED_HEADERS = {
    "content-length": "promptpath frames the body itself (Content-Length from the bytes it"
    " sends); another value would make a malformed request",
    "transfer-encoding": "promptpath sends the body with its length (Content-Length);"
    " Transfer-Encoding beside it is a request-smuggling shape, and HTTP/2 and HTTP/3"
    " forbid it",
    "connection": "connection-specific headers are forbidden in HTTP/2 and HTTP/3"
    " (RFC 9113 section 8.2.2), so the request would differ by version",
    "keep-alive": "connection-specific headers are forbidden in HTTP/2 and HTTP/3"
    " (RFC 9113 section 8.2.2), so the request would differ by version",
    "proxy-connection": "connection-specific headers are forbidden in HTTP/2 and HTTP/3"
    " (RFC 9113 section 8.2.2), so the request would differ by version",
    "upgrade": "connection-specific headers are forbidden in HTTP/2 and HTTP/3"
    " (RFC 9113 section 8.2.2); --http chooses the version",
}

#: A Host value: reg-name or IPv4 (RFC 3986 unreserved, sub-delims, pct-encoded) or a
#: bracketed IPv6 literal, then an optional port.
_HOST_VALUE = re.compile(r"(?:[A-Za-z0-9._~!$&'()*+,;=%-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")


def parse_header(spec: str) -> tuple[str, str]:
    """'Name: value', checked before anything is sent (RFC 9110 names, no CR/LF/NUL).

    Host is applied on every version (HTTP/1.1 Host, :authority on HTTP/2 and HTTP/3, as
    curl does); the framing and connection-specific headers are refused (_REFUSED_HEADERS)."""
    name, sep, value = spec.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name:
        raise UsageError(f"-H wants 'Name: value', got {spec!r}", kind="bad_option")
    if not set(name) <= _TCHAR:
        raise UsageError(f"-H: {name!r} is not a valid header name", kind="bad_option")
    if any(c in value for c in "\r\n\x00"):
        raise UsageError(f"-H: the value of {name!r} contains CR, LF or NUL", kind="bad_option")
    if not value.isascii():
        raise UsageError(f"-H: the value of {name!r} is not ASCII", kind="bad_option")
    lowered = name.lower()
    reason = _REFUSED_HEADERS.get(lowered)
    if lowered == "te" and value.lower() != "trailers":
        reason = "TE other than 'trailers' is forbidden in HTTP/2 and HTTP/3 (RFC 9113 8.2.2)"
    if reason is not None:
        raise UsageError(f"-H {name}: refused: {reason}", kind="bad_option")
    if lowered == "host":
        port = value.rpartition(":")[2] if not value.endswith("]") else ""
        if not _HOST_VALUE.fullmatch(value) or (port.isdigit() and not 0 < int(port) < 65536):
            raise UsageError(
                f"-H Host: {value!r} is not a host[:port] (RFC 9110 section 7.2)",
                kind="bad_option",
            )
    return name, value


def parse_headers(specs: list[str] | tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Every -H checked (``parse_header``), and at most one Host: a request names one."""
    headers = tuple(parse_header(spec) for spec in specs)
    if sum(1 for name, _ in headers if name.lower() == "host") > 1:
        raise UsageError(
            "-H Host given more than once: a request names one host", kind="bad_option"
        )
    return headers


def check_utf8(value: str, flag: str) -> str:
    """``value`` unchanged, or a UsageError when it came from bytes that are not UTF-8.

    Python decodes argv with surrogateescape: each undecodable byte becomes a lone
    surrogate (U+DC80-U+DCFF) that would otherwise reach the server as ``\\udcc3``."""
    bad = next((c for c in value if "\udc80" <= c <= "\udcff"), None)
    if bad is not None:
        byte = ord(bad) - 0xDC00
        raise UsageError(
            f"{flag} is not valid UTF-8 (byte 0x{byte:02x}): give it as UTF-8 text",
            kind="bad_option",
        )
    return value


def check_argv_utf8(argv: list[str] | tuple[str, ...]) -> None:
    """Every argument valid UTF-8 (``check_utf8``), the error naming its option."""
    previous = ""
    for arg in argv:
        if arg.startswith("--") and "=" in arg:
            flag, _, value = arg.partition("=")
            check_utf8(value, check_utf8(flag, "an option name"))
        elif previous.startswith("-") and previous != "--" and not arg.startswith("-"):
            check_utf8(arg, f"the value of {previous}")
        else:
            check_utf8(arg, "an argument")
        previous = arg


def display_url(url: str) -> str:
    """The target URL safe to print: credential-like query values and userinfo replaced,
    the fragment (never sent) dropped (core/urlsafe.py)."""
    return shown_url(url)


def secret_values(options: RunOptions) -> list[str]:
    """The key, credential headers and query values, and the proxy's credentials (its
    ``Proxy-Authorization`` value, its Basic token, ``user:password`` and the password)."""
    values = [options.api_key] if options.api_key else []
    if options.aws is not None:  # the access key id is an identifier, not a secret
        values.extend(v for v in (options.aws.secret_key, options.aws.token) if v)
    for name, value in options.headers:
        if is_credential(name, value) and value:
            values.append(value)
            values.append(value.split(" ", 1)[-1])  # "Bearer sk-..." → also the bare token
    query = urlsplit(options.target.url).query
    values.extend(v for k, v in parse_qsl(query, keep_blank_values=True) if is_secret_query(k))
    proxy = options.proxy
    if proxy is not None and proxy.authorization is not None:
        values.append(proxy.authorization)
        values.append(proxy.authorization.split(" ", 1)[-1])  # the Basic token
        if proxy.password:
            values.append(proxy.password)
            values.append(f"{proxy.username}:{proxy.password}")
    return [v for v in values if v]
