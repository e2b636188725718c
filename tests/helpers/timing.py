"""What a timing-bounded test measured, for benchmarks/flake_check.py.

A test calls ``note(quantity, value, low, high)`` just before it asserts the bound, so a
run that passes still says how close it came. Nothing is written unless
``PROMPTPATH_TIMING_LOG`` names a file (the flake check sets it): one JSON line per
note, with the test's node id. The assertion itself stays in the test.
"""

from __future__ import annotations

import json
import os

ENV = "PROMPTPATH_TIMING_LOG"


def _test_id() -> str:
    current = os.environ.get("PYTEST_CURRENT_TEST", "?")
    return current.rsplit(" (", 1)[0]  # "path::name[param] (call)"


def note(quantity: str, value: object, low: float | None, high: float | None) -> None:
    """Record one measured value and the bound it is held to (None: unbounded side)."""
    path = os.environ.get(ENV)
    if not path or not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    line = {"test": _test_id(), "quantity": quantity, "value": value, "low": low, "high": high}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
