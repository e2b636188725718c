"""Untrusted text made safe to show: control characters escaped, lone surrogates replaced. Pure.

Every string a server, proxy, certificate or resolver sends is data, never instructions
to the terminal. On a terminal an ESC starts a command (recolour, retitle, move the
cursor over lines already printed), a CR or a newline lets a hop print what looks like
a line of our own report, and a bidirectional override reorders what the eye reads.
``visible`` spells each of them out (``\\x1b``, ``\\n``, ``\\u202e``) so the reader sees
exactly what was sent, and the same bytes are always spelled the same way.

JSON keeps the text as it came (a program reads it, not a terminal), but JSON must be
valid Unicode: a lone surrogate (``"\\ud800"`` in a server's JSON error body, which
Python's json module decodes into a str) makes ``jq`` and every strict parser refuse
the whole report. ``valid_unicode`` replaces each with U+FFFD, the same character a
byte that is not UTF-8 becomes when we decode a body: one rule for text that was not text.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"

#: C0 controls (newline and tab included: a hop's newline would start a line of its own),
#: DEL and C1; the bidirectional embeddings, overrides and isolates; the line and paragraph
#: separators some terminals break on; and lone surrogates (a UTF-8 terminal cannot even
#: encode them: printing one raises).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _spell(match: re.Match[str]) -> str:
    char = match.group()
    named = _NAMED.get(char)
    if named is not None:
        return named
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control, bidi-format and surrogate character spelled out."""
    return _UNSAFE.sub(_spell, text)


#: What XML 1.0 cannot carry at all, even as a character reference (its Char production):
#: after ``visible`` only the noncharacters U+FFFE and U+FFFF are left of it.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def visible_xml(text: str) -> str:
    """``visible(text)``, with every character XML 1.0 forbids spelled out as well, so an
    SVG or XML document that shows it stays well-formed (a parser refuses U+FFFF)."""
    return _NOT_XML.sub(_spell, visible(text))


def is_visible(text: str) -> bool:
    """True when ``visible`` would leave ``text`` unchanged."""
    return _UNSAFE.search(text) is None


def valid_unicode(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD: encodable as UTF-8, valid JSON."""
    return _SURROGATE.sub(REPLACEMENT, text)


def valid_unicode_tree(obj: Any) -> Any:
    """A JSON-ready object with ``valid_unicode`` applied to every string, keys included;
    other values are returned as they are (the same object when nothing needed a change)."""
    if isinstance(obj, str):
        return valid_unicode(obj)
    if isinstance(obj, dict):
        return {
            valid_unicode(k) if isinstance(k, str) else k: valid_unicode_tree(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [valid_unicode_tree(v) for v in obj]
    return obj


__all__ = [
    "REPLACEMENT",
    "is_visible",
    "valid_unicode",
    "valid_unicode_tree",
    "visible",
    "visible_xml",
]
