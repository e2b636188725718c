"""What the reference endpoint keeps about itself: ``GET /stats`` (JSON), ``GET /metrics``
(Prometheus text) and ``GET /stats/requests/<probe-id>`` (one request a probe tagged).

Modelled on a production streaming loop's telemetry: requests, completions and client
disconnects are separate counters, time to first token and stream duration are
histograms (so p50/p95/p99 are derivable), and tokens generated after the client left
are counted on their own: the cost of a ghost stream.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field

RECENT = 100
#: Tagged requests kept for the admin query (a probe asks within seconds of its run).
TAGGED = 1_000

#: Histogram bucket bounds, seconds: first-token times from 1 ms to a minute.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Stream durations, seconds: a short answer to a ten-minute one.
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


@dataclass(slots=True, kw_only=True)
class RequestRecord:
    """One request, updated in place while its response is written."""

    id: int
    path: str
    dialect: str | None
    started_unix_ns: int
    probe_id: str | None = None  # the x-promptpath-probe-id a probe tagged it with
    status: int | None = None
    tokens_sent: int = 0  # written to the client successfully
    tokens_generated: int = 0  # produced, whether or not anyone was there to read them
    tokens_after_disconnect: int = 0  # produced after the server saw the client leave
    disconnected: bool = False
    disconnect_unix_ns: int | None = None  # when the server saw the client leave
    first_token_unix_ns: int | None = None
    last_token_unix_ns: int | None = None
    ended_unix_ns: int | None = None  # generation over: completed, stopped or cut


@dataclass(slots=True)
class Histogram:
    """Cumulative buckets in the Prometheus sense: counts of observations <= each bound."""

    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.bounds)

    def observe(self, value: float) -> None:
        self.n += 1
        self.total += value
        for i, bound in enumerate(self.bounds):
            if value <= bound:
                self.counts[i] += 1


class ServerStats:
    """Totals, histograms, the last ``RECENT`` requests and the tagged ones. Used from one
    event loop only."""

    def __init__(self) -> None:
        self.requests = 0
        self.completions = 0
        self.tokens_sent = 0
        self.tokens_generated = 0
        self.tokens_after_disconnect = 0
        self.client_disconnects = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.duration = Histogram(DURATION_BUCKETS)
        self._ids = itertools.count(1)
        self._recent: deque[RequestRecord] = deque(maxlen=RECENT)
        self._tagged: OrderedDict[str, RequestRecord] = OrderedDict()

    def start(
        self,
        *,
        path: str,
        dialect: str | None,
        started_unix_ns: int,
        probe_id: str | None = None,
    ) -> RequestRecord:
        self.requests += 1
        record = RequestRecord(
            id=next(self._ids),
            path=path,
            dialect=dialect,
            started_unix_ns=started_unix_ns,
            probe_id=probe_id,
        )
        self._recent.append(record)
        if probe_id is not None:
            self.tag(record, probe_id)
        return record

    def tag(self, record: RequestRecord, probe_id: str) -> None:
        record.probe_id = probe_id
        self._tagged[probe_id] = record
        self._tagged.move_to_end(probe_id)
        while len(self._tagged) > TAGGED:
            self._tagged.popitem(last=False)

    def tagged(self, probe_id: str) -> RequestRecord | None:
        return self._tagged.get(probe_id)

    def generated(self, record: RequestRecord, t_recv_unix_ns: int) -> None:
        """One content token produced (sent or not)."""
        now = time.time_ns()
        record.tokens_generated += 1
        self.tokens_generated += 1
        if record.first_token_unix_ns is None:
            record.first_token_unix_ns = now
            self.ttft.observe((now - t_recv_unix_ns) / 1e9)
        record.last_token_unix_ns = now
        if record.disconnected:
            record.tokens_after_disconnect += 1
            self.tokens_after_disconnect += 1

    def tokens(self, record: RequestRecord, n: int) -> None:
        record.tokens_sent += n
        self.tokens_sent += n

    def disconnect(self, record: RequestRecord, at_unix_ns: int | None = None) -> None:
        if not record.disconnected:
            record.disconnected = True
            record.disconnect_unix_ns = at_unix_ns or time.time_ns()
            self.client_disconnects += 1

    def ended(self, record: RequestRecord, *, complete: bool, t_recv_unix_ns: int) -> None:
        """Generation is over for this stream: observe its duration, count a completion."""
        if record.ended_unix_ns is not None:
            return
        record.ended_unix_ns = now = time.time_ns()
        self.duration.observe((now - t_recv_unix_ns) / 1e9)
        if complete:
            self.completions += 1

    def snapshot(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "completions": self.completions,
            "tokens_sent": self.tokens_sent,
            "tokens_generated": self.tokens_generated,
            "tokens_after_disconnect": self.tokens_after_disconnect,
            "client_disconnects": self.client_disconnects,
            "recent": [asdict(r) for r in self._recent],
        }

    def metrics(self) -> str:
        """The counters and histograms in the Prometheus text exposition format 0.0.4."""
        return "".join(_exposition(self))


def _exposition(stats: ServerStats) -> Iterator[str]:
    counters = (
        ("requests", stats.requests, "Requests to a dialect path (streams and errors)."),
        ("completions", stats.completions, "Streams written to their terminal marker."),
        ("client_disconnects", stats.client_disconnects, "Clients that left mid-answer."),
        ("tokens_generated", stats.tokens_generated, "Content tokens produced."),
        ("tokens_sent", stats.tokens_sent, "Content tokens written to a client."),
        (
            "tokens_after_disconnect",
            stats.tokens_after_disconnect,
            "Content tokens produced after the client had left (ghost streams).",
        ),
    )
    for name, value, help_text in counters:
        metric = f"promptpath_serve_{name}_total"
        yield f"# HELP {metric} {help_text}\n# TYPE {metric} counter\n{metric} {value}\n"
    yield from _histogram(
        "promptpath_serve_ttft_seconds",
        "Request received to first content token produced.",
        stats.ttft,
    )
    yield from _histogram(
        "promptpath_serve_stream_duration_seconds",
        "Request received to the end of generation (completed, stopped or cut).",
        stats.duration,
    )


def _histogram(metric: str, help_text: str, h: Histogram) -> Iterator[str]:
    yield f"# HELP {metric} {help_text}\n# TYPE {metric} histogram\n"
    for bound, count in zip(h.bounds, h.counts, strict=True):
        yield f'{metric}_bucket{{le="{bound:g}"}} {count}\n'
    yield f'{metric}_bucket{{le="+Inf"}} {h.n}\n'
    yield f"{metric}_sum {h.total:.9g}\n{metric}_count {h.n}\n"
