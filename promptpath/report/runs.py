"""Reading the JSON report the exporters take: a single run or a ``promptpath.series/1``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SERIES_PREFIX = "promptpath.series/"


def is_series(report: Mapping[str, Any]) -> bool:
    return str(report.get("schema", "")).startswith(SERIES_PREFIX)


def runs_of(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The single-run objects a report holds: itself, or a series' runs in order."""
    if is_series(report):
        return list(report.get("runs") or [])
    return [report]


def target_of(report: Mapping[str, Any]) -> str:
    """The target URL (already safe to print: credential-like query values redacted)."""
    if is_series(report):
        return str(report.get("target", ""))
    return str((report.get("target") or {}).get("url", ""))
