"""Request building per provider dialect: path, headers and JSON body of one streamed prompt."""

from __future__ import annotations

import json
from dataclasses import dataclass

from promptpath.options import Provider, RunOptions

ANTHROPIC_VERSION = "2023-06-01"

#: Headers that carry credentials: never printed, logged or written to JSON.
SECRET_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "proxy-authorization", "cookie", "set-cookie"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedRequest:
    method: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    expects: str  # "text/event-stream" or "application/x-ndjson"


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
    return {
        "model": model,
        "messages": messages,
        "stream": True,
        "options": {"num_predict": max_tokens},
    }


def auth_headers(provider: Provider, api_key: str | None) -> list[tuple[str, str]]:
    if not api_key:
        return []
    if provider == "anthropic":
        return [("x-api-key", api_key)]
    return [("authorization", f"Bearer {api_key}")]


def prepare(options: RunOptions) -> PreparedRequest:
    body = json.dumps(
        build_body(options.provider, options.model, options.prompt, options.max_tokens)
    ).encode()
    expects = "application/x-ndjson" if options.provider == "ollama" else "text/event-stream"
    headers: list[tuple[str, str]] = [
        ("content-type", "application/json"),
        ("accept", expects),
        ("accept-encoding", options.accept_encoding),
        ("user-agent", "promptpath/0.1"),
    ]
    if options.provider == "anthropic":
        headers.append(("anthropic-version", ANTHROPIC_VERSION))
    user_names = {name.lower() for name, _ in options.headers}
    headers = [(n, v) for n, v in headers if n not in user_names]
    if not user_names & {"authorization", "x-api-key"}:
        headers += auth_headers(options.provider, options.api_key)
    headers += list(options.headers)
    return PreparedRequest(method="POST", headers=tuple(headers), body=body, expects=expects)


def is_secret_header(name: str) -> bool:
    """Credentials by name: the well-known ones, and anything that calls itself a key."""
    lowered = name.lower()
    return lowered in SECRET_HEADERS or any(
        word in lowered
        for word in ("auth", "key", "token", "secret", "cookie", "session", "password")
    )


def redact_headers(
    headers: list[tuple[str, str]] | tuple[tuple[str, str], ...],
) -> list[tuple[str, str]]:
    """Headers safe to show: credentials replaced by a marker that keeps only their presence."""
    return [(n, "[redacted]" if is_secret_header(n) else v) for n, v in headers]
