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


def _signature_spans(value: str) -> list[tuple[int, int]]:
    if "ignature=" not in value and "IGNATURE=" not in value:  # the cheap test first
        return []
    return [m.span(1) for m in _SIGNATURE.finditer(value)]


def spellings(value: str) -> set[str]:
    """``value`` as sent, as a JSON string carries it, URL-encoded and base64-encoded; for
    a ``Basic`` credential also the ``user:password`` it encodes and the password."""
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
    return {s for s in found if len(s) >= MIN_SEARCHED}


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
    spellings too short to have a piece (``short``). ``keep`` holds words that are never
    touched when they are a string's whole value (the report's own vocabulary)."""

    secrets: tuple[str, ...]
    pieces: frozenset[str] = frozenset()
    keep: frozenset[str] = field(default=frozenset())
    grams: frozenset[str] = frozenset()
    short: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str], keep: frozenset[str] = frozenset()) -> Self:
        found: set[str] = set()
        for value in values:
            if len(value) >= MIN_SEARCHED:
                found.update(spellings(value))
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
        )

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def spans(self, value: str) -> list[tuple[int, int]]:
        """Where ``value`` holds a secret or a piece of one: merged (start, end) ranges."""
        hits = _signature_spans(value)
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
        if value in self.keep or not (self.secrets or _signature_spans(value)):
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
