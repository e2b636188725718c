"""What --count, --interval, --reuse, --concurrency and --connections asked for.

Its own module: the Plan holds one on every run, and a plain run has no series to
summarise (core/series.py, with the statistics and SLO tables, loads when one is).
"""

from __future__ import annotations

from dataclasses import dataclass

#: The longest --interval taken: a day, as --timeout. A series is one process waiting
#: between its runs; runs further apart than that are a scheduler's job (cron, the
#: exporter), and 1e300 s was a wait that never ends behind a report that never comes.
MAX_INTERVAL_S = 86_400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SeriesPlan:
    """What --count, --interval, --reuse, --concurrency and --connections asked for."""

    count: int = 1
    interval_s: float = 0.0
    reuse: bool = False
    #: Streams in flight at once, one entry per sweep level; () for one after another.
    concurrency: tuple[int, ...] = ()
    connections: int | None = None  # None: the protocol's default (load.py)

    @property
    def is_series(self) -> bool:
        return self.count > 1 or bool(self.concurrency)

    @property
    def requests(self) -> int:
        return self.count * max(1, len(self.concurrency))

    def as_dict(self) -> dict[str, object]:
        return {
            "count": self.count,
            "interval_s": self.interval_s,
            "reuse": self.reuse,
            "concurrency": list(self.concurrency) or [1],
            "connections": self.connections,
        }


__all__ = ["SeriesPlan"]
