"""Text from the network, made safe to show: control characters become visible escapes.

A server's header, error body or event text may carry ESC sequences, NUL, bidi overrides
or lone surrogates; shown raw they recolour a terminal or break a page's markup. Pure.
"""

from __future__ import annotations

import re

#: C0 and C1 controls, DEL, bidi embedding/override/isolate marks, lone surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every unsafe character written as ``\\xNN`` / ``\\uNNNN``."""
    return _UNSAFE.sub(_escape, text)
