"""Which headers carry credentials: the one table every layer reads (the tracer counts a
key in a request with it, reporters and exports redact with it)."""

from __future__ import annotations

import re
from collections.abc import Iterable

#: What a credential's value is replaced by wherever a report shows it.
REDACTED = "[redacted]"

#: Headers that carry the API key, in any of the dialects' spellings.
KEY_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "x-goog-api-key"})

#: Headers that carry credentials: never printed, logged or written to JSON.
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "apikey",
        "x-goog-api-key",
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
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "authorization",
        "authentication",
        "credentials",
    }
)
#: A version after the last word (``X-Api-Key-V2``, ``api-key-2``) does not change what
#: the header carries.
_VERSION_WORD = re.compile(r"v?\d+")

#: A value in an HTTP authentication scheme that carries the credential itself (RFC 9110
#: section 11: ``Bearer <token>``, ``Basic <base64 user:password>``): a credential
#: whatever the header is called (``Authentication: Bearer …``).
_CREDENTIAL_VALUE = re.compile(r"(?i)\s*(?:bearer|basic)\s+\S")


def is_secret_header(name: str) -> bool:
    """Credentials by name: the well-known ones, and names whose last word (a version
    after it aside) says key/token/secret."""
    lowered = name.lower()
    if lowered in SECRET_HEADERS:
        return True
    words = re.split(r"[-_.]", lowered)
    while len(words) > 1 and _VERSION_WORD.fullmatch(words[-1]):
        words.pop()
    return words[-1] in _SECRET_LAST_WORDS


#: Challenges name a scheme and its parameters (``Bearer realm="api", error=…``), not a
#: credential: what a server says there is worth reading (text a hop echoed into one is
#: still searched for the run's secrets, as all text is).
_CHALLENGES = frozenset({"www-authenticate", "proxy-authenticate"})


def is_credential(name: str, value: str) -> bool:
    """A header that carries a credential: by its name (``is_secret_header``), or by its
    value, which starts with ``Bearer `` or ``Basic `` whatever the name (a challenge
    aside)."""
    if is_secret_header(name):
        return True
    return _CREDENTIAL_VALUE.match(value) is not None and name.lower() not in _CHALLENGES


def redact_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers safe to show: credentials replaced by a marker that keeps only their presence."""
    return [(n, REDACTED if is_credential(n, v) else v) for n, v in headers]


def carries_key(headers: Iterable[tuple[str, str]]) -> bool:
    """Whether these (unredacted) headers carry an API key at all."""
    return any(n.lower() in KEY_HEADERS and v.strip() for n, v in headers)


__all__ = [
    "KEY_HEADERS",
    "REDACTED",
    "SECRET_HEADERS",
    "carries_key",
    "is_credential",
    "is_secret_header",
    "redact_headers",
]
