"""Which headers carry credentials: the one table every layer reads (the tracer counts a
key in a request with it, reporters and exports redact with it)."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: What a credential's value is replaced by wherever a report shows it.
REDACTED = "[redacted]"

#: Headers that carry the API key, in any of the dialects' spellings.
KEY_HEADERS = frozenset({"authorization", "x-api-key", "api-key"})

#: Headers that carry credentials: never printed, logged or written to JSON.
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "apikey",
        "cookie",
        "set-cookie",
        "x-auth",
        "x-csrf-token",
        "x-xsrf-token",
    }
)
#: The last word of a header name that makes it a credential (``X-Goog-Api-Key``,
#: ``x-amz-security-token``). Whole words only: ``x-promptpath-tokens`` counts tokens and
#: ``X-Session-Sticky`` pins a route; redacting either would hide data, not a secret.
_SECRET_LAST_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "authorization", "credentials"}
)


def is_secret_header(name: str) -> bool:
    """Credentials by name: the well-known ones, and names whose last word says key/token/secret."""
    lowered = name.lower()
    return lowered in SECRET_HEADERS or re.split(r"[-_.]", lowered)[-1] in _SECRET_LAST_WORDS


def redact_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers safe to show: credentials replaced by a marker that keeps only their presence."""
    return [(n, REDACTED if is_secret_header(n) else v) for n, v in headers]


def carries_key(headers: Iterable[tuple[str, str]]) -> bool:
    """Whether these (unredacted) headers carry an API key at all."""
    return any(n.lower() in KEY_HEADERS and v.strip() for n, v in headers)


__all__ = [
    "KEY_HEADERS",
    "REDACTED",
    "SECRET_HEADERS",
    "carries_key",
    "is_secret_header",
    "redact_headers",
]
