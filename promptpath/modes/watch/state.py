"""A watch's rolling state: each metric's window and band, failures by stage, the facts
last seen, the probes' last verdicts and the event log. Pure: documents in, events out.

Everything here is bounded by the window (``--window`` traces) or by a fixed cap (the
event log): a watch of 10,000 traces holds what a watch of 100 does.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from promptpath.core.change.band import BandTracker, Crossing
from promptpath.modes.watch.facts import changed_facts
from promptpath.modes.watch.metrics import METRICS, Metric, failure_of

EventKind = Literal["band", "fact", "failure", "probe", "budget", "note"]
#: Events the log keeps (the count of all of them is kept besides).
EVENTS_KEPT = 200
_FAILING = frozenset({"fail", "error"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One line of the event log."""

    seq: int  # the trace that made it
    at: str  # that trace's start, UTC ISO 8601
    kind: EventKind
    subject: str  # the metric, fact, stage or probe it is about
    message: str  # plain text; may quote what a server sent (escape it to show it)

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class RowStats:
    """One metric's row: over the window, except worst (since the watch or a reset)."""

    metric: Metric
    last: float | None
    p50: float | None
    p95: float | None
    worst: float | None
    values: Sequence[float]
    failures: int  # traces that failed in this row's stage
    state: int  # -1/1 while out of its band, else 0


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The q-th percentile by nearest rank: a value some trace had."""
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[rank - 1]


class _Row:
    __slots__ = ("last", "metric", "tracker", "worst")

    def __init__(self, metric: Metric, window: int, k: float) -> None:
        self.metric = metric
        self.tracker = BandTracker(dataclasses.replace(metric.rule, k=k), window=window)
        self.last: float | None = None
        self.worst: float | None = None

    def feed(self, value: float) -> Crossing | None:
        self.last = value
        if self.worst is None or (value - self.worst) * self.metric.worse > 0:
            self.worst = value
        return self.tracker.feed(value)


class WatchState:
    def __init__(self, *, window: int = 30, band_k: float = 4.0) -> None:
        self.window, self.band_k = window, band_k
        self.events: deque[Event] = deque(maxlen=EVENTS_KEPT)
        self.events_total = 0
        self.facts: dict[str, str] = {}
        self.probes: dict[str, str] = {}
        self.reset()

    def reset(self) -> None:
        """Forget the statistics and bands (the `r` key); facts, probes and events stay."""
        self.rows = {m.name: _Row(m, self.window, self.band_k) for m in METRICS}
        self.traces = 0
        self.failed = 0
        self.failures: Counter[str] = Counter()

    def feed(
        self, doc: Mapping[str, Any], *, seq: int, at: str, quiet: bool = False
    ) -> list[Event]:
        """One trace's run document; the events it makes (none when ``quiet``: a history
        read back seeds the statistics without replaying its events)."""
        events: list[Event] = []
        self.traces += 1
        failure = failure_of(doc)
        if failure is not None:
            self.failed += 1
            stage, message = failure
            self.failures[stage] += 1
            events.append(
                Event(
                    seq=seq,
                    at=at,
                    kind="failure",
                    subject=stage,
                    message=f"trace failed in stage {stage}: {message}",
                )
            )
        # A failed trace's times are the time to fail, not measurements (as diff reads them).
        for metric in METRICS if failure is None else ():
            value = metric.read(doc)
            if value is None:
                continue
            crossing = self.rows[metric.name].feed(value)
            if crossing is not None:
                events.append(_band_event(metric, crossing, seq, at))
        for change in changed_facts(self.facts, doc, ok=failure is None):
            events.append(
                Event(seq=seq, at=at, kind="fact", subject=change.fact.name, message=change.message)
            )
        return [] if quiet else self._log(events)

    def probe_verdicts(
        self, findings: Iterable[Mapping[str, Any]], *, seq: int, at: str
    ) -> list[Event]:
        """The probes' findings of one round: an event when one starts failing or recovers."""
        events = []
        for finding in findings:
            name, verdict = str(finding.get("probe")), str(finding.get("verdict"))
            before = self.probes.get(name)
            self.probes[name] = verdict
            if verdict in _FAILING and before not in _FAILING:
                summary = str(finding.get("summary", ""))
                events.append(
                    Event(
                        seq=seq,
                        at=at,
                        kind="probe",
                        subject=name,
                        message=f"probe {name} {verdict}s: {summary}",
                    )
                )
            elif before in _FAILING and verdict not in _FAILING:
                events.append(
                    Event(
                        seq=seq,
                        at=at,
                        kind="probe",
                        subject=name,
                        message=f"probe {name} passes again ({verdict})",
                    )
                )
        return self._log(events)

    def note(self, kind: EventKind, subject: str, message: str, *, seq: int, at: str) -> Event:
        return self._log([Event(seq=seq, at=at, kind=kind, subject=subject, message=message)])[0]

    def _log(self, events: list[Event]) -> list[Event]:
        self.events.extend(events)
        self.events_total += len(events)
        return events

    def row_stats(self) -> list[RowStats]:
        """Each metric that has a value, or a stage that failed, in table order."""
        out = []
        for metric in METRICS:
            row = self.rows[metric.name]
            values = list(row.tracker.values)
            failures = self.failures.get(metric.stage, 0) if metric.stage else 0
            if not values and not failures:
                continue
            ordered = sorted(values)
            out.append(
                RowStats(
                    metric=metric,
                    last=row.last,
                    p50=nearest_rank(ordered, 50) if ordered else None,
                    p95=nearest_rank(ordered, 95) if ordered else None,
                    worst=row.worst,
                    values=values,
                    failures=failures,
                    state=row.tracker.state,
                )
            )
        return out


def _band_event(metric: Metric, crossing: Crossing, seq: int, at: str) -> Event:
    band, unit = crossing.band, metric.unit
    held = ", ".join(f"{v:.1f}" for v in crossing.held)
    where = f"band {band.low:.1f}–{band.high:.1f} {unit}, median {band.median:.1f}"
    if crossing.change in ("above", "below"):
        text = (
            f"{metric.label} {crossing.change} its band for {len(crossing.held)} traces:"
            f" {held} {unit} ({where})"
        )
    elif crossing.change == "back":
        text = f"{metric.label} back within its band: {held} {unit} ({where})"
    else:
        text = f"{metric.label} settled at a new level ({where})"
    return Event(seq=seq, at=at, kind="band", subject=metric.name, message=text)


__all__ = ["EVENTS_KEPT", "Event", "RowStats", "WatchState", "nearest_rank"]
