"""What one plug-in says about its API: the shape every ``dialects/<name>/`` fills in.

A ``DialectSpec`` puts side by side what promptpath knows of one API: how a URL names it,
its key variables and how the key is sent, the model to ask for, the request body and
headers its official SDK sends (and that SDK's ``--as`` shape), whether it speaks
WebSocket, the stream decoder that reads it, and the reference endpoint's emulation of it
(a ``server.dialect.Dialect`` in the plug-in's ``emulation.py``, named here and loaded only
by the server). The code that uses these facts (detection in ``plugins.py``, the request
in ``tracer/request.py``, the server's routing in ``server/routing.py``) holds no table of
its own and asks no dialect by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from promptpath.core.media import DECODABLE
from promptpath.dialects.registry import ClientName, Provider
from promptpath.options import HTTPChoice, RunOptions
from promptpath.streams.dialect_base import DialectDecoder

__all__ = [
    "JSON",
    "ClientShape",
    "DialectSpec",
    "DocRow",
    "Headers",
    "cache_split",
    "httpx_client",
    "model_named_in_path",
]

JSON = dict[str, object]
Headers = list[tuple[str, str]]


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


@dataclass(frozen=True, slots=True, kw_only=True)
class DocRow:
    """One row of the docs' dialect table (docs/options.md: dialects/doctable.py writes
    it), each cell Markdown."""

    detection: str  # the paths (or URLs) that name the dialect
    auth: str  # how the key is sent
    keys: str  # the variables it is read from
    end: str  # what ends the stream
    #: Words after the dialect's name in the first cell (`` over WebSocket``).
    qualifier: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class DialectSpec:
    """One API's plug-in: every fact about it that the rest of promptpath reads."""

    name: Provider
    #: The API in words, for messages ("Amazon Bedrock").
    title: str
    # -- the URL ---------------------------------------------------------------------------
    #: Paths that say more than their last segment, tried before every dialect's suffixes
    #: (Azure's /chat/completions would otherwise read as plain OpenAI).
    path_patterns: tuple[re.Pattern[str], ...] = ()
    #: Paths that match a pattern of this dialect but belong to another (Vertex AI's end
    #: as AI Studio's do, after a project and a location).
    path_excludes: tuple[re.Pattern[str], ...] = ()
    #: Path suffixes, tried after every dialect's patterns.
    path_suffixes: tuple[str, ...] = ()
    #: The model (or deployment) the path names, for APIs whose path names one.
    model_in_path: Callable[[str], str | None] | None = None
    #: The model asked for when neither --model nor the path names one.
    default_model: str
    # -- the key ---------------------------------------------------------------------------
    #: The variable the API key is read from (None: none of its own, --api-key-env names one).
    key_env: str | None
    #: Variables read, in order, when ``key_env`` is unset (the SDK's own order).
    key_fallbacks: tuple[str, ...] = ()
    #: The header the key goes in (None: ``Authorization: Bearer``).
    key_header: str | None = None
    #: Key variables whose value is a bearer token even where the API's key has a header of
    #: its own (Azure: api-key for a key, Authorization: Bearer for an Entra token).
    bearer_key_envs: frozenset[str] = frozenset()
    #: The AWS signing name when the request may be signed with SigV4 (AWS credentials and
    #: no key of another kind), else None.
    sigv4_service: str | None = None
    # -- the request -----------------------------------------------------------------------
    #: The --as shape of the client most people reach this API with (its official SDK).
    client: ClientName
    #: The shapes of the clients this plug-in defines (its SDK's), named in the registry.
    shapes: tuple[ClientShape, ...] = ()
    #: The JSON body of one streamed prompt, as the official SDK sends it (None: the API
    #: takes no plain HTTP request, only a WebSocket's messages).
    body: Callable[[RunOptions], JSON] | None
    #: The media type the stream comes in: what Accept asks for unless the shape says.
    stream_type: str = "text/event-stream"
    #: Headers the API's version needs, sent after the User-Agent, before the shape's own.
    version_headers: tuple[tuple[str, str], ...] = ()
    #: The API caches only a prefix the request marks (Anthropic's ``cache_control``,
    #: Converse's ``cachePoint``: the mark's name, as evidence and docs say it); ``body``
    #: then marks the prompt's first ``RunOptions.cache_prefix`` characters. None: the API
    #: caches by itself (OpenAI, Gemini) or not at all, and ``body`` ignores the field.
    cache_mark: str | None = None
    #: Headers of the request's own after the shape's (Bedrock's guardrail, its Accept).
    extra_headers: Callable[[RunOptions], Headers] | None = None
    #: The API takes --guardrail (a provider-side check of the answer).
    guardrails: bool = False
    #: The request turns on a check at the provider that holds the answer back and
    #: releases it in batches (Bedrock's guardrail in its synchronous mode).
    holds_answer: Callable[[RunOptions], bool] | None = None
    #: The messages a WebSocket sends after the 101 (the last one carries the reference
    #: endpoint's controls); None: the API speaks no WebSocket.
    ws_messages: Callable[[RunOptions], list[JSON]] | None = None
    #: Why a plain http(s):// URL cannot reach it, when the API is WebSocket only.
    websocket_only: str | None = None
    # -- the stream ------------------------------------------------------------------------
    #: A fresh decoder of this API's events (one per stream: a decoder may keep state).
    decoder: Callable[[], DialectDecoder]
    # -- telemetry -------------------------------------------------------------------------
    #: gen_ai.provider.name: the well-known value of OpenTelemetry's GenAI conventions
    #: (gen-ai-metrics.md), or a custom one where it has none (Ollama's, which MAY be used).
    otel_provider: str
    #: gen_ai.operation.name when the API has one of its own (None: ``chat``, or
    #: ``text_completion`` on a legacy completions path).
    otel_operation: str | None = None
    # -- the reference endpoint ------------------------------------------------------------
    #: How ``promptpath serve`` speaks it: the name of a ``server.dialect.Dialect`` (one
    #: instance per response) in the plug-in's ``emulation.py``, imported only when the
    #: reference endpoint routes to it (``plugins.emulation``): a client run leaves it be.
    emulation: str
    #: The path ``promptpath demo --provider NAME`` asks the reference endpoint at (None:
    #: the demo does not offer it).
    demo_path: str | None = None
    # -- the docs --------------------------------------------------------------------------
    #: Its rows of the dialect table in docs/options.md (a test holds the docs to them).
    docs: tuple[DocRow, ...]

    def matches(self, bare: str) -> bool:
        """``bare`` (a path without its query) is this dialect's by one of its patterns."""
        return any(p.search(bare) for p in self.path_patterns) and not any(
            p.search(bare) for p in self.path_excludes
        )


def cache_split(options: RunOptions) -> tuple[str, str] | None:
    """The prompt cut where its prefix to cache ends (``RunOptions.cache_prefix``): the
    part to mark and the rest ("" when the whole prompt is marked); None: no mark."""
    n = options.cache_prefix
    if n <= 0 or not options.prompt:
        return None
    return options.prompt[:n], options.prompt[n:]


def httpx_client(
    name: ClientName,
    user_agent: str,
    *,
    accept: str = "application/json",
    extra: tuple[tuple[str, str], ...] = (),
) -> ClientShape:
    """The shape of an SDK on httpx, as the official ones are (openai's, anthropic's,
    ollama's, google-genai's, cohere's).

    httpx offers the encodings it has decoders for: gzip and deflate always, br and zstd
    only when the brotli/zstandard packages happen to be installed (not by default), and
    HTTP/1.1 only unless the application builds its client with http2=True (ALPN then
    offers h2 too). The SDKs send Accept: application/json even for a stream; some send
    headers of build and platform facts (x-stainless-*, X-Fern-Runtime) that are left out:
    no hop we know of treats a stream by them.
    """
    return ClientShape(
        name=name,
        user_agent=user_agent,
        accept=accept,
        encodings=("gzip", "deflate"),
        http="1.1",
        extra=extra,
    )


_MODEL_IN_PATH = re.compile(r"/(?:models|tunedModels|deployments)/([^/:?]+)")


def model_named_in_path(path: str) -> str | None:
    """The model (Gemini, Vertex) or deployment (Azure) segment of a path, if it has one."""
    found = _MODEL_IN_PATH.search(path.split("?", 1)[0])
    return found.group(1) if found else None
