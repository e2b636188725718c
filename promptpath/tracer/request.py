"""Request building per provider dialect: path, headers and JSON body of one streamed prompt."""

from __future__ import annotations

import json
import platform
from dataclasses import dataclass

from promptpath.core.headers import (
    KEY_HEADERS,
    SECRET_HEADERS,
    carries_key,
    is_secret_header,
    redact_headers,
)
from promptpath.core.media import EVENTSTREAM
from promptpath.core.timeline import SentRequest
from promptpath.core.urlsafe import shown_path
from promptpath.options import (
    BEARER_KEY_ENVS,
    BEDROCK_PROVIDERS,
    ClientName,
    HTTPChoice,
    Provider,
    RunOptions,
)
from promptpath.tracer.ingest import DECODABLE

ANTHROPIC_VERSION = "2023-06-01"
#: The "anthropic_version" Claude on Bedrock's invoke APIs requires in the body.
BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"
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


def build_body(provider: Provider, model: str, prompt: str, max_tokens: int) -> dict[str, object]:
    messages = [{"role": "user", "content": prompt}]
    if provider == "openai":
        return {
            "model": model,
            "messages": messages,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    if provider == "responses":
        return {"model": model, "input": prompt, "max_output_tokens": max_tokens, "stream": True}
    if provider == "anthropic":
        return {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True}
    if provider in ("gemini", "vertex"):
        # google-genai 3.6.1, observed on loopback: the model is in the path, the stream is
        # asked for by the path (:streamGenerateContent?alt=sse), not by the body.
        return {
            "contents": [{"parts": [{"text": prompt}], "role": "user"}],
            "generationConfig": {"maxOutputTokens": max_tokens},
        }
    if provider == "azure":
        # openai's AzureOpenAI sends the chat body unchanged (the deployment as "model").
        return build_body("openai", model, prompt, max_tokens)
    if provider == "bedrock":
        # boto3 1.44.8 converse_stream(modelId=M, messages=[...], inferenceConfig=...),
        # observed on loopback: the model is in the path, the body only this.
        return {
            "messages": [{"role": "user", "content": [{"text": prompt}]}],
            "inferenceConfig": {"maxTokens": max_tokens},
        }
    if provider == "bedrock-invoke":
        # invoke_model_with_response_stream sends the body the caller wrote, verbatim:
        # Anthropic's Messages body as Bedrock takes it (anthropic_version, no model).
        return {
            "anthropic_version": BEDROCK_ANTHROPIC_VERSION,
            "max_tokens": max_tokens,
            "messages": messages,
        }
    if provider == "cohere":
        # cohere 7.3.1 ClientV2.chat_stream, observed on loopback: the fields not given are
        # left out, "stream": true last.
        return {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": True}
    return {
        "model": model,
        "messages": messages,
        "stream": True,
        "options": {"num_predict": max_tokens},
    }


def auth_headers(
    provider: Provider, api_key: str | None, key_env: str | None = None
) -> list[tuple[str, str]]:
    if not api_key:
        return []
    if provider == "anthropic":
        return [("x-api-key", api_key)]
    if provider == "gemini":
        return [("x-goog-api-key", api_key)]
    if provider == "azure" and key_env not in BEARER_KEY_ENVS:
        return [("api-key", api_key)]
    return [("authorization", f"Bearer {api_key}")]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientShape:
    """What one HTTP client puts on a streamed prompt, as read in its own source."""

    name: ClientName
    user_agent: str  # the client's own User-Agent (PRODUCT is appended when sent)
    accept: str | None  # None: the dialect's stream type (text/event-stream or NDJSON); "": none
    encodings: tuple[str, ...]  # its Accept-Encoding, in its order; (): it sends none
    http: HTTPChoice  # the HTTP version it speaks when --http is not given
    #: Headers of its own it sends on every request (after User-Agent), e.g. its SDK name.
    extra: tuple[tuple[str, str], ...] = ()

    @property
    def offered(self) -> tuple[str, ...]:
        """The encodings we offer for it: only those the ingest can decode (a shape never
        asks for a stream promptpath could not read)."""
        return tuple(e for e in self.encodings if e in DECODABLE or e == "identity")

    @property
    def not_offered(self) -> tuple[str, ...]:
        """Encodings the real client offers that we leave out (no decoder installed)."""
        return tuple(e for e in self.encodings if e not in self.offered)


#: google-genai 3.6.1 sends its User-Agent as x-goog-api-client too.
_GENAI = f"google-genai-sdk/3.6.1 gl-python/{platform.python_version()}"

#: Both official SDKs (and ollama's) ride on httpx, which offers the encodings it has
#: decoders for: gzip and deflate always, br and zstd only when the brotli/zstandard
#: packages happen to be installed (not by default), and HTTP/1.1 only unless the
#: application builds its client with http2=True (ALPN then offers h2 too). The
#: SDKs send Accept: application/json even for a stream, and x-stainless-* headers
#: (build and platform facts) that we leave out: no hop we know of treats a stream by them.
SHAPES: dict[ClientName, ClientShape] = {
    # openai 3.57.0: _base_client.py default_headers and user_agent ("OpenAI/Python" +
    # version), on httpx2 2.16.2 (Client(http2=False), Accept-Encoding from its decoders);
    # the same headers as openai 1.95.1 on httpx 0.28. Observed on loopback: "Accept-
    # Encoding: gzip, deflate", "accept: application/json", HTTP/1.1.
    "openai-python": ClientShape(
        name="openai-python",
        user_agent="OpenAI/Python 3.57.0",
        accept="application/json",
        encodings=("gzip", "deflate"),
        http="1.1",
    ),
    # anthropic 2.14.0: the same Stainless base client ("Anthropic/Python" + version) on
    # httpx2 2.16.2; observed: the same Accept and Accept-Encoding, HTTP/1.1.
    "anthropic-python": ClientShape(
        name="anthropic-python",
        user_agent="Anthropic/Python 2.14.0",
        accept="application/json",
        encodings=("gzip", "deflate"),
        http="1.1",
    ),
    # ollama 0.6.1: ollama/_client.py BaseClient sets Accept: application/json and
    # "ollama-python/VERSION (MACHINE SYSTEM) Python/VERSION" on an httpx 0.28 client
    # (gzip, deflate; HTTP/1.1). The platform part is this machine's, as the SDK's would be.
    "ollama-python": ClientShape(
        name="ollama-python",
        user_agent=(
            f"ollama-python/0.6.1 ({platform.machine()} {platform.system().lower()})"
            f" Python/{platform.python_version()}"
        ),
        accept="application/json",
        encodings=("gzip", "deflate"),
        http="1.1",
    ),
    # google-genai 3.6.1 (_api_client.py append_library_version_headers) on httpx2, observed
    # on loopback: "user-agent" and "x-goog-api-client" both "google-genai-sdk/3.6.1
    # gl-python/3.11.7" (the Python version is this machine's, as the SDK's would be),
    # "Accept: */*", "Accept-Encoding: gzip, deflate", HTTP/1.1.
    "google-genai": ClientShape(
        name="google-genai",
        user_agent=_GENAI,
        accept="*/*",
        encodings=("gzip", "deflate"),
        http="1.1",
        extra=(("x-goog-api-client", _GENAI),),
    ),
    # boto3 1.44.8 / botocore 1.44.8 (bedrock-runtime converse_stream and
    # invoke_model_with_response_stream), observed on loopback: no Accept header at all
    # (invoke adds X-Amzn-Bedrock-Accept), "Accept-Encoding: identity" (urllib3 through
    # http.client), HTTP/1.1 only, and a User-Agent of SDK, OS, language and config
    # tokens. Left out: the per-call feature list (m/...) and amz-sdk-invocation-id /
    # amz-sdk-request (retry bookkeeping no hop treats a stream by).
    "boto3": ClientShape(
        name="boto3",
        user_agent=(
            "Boto3/1.44.8 md/Botocore#1.44.8 ua/2.1"
            f" os/{platform.system().lower()}#{platform.release()}"
            f" md/arch#{platform.machine().lower()} lang/python#{platform.python_version()}"
            " md/pyimpl#CPython cfg/retry-mode#standard Botocore/1.44.8"
        ),
        accept="",
        encodings=("identity",),
        http="1.1",
    ),
    # cohere 7.3.1 (core/client_wrapper.py get_headers) on httpx 0.28, observed on loopback:
    # "User-Agent: cohere/7.3.1", "Accept: */*", "Accept-Encoding: gzip, deflate", HTTP/1.1,
    # and Fern's X-Fern-* build headers. Those naming the SDK are sent; X-Fern-Runtime and
    # X-Fern-Platform (this machine's Python and kernel release) are left out, as the
    # x-stainless-* ones are: no hop we know of treats a stream by them.
    "cohere": ClientShape(
        name="cohere",
        user_agent="cohere/7.3.1",
        accept="*/*",
        encodings=("gzip", "deflate"),
        http="1.1",
        extra=(
            ("x-fern-language", "Python"),
            ("x-fern-sdk-name", "cohere"),
            ("x-fern-sdk-version", "7.3.1"),
        ),
    ),
    # curl 7.88.1 (Debian 12), as `curl URL -d ...` runs it, observed on loopback: "Accept:
    # */*", no Accept-Encoding at all (only --compressed adds one), and h2 offered by
    # ALPN over TLS (the default since 7.62 when built with nghttp2); plain http:// stays
    # HTTP/1.1, as our "auto" does.
    "curl": ClientShape(
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
    "browser": ClientShape(
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
    "identity": ClientShape(
        name="identity",
        user_agent=PRODUCT,
        accept=None,
        encodings=("identity",),
        http="auto",
    ),
}


def user_agent(shape: ClientShape) -> str:
    return shape.user_agent if shape.user_agent == PRODUCT else f"{shape.user_agent} {PRODUCT}"


def stream_type(provider: Provider) -> str:
    if provider in BEDROCK_PROVIDERS:
        return EVENTSTREAM
    return "application/x-ndjson" if provider == "ollama" else "text/event-stream"


def request_headers(options: RunOptions) -> list[tuple[str, str]]:
    """The headers of the prompt: the client shape's, the dialect's, the key; -H wins."""
    shape = SHAPES[options.client]
    headers: list[tuple[str, str]] = [("content-type", "application/json")]
    accept = stream_type(options.provider) if shape.accept is None else shape.accept
    if accept:
        headers.append(("accept", accept))
    if shape.offered:
        headers.append(("accept-encoding", ", ".join(shape.offered)))
    headers.append(("user-agent", user_agent(shape)))
    if options.provider == "anthropic":
        headers.append(("anthropic-version", ANTHROPIC_VERSION))
    headers += shape.extra
    if options.provider == "bedrock-invoke":
        # the `accept` argument of invoke_model_with_response_stream: the payloads' type
        headers.append(("x-amzn-bedrock-accept", "application/json"))
        if options.guardrail is not None:  # its guardrailIdentifier/guardrailVersion
            headers.append(("x-amzn-bedrock-guardrailidentifier", options.guardrail.identifier))
            headers.append(("x-amzn-bedrock-guardrailversion", options.guardrail.version))
    user_names = {name.lower() for name, _ in options.headers}
    headers = [(n, v) for n, v in headers if n not in user_names]
    # Any credential header given with -H (Azure's api-key too) replaces the key from the
    # environment: two keys in one request would make a 401 ambiguous.
    if not user_names & KEY_HEADERS:
        headers += auth_headers(options.provider, options.api_key, options.api_key_env)
    headers += list(options.headers)
    return headers


def ws_messages(options: RunOptions) -> tuple[str, ...]:
    """The messages a WebSocket dialect sends after the 101, as the openai SDK 3.57 sends
    them (observed on loopback): the Responses API's WebSocket mode one
    ``{"type": "response.create", ...}`` with the request's fields at the top level, no
    ``stream``; Realtime the user's turn (``conversation.item.create``) and a text-only
    ``response.create``. The reference endpoint's controls ride in each's ``promptpath``."""
    controls: dict[str, object] = (
        {CONTROLS_FIELD: dict(options.body_controls)} if options.body_controls else {}
    )
    if options.provider == "realtime":
        item: dict[str, object] = {
            "type": "conversation.item.create",
            "item": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": options.prompt}],
            },
        }
        create: dict[str, object] = {
            "type": "response.create",
            "response": {"output_modalities": ["text"], "max_output_tokens": options.max_tokens},
            **controls,
        }
        return json.dumps(item), json.dumps(create)
    create = {
        "type": "response.create",
        "model": options.model,
        "input": options.prompt,
        "max_output_tokens": options.max_tokens,
        **controls,
    }
    return (json.dumps(create),)


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
    """Whether the request is signed with SigV4: Bedrock with AWS credentials and no key
    of another kind (a bearer token, or a credential header given with -H)."""
    if options.aws is None or options.api_key:
        return False
    return not {name.lower() for name, _ in options.headers} & KEY_HEADERS


def _guardrail_fields(options: RunOptions) -> dict[str, object]:
    """The body's part of a guardrail: converse's guardrailConfig, invoke's async mode."""
    rail = options.guardrail
    if rail is None:
        return {}
    if options.provider == "bedrock":
        return {
            "guardrailConfig": {
                "guardrailIdentifier": rail.identifier,
                "guardrailVersion": rail.version,
                "streamProcessingMode": rail.mode,
            }
        }
    if rail.mode == "async":
        return {"amazon-bedrock-guardrailConfig": {"streamProcessingMode": "asynchronous"}}
    return {}


def prepare(options: RunOptions) -> PreparedRequest:
    if options.target.websocket:
        return PreparedRequest(
            method="GET",
            headers=tuple(ws_headers(options)),
            body=b"",
            expects="websocket",
            messages=ws_messages(options),
        )
    fields = build_body(options.provider, options.model, options.prompt, options.max_tokens)
    fields.update(_guardrail_fields(options))
    if options.body_controls:
        fields[CONTROLS_FIELD] = dict(options.body_controls)
    body = json.dumps(fields).encode()
    headers = request_headers(options)
    if signs(options) and options.aws is not None:
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
        )
    return PreparedRequest(
        method="POST",
        headers=tuple(headers),
        body=body,
        expects=stream_type(options.provider),
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
    "ANTHROPIC_VERSION",
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
