"""Counters the reference endpoint keeps about itself, served at ``GET /stats``."""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import asdict, dataclass

RECENT = 100


@dataclass(slots=True, kw_only=True)
class RequestRecord:
    """One request, updated in place while its response is written."""

    id: int
    path: str
    dialect: str | None
    started_unix_ns: int
    status: int | None = None
    tokens_sent: int = 0
    disconnected: bool = False


class ServerStats:
    """Totals plus the last ``RECENT`` requests. Used from one event loop only."""

    def __init__(self) -> None:
        self.requests = 0
        self.tokens_sent = 0
        self.client_disconnects = 0
        self._ids = itertools.count(1)
        self._recent: deque[RequestRecord] = deque(maxlen=RECENT)

    def start(self, *, path: str, dialect: str | None, started_unix_ns: int) -> RequestRecord:
        self.requests += 1
        record = RequestRecord(
            id=next(self._ids), path=path, dialect=dialect, started_unix_ns=started_unix_ns
        )
        self._recent.append(record)
        return record

    def tokens(self, record: RequestRecord, n: int) -> None:
        record.tokens_sent += n
        self.tokens_sent += n

    def disconnect(self, record: RequestRecord) -> None:
        if not record.disconnected:
            record.disconnected = True
            self.client_disconnects += 1

    def snapshot(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "tokens_sent": self.tokens_sent,
            "client_disconnects": self.client_disconnects,
            "recent": [asdict(r) for r in self._recent],
        }
