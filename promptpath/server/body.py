"""The request body as JSON, or a RequestError saying why not (answered with a 400).

Every byte of a request is untrusted. Before this check (tried by hand, hypercorn 0.18)
bytes that are not UTF-8 were a 500 with a UnicodeDecodeError traceback (``json.loads`` of
bytes decodes them), a deeply nested array a 500 with a RecursionError, a UTF-16 body was
taken, and a lone surrogate escape such as ``"\\ud800"`` in the model name was a 200 whose
stream could not encode its events (issue 24 saw it cut by a UnicodeEncodeError).
"""

from __future__ import annotations

import json
import math
import re

from promptpath.server.dialect import RequestError

#: Deepest nesting taken. Real request bodies (messages, content parts, tool schemas)
#: stay well under it, and everything that walks a body recursively stays far from
#: Python's recursion limit.
MAX_DEPTH = 64

#: Longest integer literal taken (2**64 has 20 digits).
MAX_INT_DIGITS = 40

_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_body(raw: bytes) -> object:
    """``raw`` parsed as JSON (an empty body is ``{}``): UTF-8 (RFC 8259 8.1), at most
    MAX_DEPTH deep, no lone surrogate in any string or key, finite numbers (no NaN or
    Infinity) and integers of at most MAX_INT_DIGITS digits."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RequestError(
            f"body is not UTF-8: byte 0x{raw[exc.start]:02x} at offset {exc.start}"
        ) from None
    try:
        value = json.loads(
            text or "{}", parse_constant=_no_constant, parse_float=_finite, parse_int=_short_int
        )
    except json.JSONDecodeError as exc:
        raise RequestError(f"body is not JSON: {exc}") from None
    except RecursionError:
        raise RequestError(f"body is nested too deeply (more than {MAX_DEPTH} levels)") from None
    _check(value)
    return value


def _no_constant(name: str) -> float:
    # NaN and Infinity are Python's extension, not JSON (RFC 8259 6).
    raise RequestError(f"body is not JSON: {name} is not a JSON number")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):  # 1e400: a JSON number no double holds
        raise RequestError(f"body holds a number out of range ({text[:20]})")
    return number


def _short_int(text: str) -> int:
    # Past 4,300 digits json.loads raises a ValueError that is no JSONDecodeError
    # (Python's int conversion limit): no request needs more than a few dozen digits.
    if len(text) > MAX_INT_DIGITS:
        raise RequestError(f"body holds an integer of {len(text)} digits")
    return int(text)


def _check(value: object) -> None:
    """Depth and lone surrogates, walked without recursion."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            _no_surrogate(item)
            continue
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise RequestError(f"body is nested too deeply (more than {MAX_DEPTH} levels)")
        if isinstance(item, dict):
            for key, child in item.items():
                _no_surrogate(key)
                stack.append((child, depth + 1))
        else:
            stack.extend((child, depth + 1) for child in item)


def _no_surrogate(text: str) -> None:
    found = _SURROGATE.search(text)
    if found is not None:
        raise RequestError(
            f"body holds a lone surrogate escape (\\u{ord(found.group()):04x}),"
            " which is not Unicode text"
        )
