"""Secrets out of the report by structure: string values are cleaned, never the serialised text.

Credentials sit in known places (credential headers, key-like query parameters, proxy
userinfo) and those places are redacted where the report shows them. A server may also
echo the key inside a string (an error body, an exception message); those strings are
searched for the secrets below. Replacing inside serialised JSON is what this replaces:
it turned ``"ok": true`` into ``"ok": [redacted]`` when a secret was ``true``.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

from promptpath.core.headers import is_secret_header
from promptpath.options import RunOptions, is_secret_query

MARKER = "[redacted]"

#: Shorter secrets are not searched for inside text. A 4-digit or ``true`` "key" cannot be
#: told from ordinary text: replacing it everywhere corrupts dates, counts and words, and
#: the pattern of what vanished would itself tell the reader the key. Real API keys are far
#: longer; a short one is still kept out of every header, query parameter and proxy URL.
MIN_SEARCHED = 8


@dataclass(frozen=True, slots=True)
class Redactor:
    """The secrets of one run, longest first, in every spelling a message may carry."""

    secrets: tuple[str, ...]

    @classmethod
    def for_options(cls, options: RunOptions) -> Redactor:
        return cls.of(secret_values(options))

    @classmethod
    def of(cls, values: list[str]) -> Redactor:
        spellings: set[str] = set()
        for value in values:
            if len(value) < MIN_SEARCHED:
                continue
            # As sent, as a JSON body quotes it, and as a URL carries it.
            spellings.update((value, json.dumps(value)[1:-1], quote(value, safe="")))
        return cls(tuple(sorted(spellings, key=len, reverse=True)))

    def text(self, value: str) -> str:
        if value in vocabulary():
            # One of promptpath's own words (an enum of the schema: a client shape, a
            # stage, a kind): ours, not data a secret could have leaked into, and blanking
            # part of it would break the report. A key that spells one reveals nothing.
            return value
        for secret in self.secrets:
            value = value.replace(secret, MARKER)
        return value

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


@functools.cache
def vocabulary() -> frozenset[str]:
    """Every string an enum of report/schema.json allows: words promptpath itself writes."""
    schema = json.loads(Path(__file__).with_name("schema.json").read_text())
    words: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "enum" and isinstance(value, list):
                    words.update(v for v in value if isinstance(v, str))
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return frozenset(words)


def secret_values(options: RunOptions) -> list[str]:
    """Values that must never be shown: the key, credential headers and query values, and
    the proxy's credentials."""
    values = [options.api_key] if options.api_key else []
    for name, value in options.headers:
        if is_secret_header(name) and value:
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
    return [v for v in values if v]


def headers_json(headers: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Headers as a JSON object, credential values replaced by the marker."""
    return {k: MARKER if is_secret_header(k) else v for k, v in headers}
