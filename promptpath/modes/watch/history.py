"""--history FILE.jsonl: one line per trace, appended as it ends, and its tail read back.

Each line is ``{"schema": "promptpath.watch/1", "seq": N, "at": "<UTC ISO 8601, ms, Z>",
"run": <the promptpath.run/1 document as run --json prints it>}`` (docs/watch.md). A line
is written whole and flushed before the next trace begins: a crash loses at most the
trace in flight. Reading back is bounded: only the last ``TAIL_BYTES`` of the file are
read, and only the last lines the window holds are kept.
"""

from __future__ import annotations

import json
import os
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from promptpath.core.errors import UsageError

SCHEMA = "promptpath.watch/1"
#: The most of an existing history read back (its tail): a year-long file costs no more.
TAIL_BYTES = 8 * 1024 * 1024


def utc_stamp(now: datetime | None = None) -> str:
    """``2026-12-06T21:15:13.192Z``: UTC, milliseconds, Z."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def line_of(seq: int, at: str, run: Mapping[str, Any]) -> str:
    """One history line (no newline)."""
    return json.dumps({"schema": SCHEMA, "seq": seq, "at": at, "run": run}, ensure_ascii=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    seq: int
    at: str
    run: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Tail:
    """What an existing history gave back."""

    entries: list[Entry]
    last_seq: int  # 0: an empty or new file
    skipped: int  # lines that were not whole history lines (a crash's last one)


def entry_of(line: str) -> Entry | None:
    """A history line parsed, or None when it is not one (torn, or not JSON)."""
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict) or obj.get("schema") != SCHEMA:
        return None
    seq, at, run = obj.get("seq"), obj.get("at"), obj.get("run")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(at, str):
        return None
    if not isinstance(run, dict):
        return None
    return Entry(seq=seq, at=at, run=run)


def read_tail(path: Path, keep: int) -> Tail:
    """The last ``keep`` entries of ``path`` (a missing or empty file: none). A file with
    lines but not one history line is not a watch history: UsageError naming it."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return Tail(entries=[], last_seq=0, skipped=0)
    except OSError as exc:
        raise UsageError(f"--history {path}: {exc.strerror}", kind="bad_option") from None
    if size == 0:
        return Tail(entries=[], last_seq=0, skipped=0)
    start = max(0, size - TAIL_BYTES)
    try:
        with path.open("rb") as handle:
            handle.seek(start)
            raw = handle.read()
    except OSError as exc:
        raise UsageError(f"--history {path}: {exc.strerror}", kind="bad_option") from None
    lines = raw.split(b"\n")
    if start:
        lines = lines[1:]  # the first one is cut by the seek
    entries: deque[Entry] = deque(maxlen=keep)
    skipped, last_seq, seen = 0, 0, 0
    for chunk in lines:
        if not chunk.strip():
            continue
        seen += 1
        entry = entry_of(chunk.decode("utf-8", errors="replace"))
        if entry is None:
            skipped += 1
            continue
        entries.append(entry)
        last_seq = max(last_seq, entry.seq)
    if seen and not last_seq:
        raise UsageError(
            f"--history {path}: not a watch history (no {SCHEMA} line in its last"
            f" {len(raw):,} bytes)",
            kind="bad_option",
        )
    return Tail(entries=list(entries), last_seq=last_seq, skipped=skipped)


class HistoryWriter:
    """Appends lines to the history, each flushed to the OS before the call returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._file: IO[str] = path.open("a", encoding="utf-8")
            # A crash mid-line left no newline: start on a line of our own.
            if self._file.tell() > 0 and not _ends_with_newline(path):
                self._file.write("\n")
        except OSError as exc:
            raise UsageError(f"--history {path}: {exc.strerror}", kind="bad_option") from None

    def append(self, line: str) -> None:
        self._file.write(line + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


__all__ = [
    "SCHEMA",
    "TAIL_BYTES",
    "Entry",
    "HistoryWriter",
    "Tail",
    "entry_of",
    "line_of",
    "read_tail",
    "utc_stamp",
]
