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
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, Self

from promptpath.core import redaction
from promptpath.core.headers import is_credential
from promptpath.core.redaction import MARKER, MIN_SEARCHED, PIECE
from promptpath.core.urlsafe import shown_authority, shown_url
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


# -- the command line, as the HTML report's Reproduce section shows it -----------------
Carries = Literal["header", "url", "credential"]

#: Options whose value holds a credential in a known place: a header (``Name: value``), a
#: URL (its userinfo, key-like query values, its fragment) or, whole, a credential.
#: tests/unit/test_redact_command.py holds every spelling here equal to the flag table's.
CREDENTIAL_OPTIONS: dict[str, Carries] = {
    "--header": "header",
    "-H": "header",
    "--proxy": "url",
    "-x": "url",
    "--otlp-endpoint": "url",
    "--pushgateway": "url",
    "--canary-admin": "url",
    "--proxy-user": "credential",
}
#: A cluster of short options ending in one that takes a credential's value: ``-vH``,
#: ``-kx``, ``-Hname: value`` (the flags that take no value first, as click reads them).
_SHORT_CLUSTER = re.compile(r"-([vk46]*)([Hx])(.*)", re.DOTALL)


def _value_shown(carries: Carries | None, value: str) -> str:
    if carries == "credential":
        return MARKER
    if carries == "header":
        name, sep, header_value = value.partition(":")
        return (
            f"{name}: {MARKER}"
            if sep and is_credential(name.strip(), header_value.strip())
            else value
        )
    if carries == "url":
        return shown_authority(value)
    # Any other argument: the target, or a value we do not know to hold a URL.
    return shown_url(value) if "://" in value else value


def command_line(argv: Sequence[str], redactor: redaction.Redactor) -> tuple[str, ...]:
    """``argv`` as a report may show it: each credential taken out by its place (the
    options in ``CREDENTIAL_OPTIONS``, any URL), whatever its length, then every argument
    searched for the run's secrets as all text is (a key pasted into --prompt)."""
    shown: list[str] = []
    pending: Carries | None = None
    waiting = False  # the previous argument was an option whose value this one is
    only_positional = False
    for arg in argv:
        if waiting:
            shown.append(_value_shown(pending, arg))
            waiting, pending = False, None
            continue
        if only_positional or not arg.startswith("-") or arg == "-":
            shown.append(_value_shown(None, arg))
            continue
        if arg == "--":
            only_positional = True
            shown.append(arg)
            continue
        name, eq, value = arg.partition("=")
        carries = CREDENTIAL_OPTIONS.get(name)
        if arg.startswith("--") and eq:
            shown.append(f"{name}={_value_shown(carries, value)}")
            continue
        if carries is not None:
            shown.append(arg)
            waiting, pending = True, carries
            continue
        cluster = _SHORT_CLUSTER.fullmatch(arg)
        if cluster is not None:
            flags, letter, attached = cluster.groups()
            carries = CREDENTIAL_OPTIONS[f"-{letter}"]
            if attached:
                shown.append(f"-{flags}{letter}{_value_shown(carries, attached)}")
            else:
                shown.append(arg)
                waiting, pending = True, carries
            continue
        shown.append(_value_shown(None, arg))
    return tuple(redactor.text(arg) for arg in shown)


__all__ = [
    "CREDENTIAL_OPTIONS",
    "MARKER",
    "MIN_SEARCHED",
    "PIECE",
    "Redactor",
    "command_line",
    "headers_json",
    "secret_values",
    "vocabulary",
]
