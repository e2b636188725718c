"""The request of one streamed prompt: method, headers and body, as the dialect's plug-in
and the client shape say (the plug-in: its body, key header, version headers; the shape:
User-Agent, Accept, Accept-Encoding, HTTP version), -H over both."""

from __future__ import annotations

import json
from dataclasses import dataclass

from promptpath.core.headers import (
    KEY_HEADERS,
    SECRET_HEADERS,
    carries_key,
    is_secret_header,
    redact_headers,
)
from promptpath.core.timeline import SentRequest
from promptpath.core.urlsafe import shown_path
from promptpath.dialects.plugins import dialect, dialects
from promptpath.dialects.registry import CLIENTS
from promptpath.dialects.spec import ClientShape
from promptpath.options import ClientName, Provider, RunOptions

#: The body field ``promptpath serve`` reads controls from (server/behaviour.BODY_FIELD).
CONTROLS_FIELD = "promptpath"
#: Our own product token: the whole User-Agent of the identity shape, and appended to
#: every other shape's, so a server log can tell a diagnostic run from the application
#: while a hop that matches the client's own tokens still sees them first.
PRODUCT = "promptpath/0.1"


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedRequest:
    method: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    expects: str  # "text/event-stream", "application/x-ndjson" or "websocket"
    messages: tuple[str, ...] = ()  # WebSocket: sent after the 101, in order


def auth_headers(
    provider: Provider, api_key: str | None, key_env: str | None = None
) -> list[tuple[str, str]]:
    """The key as the dialect sends it: its own header, else a bearer token."""
    if not api_key:
        return []
    spec = dialect(provider)
    if spec.key_header is not None and key_env not in spec.bearer_key_envs:
        return [(spec.key_header, api_key)]
    return [("authorization", f"Bearer {api_key}")]


#: The clients of no dialect of their own; the SDKs' shapes are their plug-ins'.
_GENERIC: tuple[ClientShape, ...] = (
    # curl 7.88.1 (Debian 12), as `curl URL -d ...` runs it, observed on loopback: "Accept:
    # */*", no Accept-Encoding at all (only --compressed adds one), and h2 offered by
    # ALPN over TLS (the default since 7.62 when built with nghttp2); plain http:// stays
    # HTTP/1.1, as our "auto" does.
    ClientShape(
        name="curl",
        user_agent="curl/7.88.1",
        accept="*/*",
        encodings=(),
        http="auto",
    ),
    # A chat page reading the stream: Chrome 142's reduced User-Agent, Accept as
    # EventSource sends it (HTML standard; fetch-based SSE readers set the same),
    # "gzip, deflate, br, zstd" (zstd since Chrome 123), h2 by ALPN (h3 only later, after
    # Alt-Svc). br and zstd are left out while no decoder for them is installed.
    ClientShape(
        name="browser",
        user_agent=(
            "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko)"
            " Chrome/142.0.0.0 Safari/537.36"
        ),
        accept="text/event-stream",
        encodings=("gzip", "deflate", "br", "zstd"),
        http="auto",
    ),
    # promptpath's own plain request (its only behaviour before --as): no compression.
    ClientShape(
        name="identity",
        user_agent=PRODUCT,
        accept=None,
        encodings=("identity",),
        http="auto",
    ),
)


def _shapes() -> dict[ClientName, ClientShape]:
    found = {shape.name: shape for spec in dialects() for shape in spec.shapes}
    found.update((shape.name, shape) for shape in _GENERIC)
    return {name: found[name] for name in CLIENTS}


#: Every --as shape, in the registry's order (a test holds the two to one list).
SHAPES: dict[ClientName, ClientShape] = _shapes()


def user_agent(shape: ClientShape) -> str:
    return shape.user_agent if shape.user_agent == PRODUCT else f"{shape.user_agent} {PRODUCT}"


def request_headers(options: RunOptions) -> list[tuple[str, str]]:
    """The headers of the prompt: the client shape's, the dialect's, the key; -H wins."""
    spec = dialect(options.provider)
    shape = SHAPES[options.client]
    headers: list[tuple[str, str]] = [("content-type", "application/json")]
    accept = spec.stream_type if shape.accept is None else shape.accept
    if accept:
        headers.append(("accept", accept))
    if shape.offered:
        headers.append(("accept-encoding", ", ".join(shape.offered)))
    headers.append(("user-agent", user_agent(shape)))
    headers += spec.version_headers
    headers += shape.extra
    if spec.extra_headers is not None:
        headers += spec.extra_headers(options)
    user_names = {name.lower() for name, _ in options.headers}
    headers = [(n, v) for n, v in headers if n not in user_names]
    # Any credential header given with -H (Azure's api-key too) replaces the key from the
    # environment: two keys in one request would make a 401 ambiguous.
    if not user_names & KEY_HEADERS:
        headers += auth_headers(options.provider, options.api_key, options.api_key_env)
    headers += list(options.headers)
    return headers


def ws_messages(options: RunOptions) -> tuple[str, ...]:
    """The messages a WebSocket dialect sends after the 101, as its plug-in writes them; the
    reference endpoint's controls ride in the last one's ``promptpath``."""
    write = dialect(options.provider).ws_messages
    if write is None:
        raise ValueError(f"the {options.provider} dialect speaks no WebSocket")
    messages = write(options)
    if options.body_controls:
        messages[-1][CONTROLS_FIELD] = dict(options.body_controls)
    return tuple(json.dumps(m) for m in messages)


def ws_headers(options: RunOptions) -> list[tuple[str, str]]:
    """The upgrade GET's own headers (Host, Upgrade, the key are the transport's): the
    openai SDK 3.57 sends Authorization, Accept and Content-Type application/json and its
    User-Agent (observed on loopback; no Accept-Encoding: its websockets client offers
    none, and no OpenAI-Beta header); -H wins."""
    shape = SHAPES[options.client]
    headers = [
        ("accept", shape.accept or "application/json"),
        ("content-type", "application/json"),
        ("user-agent", user_agent(shape)),
    ]
    user_names = {name.lower() for name, _ in options.headers}
    headers = [(n, v) for n, v in headers if n not in user_names]
    if not user_names & KEY_HEADERS:
        headers += auth_headers(options.provider, options.api_key, options.api_key_env)
    return headers + list(options.headers)


def signs(options: RunOptions) -> bool:
    """Whether the request is signed with SigV4: a dialect that takes it (Bedrock), AWS
    credentials, and no key of another kind (a bearer token, or a credential header given
    with -H)."""
    if options.aws is None or options.api_key:
        return False
    if dialect(options.provider).sigv4_service is None:
        return False
    return not {name.lower() for name, _ in options.headers} & KEY_HEADERS


def prepare(options: RunOptions) -> PreparedRequest:
    if options.target.websocket:
        return PreparedRequest(
            method="GET",
            headers=tuple(ws_headers(options)),
            body=b"",
            expects="websocket",
            messages=ws_messages(options),
        )
    spec = dialect(options.provider)
    if spec.body is None:
        raise ValueError(f"the {options.provider} dialect takes a WebSocket's messages only")
    fields = spec.body(options)
    if options.body_controls:
        fields[CONTROLS_FIELD] = dict(options.body_controls)
    body = json.dumps(fields).encode()
    headers = request_headers(options)
    if signs(options) and options.aws is not None and spec.sigv4_service is not None:
        from promptpath.tracer.sigv4 import sigv4_headers

        target = options.target
        default = 443 if target.scheme == "https" else 80
        host = f"[{target.host}]" if ":" in target.host else target.host
        authority = next(
            (v for n, v in headers if n.lower() == "host"),
            host if target.port == default else f"{host}:{target.port}",
        )
        headers += sigv4_headers(
            method="POST",
            scheme=target.scheme,
            authority=authority,
            path=target.path,
            headers=[(n, v) for n, v in headers if n.lower() != "host"],
            body=body,
            credentials=options.aws,
            service=spec.sigv4_service,
        )
    return PreparedRequest(
        method="POST",
        headers=tuple(headers),
        body=body,
        expects=spec.stream_type,
    )


def sent_request(options: RunOptions, prepared: PreparedRequest) -> SentRequest:
    """What ``prepared`` puts on the wire, as the timeline records it (credentials redacted)."""
    shape = SHAPES[options.client]
    return SentRequest(
        method=prepared.method,
        # Key-like query values out by their place, whatever their length.
        path=shown_path(options.target.path),
        headers=tuple(redact_headers(prepared.headers)),
        body_bytes=len(prepared.body) + sum(len(m.encode()) for m in prepared.messages),
        key_sent=carries_key(prepared.headers),
        client=options.client,
        not_offered=shape.not_offered,
        http_preference=shape.http,
    )


def key_sent(options: RunOptions) -> bool:
    """Whether the request carries a key at all (from the environment or from -H), or is
    signed (SigV4)."""
    return signs(options) or carries_key(request_headers(options))


def sent_header(options: RunOptions, name: str) -> str | None:
    """The value the request carries for ``name`` (after -H), or None without one; for a
    WebSocket, the upgrade GET's (no Accept-Encoding: its compression is an extension)."""
    name = name.lower()
    headers = ws_headers(options) if options.target.websocket else request_headers(options)
    return next((v for n, v in headers if n.lower() == name), None)


def offered_encodings(options: RunOptions) -> tuple[str, ...]:
    """Content codings the request accepts besides identity (RFC 9110 Accept-Encoding:
    q=0 refuses one); none without the header, as a client that sent none is not ready
    to decode anything."""
    value = sent_header(options, "accept-encoding") or ""
    offered = []
    for item in value.split(","):
        coding, *params = (part.strip().lower() for part in item.split(";"))
        if coding and coding != "identity" and not any(_refuses(p) for p in params):
            offered.append(coding)
    return tuple(offered)


def _refuses(param: str) -> bool:
    name, _, value = param.partition("=")
    try:
        return name.strip() == "q" and float(value) == 0.0
    except ValueError:
        return False


__all__ = [
    "CONTROLS_FIELD",
    "KEY_HEADERS",  # re-exported from core.headers, where the table lives
    "PRODUCT",
    "SECRET_HEADERS",
    "SHAPES",
    "ClientShape",
    "PreparedRequest",
    "is_secret_header",
    "key_sent",
    "offered_encodings",
    "prepare",
    "redact_headers",
    "request_headers",
    "sent_header",
    "sent_request",
]
