"""The watch screen, mtr-style: a row per stage, the TTFT and gap rows, the path's hops
(--path), the latest events; and the same lines as the summary printed on exit.

The screen is plain fixed-width lines in one rich ``Text`` (no rich Table: measuring a
table's cells cost ~5 ms a draw, half of a trace's own CPU budget). Every text that came
from the network (error messages, issuers, Via, responders) is shown through ``visible``
inside ``Text`` (never parsed as markup).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text

from promptpath.core.stats import sparkline
from promptpath.core.textsafe import visible

if TYPE_CHECKING:
    from promptpath.modes.watch.hops import HopStats, PathHops
    from promptpath.modes.watch.state import RowStats, WatchState

SPARK_WIDTH = 30
EVENTS_SHOWN = 8
KEYS = "keys: q quit · p pause · r reset · d path rows"
LABEL_WIDTH = 22
_STYLES = {"band": "yellow", "fact": "magenta", "failure": "red", "probe": "red", "budget": "red"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    target: str
    status: str  # "tracing #4", "paused (p resumes)", "next trace in 4.2 s", "ended: ..."


def _num(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.1f}"


def stage_lines(state: WatchState, text: Text) -> None:
    traces = max(state.traces, 1)
    text.append(
        f"{'stage':<{LABEL_WIDTH}}{'last':>8}{'p50':>8}{'p95':>8}{'worst':>8}  "
        f"{'window':<{SPARK_WIDTH}}  {'fail':>8}\n",
        style="bold",
    )
    for row in state.row_stats():
        _row(row, traces, text)


def _row(row: RowStats, traces: int, text: Text) -> None:
    metric = row.metric
    label = metric.label if metric.unit == "ms" else f"{metric.label} ({metric.unit})"
    mark = "" if not row.state else (" ▲" if row.state > 0 else " ▼")
    text.append(f"{label:<{LABEL_WIDTH - len(mark)}}"[: LABEL_WIDTH - len(mark)])
    text.append(mark, style="bold red")
    text.append(f"{_num(row.last):>8}{_num(row.p50):>8}{_num(row.p95):>8}{_num(row.worst):>8}  ")
    text.append(f"{sparkline(row.values, SPARK_WIDTH):<{SPARK_WIDTH}}", style="cyan")
    fail = ""
    if metric.stage:
        fail = f"{row.failures} ({100.0 * row.failures / traces:.0f}%)" if row.failures else "0"
    text.append(f"  {fail:>8}\n", style="red" if row.failures else "")


def path_lines(hops: PathHops, text: Text) -> None:
    runs = hops.runs
    text.append(f"path ({runs} run{'s' if runs != 1 else ''} of the path probe)\n", style="bold")
    text.append(
        f"{'hop':>3}  {'host':<39}{'loss':>6}{'sent':>6}{'last':>8}{'avg':>8}{'best':>8}"
        f"{'worst':>8}\n",
        style="bold",
    )
    for hop in hops.rows():
        _hop(hop, text)
    if hops.summary:
        text.append(visible(hops.summary) + "\n", style="dim")


def _hop(hop: HopStats, text: Text) -> None:
    host = visible(hop.responder or "???")[:38]
    text.append(
        f"{hop.ttl:>3}  {host:<39}{100.0 * hop.loss:>5.0f}%{hop.sent:>6}{_num(hop.last):>8}"
        f"{_num(hop.average):>8}{_num(hop.best):>8}{_num(hop.worst):>8}"
    )
    if hop.deprioritised and hop.loss > 0:
        note = "  loss not carried to the end: ICMP deprioritised"
    elif hop.deprioritised:
        note = "  slow alone: ICMP deprioritised"
    else:
        note = "  destination" if hop.destination else ""
    text.append(note + "\n", style="dim")


def event_lines(state: WatchState, text: Text, shown: int = EVENTS_SHOWN) -> None:
    text.append("events\n", style="bold")
    recent = list(state.events)[-shown:]
    if not recent:
        text.append("no events\n", style="dim")
    for event in recent:
        text.append(f"#{event.seq} {event.at[11:19]} ", style="dim")
        text.append(visible(event.message) + "\n", style=_STYLES.get(event.kind, ""))


def screen(
    state: WatchState,
    hops: PathHops | None,
    header: Header,
    *,
    show_path: bool,
    keys: bool = True,
) -> Text:
    """The live screen (and, with ``keys`` off, the summary)."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append("promptpath watch ", style="bold")
    text.append(visible(header.target))
    text.append(
        f"  traces {state.traces} · failed {state.failed} · events {state.events_total}"
        f" · {visible(header.status)}\n",
        style="dim",
    )
    stage_lines(state, text)
    if hops is not None and show_path:
        path_lines(hops, text)
    event_lines(state, text)
    if keys:
        text.append(KEYS, style="dim")
    text.rstrip()
    return text


__all__ = ["KEYS", "Header", "event_lines", "path_lines", "screen", "stage_lines"]
