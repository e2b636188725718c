"""Which promptpath documents a change is judged between, and the runs each one holds. Pure.

Every document is read as the ``promptpath.run/1`` objects it carries:

- ``promptpath.run/1``: itself (one run);
- ``promptpath.series/1``: its ``runs``;
- ``promptpath.compare/1``: its ``results`` (HTTP/2's shown run, then HTTP/3's);
- ``promptpath.watch/1``: one history line (CONTRACTS.md §2), its ``run``; a history
  (a list of lines) is the series of its runs.

A sequence of run objects passes through as it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "SCHEMAS",
    "Doc",
    "runs_of",
    "schema_of",
]

#: Documents a change can be judged between.
SCHEMAS = ("promptpath.run/1", "promptpath.series/1", "promptpath.compare/1", "promptpath.watch/1")

#: A document, or the run objects it holds.
Doc = Mapping[str, Any] | Sequence[Mapping[str, Any]]


def schema_of(doc: object) -> str | None:
    """The document's ``schema`` string when it is one of ``SCHEMAS``, else None."""
    if not isinstance(doc, Mapping):
        return None
    schema = doc.get("schema")
    return schema if isinstance(schema, str) and schema in SCHEMAS else None


def _runs(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [r for r in value if isinstance(r, Mapping)]


def runs_of(doc: Doc) -> list[Mapping[str, Any]]:
    """The run objects a document holds (see the module docstring); ValueError for a
    mapping that is no document of ``SCHEMAS``."""
    if not isinstance(doc, Mapping):
        out: list[Mapping[str, Any]] = []
        for item in doc:
            out.extend(runs_of(item) if schema_of(item) != "promptpath.run/1" else [item])
        return out
    schema = schema_of(doc)
    if schema == "promptpath.run/1":
        return [doc]
    if schema == "promptpath.series/1":
        return _runs(doc.get("runs"))
    if schema == "promptpath.compare/1":
        return _runs(doc.get("results"))
    if schema == "promptpath.watch/1":
        run = doc.get("run")
        return [run] if isinstance(run, Mapping) else []
    raise ValueError(f"not a promptpath document: schema {doc.get('schema')!r}")
