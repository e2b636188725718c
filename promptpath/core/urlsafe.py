"""URLs as promptpath shows them: userinfo, key-like query values and the fragment out. Pure.

A URL carries credentials in known places: its userinfo (``http://user:password@host``,
which HTTP clients turn into ``Authorization: Basic``), query parameters named for a key
(Google's ``?key=``, a presigned ``X-Amz-Signature=``) and, never sent but often pasted, a
fragment (``#token=…``, ``#access_token=…`` from an OAuth redirect). Each is taken out by
its place, whatever the value's length: a 5-character key is still a key.

The functions here work on the text as given, with no parser that could refuse it: a URL
that is not valid (the very input a usage error quotes) is shown safely too. What is
kept stays byte for byte as it was written (no re-encoding of the query).
"""

from __future__ import annotations

import base64
import re
from urllib.parse import unquote, unquote_plus

from promptpath.core.redaction import MARKER

#: Query parameters whose values are credentials (e.g. Google's ?key=): generous, since
#: only the shown URL loses the value.
SECRET_QUERY_WORDS = ("key", "token", "secret", "sig", "signature", "auth", "password", "code")

#: scheme "://" at the start of a URL (RFC 3986 section 3.1).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def is_secret_query(name: str) -> bool:
    """A query parameter whose value is a credential."""
    return any(word in name.lower() for word in SECRET_QUERY_WORDS)


def redact_query(query: str) -> str:
    """``query`` (without its ``?``) with the value of every key-like parameter replaced
    by the marker; the rest as written."""
    pieces = []
    for piece in query.split("&"):
        name, sep, _value = piece.partition("=")
        if sep and is_secret_query(unquote_plus(name)):
            piece = f"{name}={MARKER}"
        pieces.append(piece)
    return "&".join(pieces)


def shown_path(path: str) -> str:
    """A request target (path and query) safe to show: key-like query values replaced,
    any fragment dropped."""
    path = path.partition("#")[0]
    bare, sep, query = path.partition("?")
    return f"{bare}?{redact_query(query)}" if sep else bare


def _split_authority(url: str) -> tuple[str, str, str]:
    """(scheme and ``//``, authority, rest) of ``url``; no ``//``: ("", "", url)."""
    found = _SCHEME.match(url)
    if found is None:
        if url.startswith("//"):
            head = "//"
        else:
            return "", "", url
    else:
        head = found.group()
    after = url[len(head) :]
    end = next((i for i, c in enumerate(after) if c in "/?#"), len(after))
    return head, after[:end], after[end:]


def shown_url(url: str) -> str:
    """``url`` safe to show: userinfo replaced by the marker, key-like query values
    replaced, the fragment dropped. Never raises, whatever the text."""
    head, authority, rest = _split_authority(url.partition("#")[0])
    if "@" in authority:
        authority = MARKER + "@" + authority.rpartition("@")[2]
    return head + authority + shown_path(rest)


def shown_authority(value: str) -> str:
    """A ``[user[:password]@]host[:port]`` (a proxy given without a scheme, as curl takes
    it), or a whole URL, safe to show."""
    if "://" in value or value.startswith("//"):
        return shown_url(value)
    host_part, sep, rest = value.partition("/")
    if "@" in host_part:
        host_part = MARKER + "@" + host_part.rpartition("@")[2]
    return host_part + sep + shown_path(rest) if sep else host_part


def url_credentials(url: str) -> list[str]:
    """Every spelling of the credentials ``url``'s userinfo holds: the userinfo as written
    and decoded, the password, and the Basic token an HTTP client makes of them (the
    user name alone is no secret, but it is kept out with the rest)."""
    _head, authority, _rest = _split_authority(url.partition("#")[0])
    if "@" not in authority:
        return []
    userinfo = authority.rpartition("@")[0]
    user, _, password = userinfo.partition(":")
    pair = f"{unquote(user)}:{unquote(password)}"
    token = base64.b64encode(pair.encode("utf-8", "surrogatepass")).decode()
    found = [userinfo, pair, unquote(password), password, token, f"Basic {token}"]
    return [value for value in dict.fromkeys(found) if value]


__all__ = [
    "MARKER",
    "SECRET_QUERY_WORDS",
    "is_secret_query",
    "redact_query",
    "shown_authority",
    "shown_path",
    "shown_url",
    "url_credentials",
]
