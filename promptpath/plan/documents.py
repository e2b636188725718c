"""Reading the documents `diff` and `run --baseline` compare: a run, a series, a compare
document or a watch history (JSON Lines), bounded in size; a file that is none of them, or
of a schema version this promptpath does not know, is a one-line UsageError naming it.
The judging is core/change's; this is only the reading.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from promptpath.core.change.documents import SCHEMAS, runs_of, schema_of
from promptpath.core.change.history import History, parse_history
from promptpath.core.errors import UsageError

if TYPE_CHECKING:
    from promptpath.plan.plan import Baseline

__all__ = ["MAX_DOCUMENT_BYTES", "Loaded", "load", "read_baseline"]

#: A document read at most: a series of 1,000 runs is 6–25 MB, a day of watch history at
#: one trace a minute ~30 MB. Parsed JSON takes several times its text: the bound keeps a
#: wrong file (a disk image) from taking the machine's memory.
MAX_DOCUMENT_BYTES = 256 << 20
_KIND = {
    "promptpath.run/1": "run",
    "promptpath.series/1": "series",
    "promptpath.compare/1": "compare",
    "promptpath.watch/1": "history",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Loaded:
    """One file read: its kind, and its runs (or its history, for time ranges)."""

    path: str
    kind: str
    runs: list[Mapping[str, Any]]
    history: History | None = None


def _read(path: str, who: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"{who}: cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_DOCUMENT_BYTES:
        raise UsageError(f"{who}: {path} is larger than {MAX_DOCUMENT_BYTES >> 20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{who}: {path} is not a promptpath document (not UTF-8 text)") from None


def _not_ours(path: str, doc: object, who: str) -> UsageError:
    schema = doc.get("schema") if isinstance(doc, Mapping) else None
    if isinstance(schema, str) and schema.startswith("promptpath.") and schema not in SCHEMAS:
        known = ", ".join(SCHEMAS)
        return UsageError(
            f"{who}: {path}: unknown schema version {schema[:60]!r} (this promptpath reads {known})"
        )
    return UsageError(
        f"{who}: {path} is not a promptpath document (no promptpath schema: want a run, a "
        "series, a compare document or a watch history)"
    )


def load(path: str, who: str) -> Loaded:
    """Read one document (or history); a UsageError starting with ``who`` (the command or
    option reading it) and naming the file otherwise."""
    text = _read(path, who)
    try:
        doc: object = json.loads(text)
    except ValueError:
        doc = None
    if doc is None and text.lstrip().startswith("{"):
        lines = text.splitlines()
        try:
            first = json.loads(lines[0]) if lines else None
        except ValueError:
            first = None
        if schema_of(first) == "promptpath.watch/1":
            try:
                history = parse_history(lines)
            except ValueError as exc:
                raise UsageError(f"{who}: {path}: not a watch history: {exc}") from None
            return Loaded(path=path, kind="history", runs=history.runs(), history=history)
        raise _not_ours(path, first, who)
    schema = schema_of(doc)
    if schema is None:
        raise _not_ours(path, doc, who)
    assert isinstance(doc, Mapping)
    if schema == "promptpath.watch/1":  # a history of one line
        history = parse_history([text])
        return Loaded(path=path, kind="history", runs=history.runs(), history=history)
    return Loaded(path=path, kind=_KIND[schema], runs=runs_of(doc))


def read_baseline(path: str) -> Baseline:
    """``--baseline FILE`` read (a series, a run, a compare document or a watch history)
    into the runs and values a series is held to (resolve.py checks its conflicts)."""
    from promptpath.core.change.baseline import baseline_values
    from promptpath.plan.plan import Baseline

    loaded = load(path, "--baseline")
    if not loaded.runs:
        raise UsageError(f"--baseline: {path} holds no runs", kind="bad_option")
    return Baseline(
        source=os.path.basename(path) or path,
        kind=loaded.kind,
        runs=tuple(loaded.runs),
        values=baseline_values(loaded.runs),
    )
