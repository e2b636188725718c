"""What `promptpath watch` was asked to do besides the trace itself: checked and frozen.

The trace (its request, path, limits) is the ordinary Plan's; this holds the loop: how
often, for how long, what else runs every N traces, the band, the history file and the
spend guard. ``plan/watch_options.py`` builds it from the command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

BudgetAction = Literal["slow", "stop"]

#: watch sends a real prompt every few seconds: a small answer by default.
DEFAULT_MAX_TOKENS = 16
DEFAULT_INTERVAL_S = 5.0
DEFAULT_JITTER = 0.1
DEFAULT_WINDOW = 30
DEFAULT_BAND_K = 4.0
DEFAULT_PATH_EVERY = 10
DEFAULT_PROBE_EVERY = 20
#: Output tokens per clock hour (UTC) a watch may spend unless told otherwise.
DEFAULT_BUDGET = 20_000


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchPlan:
    interval_s: float = DEFAULT_INTERVAL_S
    jitter: float = DEFAULT_JITTER  # each pause is interval × (1 ± jitter), uniformly
    count: int | None = None  # stop after this many traces (None: until stopped)
    duration_s: float | None = None  # stop after this long
    history: Path | None = None  # --history FILE.jsonl
    path: bool = False  # --path: the path probe's hops, every path_every traces
    path_every: int = DEFAULT_PATH_EVERY
    probe_every: int = DEFAULT_PROBE_EVERY  # the --probe probes, every N traces
    window: int = DEFAULT_WINDOW  # traces the rolling statistics and bands hold
    band_k: float = DEFAULT_BAND_K
    budget: int = DEFAULT_BUDGET  # output tokens per UTC hour; 0: no budget
    budget_action: BudgetAction = "slow"
    jsonl: bool = False  # JSON lines on stdout even on a terminal
    cost_per_trace: int = DEFAULT_MAX_TOKENS  # the most one trace may spend, in tokens
    where: str = "loopback"  # the target, as the cost line names it

    @property
    def spend_per_hour(self) -> float:
        """Tokens an hour at the nominal interval, at the most each trace may spend."""
        return self.cost_per_trace * 3600.0 / max(self.interval_s, 0.001)


__all__ = ["DEFAULT_MAX_TOKENS", "BudgetAction", "WatchPlan"]
