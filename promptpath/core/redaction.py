"""Credentials out of text: every spelling of a secret, and every piece that names it. Pure.

A server or proxy may echo what it was sent anywhere: the key inside an error body, the
``Authorization`` header copied into ``X-Request-Id``, ``Proxy-Authorization`` into a
``Via`` header or a status text. Such text is searched for each secret in the spellings a
message carries (as sent, JSON-escaped, URL-encoded, base64, and a ``Basic`` token's
decoded ``user:password``) and for every run of ``PIECE`` characters of any spelling.

The pieces are what makes redaction hold whatever cut the text short: a snippet limit
that keeps the first 16 characters of a key, a message cut at the front, a key split by
an escape. ``PIECE`` characters of a key identify it (an OpenAI key's 12-character prefix
is what its dashboard shows to tell keys apart), so no output may hold that many in a row;
redacting before truncating is still done where the tracer cuts text, and this is the net
under every other cut.

That search inside arbitrary text has a floor (``MIN_SEARCHED``). Where the text itself
says that a credential follows, length does not matter: a secret of the run, however
short, is taken out after ``Bearer ``/``Basic `` and after a credential's name and ``:``
or ``=`` (an echoed ``x-api-key: Zq7Kp``, ``?api_key=Zq7Kp``, ``"token": "Zq7Kp"``), and
the userinfo of any URL (``http://user:password@host``) is taken out whoever it belongs to.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import quote, quote_plus

MARKER = "[redacted]"

#: Shorter secrets are not searched for inside text. A 4-digit or ``true`` "key" cannot be
#: told from ordinary text: replacing it everywhere corrupts dates, counts and words, and
#: the pattern of what vanished would itself tell the reader the key. Real API keys are far
#: longer; a short one is still kept out of every header, query parameter and proxy URL.
MIN_SEARCHED = 8

#: Any run of this many characters of a secret's spelling is redacted wherever it appears.
PIECE = 12

#: The prefilter's stride: any PIECE-long match holds a GRAM-long run starting at a
#: multiple of GRAM (2 * GRAM - 1 <= PIECE), so text with no such run of a secret holds
#: no piece either, and is passed after len/GRAM set lookups instead of len.
GRAM = 6

#: A SigV4 signature (``Authorization: AWS4-HMAC-SHA256 …, Signature=<64 hex>``, a
#: presigned URL's ``X-Amz-Signature=``): made per request, so no run knows it in advance
#: to search for; its hex after ``Signature=`` is redacted wherever text carries it, however
#: short a cut left it. The credential scope before it (key id, date, region) is not secret.
_SIGNATURE = re.compile(r"(?i)signature=([0-9a-f]{4,})")


#: The userinfo of a URL inside text: whose ever it is, it is a credential's place.
_USERINFO = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://([^\s/?#@\\\"'<>]+)@")

#: Text that says a credential follows, just before a secret of the run: an HTTP
#: authentication scheme, or a credential's name (a header, a query parameter, a JSON
#: key; a version after it, as in ``X-Api-Key-V2``) then ``:`` or ``=``.
_CONTEXT = re.compile(
    r"(?i)(?:\b(?:bearer|basic)\s+"
    r"|(?:key|token|secret|sig|signature|auth|authori[sz]ation|authentication|password|passwd"
    r"|credentials?|code)(?:[-_.]?v?\d+)?[\"']?\s*[:=]\s*[\"']?)$"
)
#: How far back the context is looked for.
_CONTEXT_SPAN = 48
#: Characters that continue a token (RFC 6750's b64token and a URL's unreserved ones): a
#: short secret followed by a run of them holding a letter or a digit is part of a longer
#: word, not the secret.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/")


def _signature_spans(value: str) -> list[tuple[int, int]]:
    if "ignature=" not in value and "IGNATURE=" not in value:  # the cheap test first
        return []
    return [m.span(1) for m in _SIGNATURE.finditer(value)]


def _userinfo_spans(value: str) -> list[tuple[int, int]]:
    if "@" not in value or "://" not in value:  # the cheap test first
        return []
    return [m.span(1) for m in _USERINFO.finditer(value)]


def _structural_spans(value: str) -> list[tuple[int, int]]:
    """What is a credential by its place in any text: a SigV4 signature, URL userinfo."""
    return _signature_spans(value) + _userinfo_spans(value)


def _in_context(value: str, start: int, end: int) -> bool:
    """``value[start:end]`` stands where a credential does: after text that names one,
    and not followed by more of the same token."""
    after = end
    while after < len(value) and value[after] in _TOKEN_CHARS:
        if value[after].isalnum():
            return False  # more of the token: "Zq7Kpxyz" is another word
        after += 1  # punctuation that ends a sentence or a list: "Bearer Zq7Kp."
    return _CONTEXT.search(value[max(0, start - _CONTEXT_SPAN) : start]) is not None


def spellings(value: str) -> set[str]:
    """``value`` as sent, as a JSON string carries it, URL-encoded and base64-encoded; for
    a ``Basic`` credential also the ``user:password`` it encodes and the password."""
    return {s for s in _every_spelling(value) if len(s) >= MIN_SEARCHED}


def _every_spelling(value: str) -> set[str]:
    found = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
    quoted = quote(value, safe="")
    # As a URL or a form carries it: %2F as servers echo it too (%2f), and a space as +.
    found.update((quoted, re.sub("%[0-9A-F]{2}", lambda m: m.group().lower(), quoted)))
    found.add(quote_plus(value, safe=""))
    raw = value.encode("utf-8", "surrogatepass")
    found.add(base64.b64encode(raw).decode())
    found.add(base64.urlsafe_b64encode(raw).decode().rstrip("="))
    scheme, _, token = value.partition(" ")
    if scheme.lower() == "basic" and token:
        found.update(_basic(token.strip()))
    elif " " not in value:
        found.update(_basic(value))  # a bare Basic token, as secret_values also lists it
    return {s for s in found if s}


def _basic(token: str) -> set[str]:
    """The ``user:password`` a Basic token encodes and the password (empty if not one)."""
    try:
        pair = base64.b64decode(token, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return set()
    _user, sep, password = pair.partition(":")
    if not sep or not pair.isprintable():
        return set()
    return {pair, password}


@dataclass(frozen=True, slots=True)
class Redactor:
    """The secrets of one run: whole spellings (``secrets``, longest first) and every
    ``PIECE``-character run of them (``pieces``), the prefilter's ``grams`` and the
    spellings too short to have a piece (``short``); the spellings under
    ``MIN_SEARCHED``, searched only where the text says a credential follows
    (``contextual``). ``keep`` holds words that are never touched when they are a
    string's whole value (the report's own vocabulary)."""

    secrets: tuple[str, ...]
    pieces: frozenset[str] = frozenset()
    keep: frozenset[str] = field(default=frozenset())
    grams: frozenset[str] = frozenset()
    short: tuple[str, ...] = ()
    contextual: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str], keep: frozenset[str] = frozenset()) -> Self:
        found: set[str] = set()
        small: set[str] = set()
        for value in values:
            every = _every_spelling(value)
            searched = {s for s in every if len(s) >= MIN_SEARCHED}
            if len(value) < MIN_SEARCHED:
                searched = set()  # a short key's base64 is as short a clue as the key
            found.update(searched)
            small.update(every - searched)
        pieces = {
            s[i : i + PIECE] for s in found if len(s) >= PIECE for i in range(len(s) - PIECE + 1)
        }
        grams = {p[i : i + GRAM] for p in pieces for i in range(PIECE - GRAM + 1)}
        return cls(
            secrets=tuple(sorted(found, key=len, reverse=True)),
            pieces=frozenset(pieces),
            keep=keep,
            grams=frozenset(grams),
            short=tuple(s for s in found if len(s) < PIECE),
            contextual=tuple(sorted(small, key=len, reverse=True)),
        )

    def __bool__(self) -> bool:
        return bool(self.secrets or self.contextual)

    def spans(self, value: str) -> list[tuple[int, int]]:
        """Where ``value`` holds a secret or a piece of one: merged (start, end) ranges."""
        hits = _structural_spans(value)
        if self.pieces and len(value) >= PIECE and self._may_hold_a_piece(value):
            pieces = self.pieces
            hits.extend(
                (i, i + PIECE)
                for i in range(len(value) - PIECE + 1)
                if value[i : i + PIECE] in pieces
            )
        for secret in self.short:  # the longer ones: their pieces found them
            start = value.find(secret)
            while start != -1:
                hits.append((start, start + len(secret)))
                start = value.find(secret, start + 1)
        for secret in self.contextual:
            start = value.find(secret)
            while start != -1:
                end = start + len(secret)
                if _in_context(value, start, end):
                    hits.append((start, end))
                start = value.find(secret, start + 1)
        if not hits:
            return hits
        hits.sort()
        merged: list[tuple[int, int]] = []
        for start, end in hits:
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        # A piece of "Basic dXNl…" begins with the space before the token: the text's own
        # space stays, only the secret goes.
        trimmed = []
        for start, end in merged:
            while start < end and value[start].isspace():
                start += 1
            while end > start and value[end - 1].isspace():
                end -= 1
            if start < end:
                trimmed.append((start, end))
        return trimmed

    def _may_hold_a_piece(self, value: str) -> bool:
        grams = self.grams
        return any(value[i : i + GRAM] in grams for i in range(0, len(value) - GRAM + 1, GRAM))

    def text(self, value: str) -> str:
        """``value`` with each secret (and each piece of one) replaced by the marker."""
        if value in self.keep or not (self.secrets or self.contextual or _structural_spans(value)):
            # One of promptpath's own words (an enum of the schema: a client shape, a
            # stage, a kind): ours, not data a secret could have leaked into, and blanking
            # part of it would break the report. A key that spells one reveals nothing.
            return value
        spans = self.spans(value)
        if not spans:
            return value
        out, at = [], 0
        for start, end in spans:
            out.append(value[at:start])
            out.append(MARKER)
            at = end
        out.append(value[at:])
        return "".join(out)

    def tree(self, obj: Any) -> Any:
        """A copy of a JSON-ready object with every string value cleaned; keys, numbers,
        booleans and null are never touched, so the result serialises to valid JSON."""
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, dict):
            return self.mapping(obj)
        if isinstance(obj, list | tuple):
            return [self.tree(v) for v in obj]
        return obj

    def mapping(self, obj: dict[str, Any]) -> dict[str, Any]:
        return {k: self.tree(v) for k, v in obj.items()}


__all__ = ["MARKER", "MIN_SEARCHED", "PIECE", "Redactor", "spellings"]
