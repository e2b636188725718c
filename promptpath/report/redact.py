"""Secrets out of the report by structure: string values are cleaned, never the serialised text.

Credentials sit in known places (credential headers, key-like query parameters, proxy
userinfo) and those places are redacted where the report shows them. A server may also
echo the key inside a string (an error body, an exception message, a header copied into
another); every string of every output is searched for the secrets and their spellings
(core/redaction.py). Replacing inside serialised JSON is what this replaces: it turned
``"ok": true`` into ``"ok": [redacted]`` when a secret was ``true``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Self

from promptpath.core import redaction
from promptpath.core.headers import is_credential
from promptpath.core.redaction import MARKER, MIN_SEARCHED, PIECE
from promptpath.options import RunOptions, secret_values


class Redactor(redaction.Redactor):
    """core's Redactor, built from a run's options, leaving the report's own words whole."""

    __slots__ = ()

    @classmethod
    def for_options(cls, options: RunOptions) -> Redactor:
        # One per set of secrets: a series' runs share theirs, and building the pieces of
        # a long key costs more than cleaning a run's whole report.
        return _for_values(tuple(secret_values(options)))

    @classmethod
    def of(cls, values: Iterable[str], keep: frozenset[str] | None = None) -> Self:
        return super().of(values, keep=vocabulary() if keep is None else keep)


@functools.lru_cache(maxsize=8)
def _for_values(values: tuple[str, ...]) -> Redactor:
    return Redactor.of(values)


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


def headers_json(headers: list[tuple[str, str]] | tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Headers as a JSON object, credential values replaced by the marker."""
    return {k: MARKER if is_credential(k, v) else v for k, v in headers}


__all__ = [
    "MARKER",
    "MIN_SEARCHED",
    "PIECE",
    "Redactor",
    "headers_json",
    "secret_values",
    "vocabulary",
]
