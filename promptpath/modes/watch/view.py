"""The watch screen, mtr-style: a row per stage, the TTFT and gap rows, the path's hops
(--path), the latest events; and the same tables as the summary printed on exit.

Every text that came from the network (error messages, issuers, Via, responders) is shown
through ``visible`` inside rich ``Text`` (never parsed as markup).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Group
from rich.table import Table
from rich.text import Text

from promptpath.core.stats import sparkline
from promptpath.core.textsafe import visible

if TYPE_CHECKING:
    from rich.console import RenderableType

    from promptpath.modes.watch.hops import PathHops
    from promptpath.modes.watch.state import RowStats, WatchState

SPARK_WIDTH = 30
EVENTS_SHOWN = 8
KEYS = "keys: q quit · p pause · r reset · d path rows"


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    target: str
    status: str  # "tracing", "paused", "waiting 4.2 s", "budget: waiting until 22:00"


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.1f}"


def stage_table(state: WatchState) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for name, justify in (
        ("stage", "left"),
        ("last", "right"),
        ("p50", "right"),
        ("p95", "right"),
        ("worst", "right"),
        ("window", "left"),
        ("fail", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    traces = max(state.traces, 1)
    for row in state.row_stats():
        table.add_row(*_cells(row, traces))
    return table


def _cells(row: RowStats, traces: int) -> list[Text | str]:
    label = Text(row.metric.label + ("" if row.metric.unit == "ms" else f" ({row.metric.unit})"))
    if row.state:
        label.append(" ▲" if row.state > 0 else " ▼", style="bold red")
    fail = ""
    if row.metric.stage:
        fail = f"{row.failures} ({100.0 * row.failures / traces:.0f}%)" if row.failures else "0"
    return [
        label,
        _ms(row.last),
        _ms(row.p50),
        _ms(row.p95),
        _ms(row.worst),
        Text(sparkline(row.values, SPARK_WIDTH), style="cyan"),
        fail,
    ]


def path_table(hops: PathHops) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False, title=None)
    for name, justify in (
        ("hop", "right"),
        ("host", "left"),
        ("loss", "right"),
        ("sent", "right"),
        ("last", "right"),
        ("avg", "right"),
        ("best", "right"),
        ("worst", "right"),
        ("", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for hop in hops.rows():
        note = ""
        if hop.deprioritised and hop.loss > 0:
            note = "loss not carried to the end: ICMP deprioritised"
        elif hop.deprioritised:
            note = "slow alone: ICMP deprioritised"
        elif hop.destination:
            note = "destination"
        table.add_row(
            str(hop.ttl),
            Text(visible(hop.responder or "???")),
            f"{100.0 * hop.loss:.0f}%",
            str(hop.sent),
            _ms(hop.last),
            _ms(hop.average),
            _ms(hop.best),
            _ms(hop.worst),
            Text(note, style="dim"),
        )
    return table


def events_text(state: WatchState, shown: int = EVENTS_SHOWN) -> Text:
    text = Text()
    recent = list(state.events)[-shown:]
    if not recent:
        return Text("no events", style="dim")
    for event in recent:
        style = {"band": "yellow", "fact": "magenta", "failure": "red", "probe": "red"}.get(
            event.kind, ""
        )
        text.append(f"#{event.seq} {event.at[11:19]} ", style="dim")
        text.append(visible(event.message) + "\n", style=style)
    text.rstrip()
    return text


def screen(
    state: WatchState, hops: PathHops | None, header: Header, *, show_path: bool, keys: bool = True
) -> RenderableType:
    """The live screen (and, with ``keys`` off, the summary)."""
    head = Text()
    head.append("promptpath watch ", style="bold")
    head.append(visible(header.target))
    head.append(
        f"  traces {state.traces} · failed {state.failed}"
        f" · events {state.events_total} · {header.status}",
        style="dim",
    )
    parts: list[RenderableType] = [head, stage_table(state)]
    if hops is not None and show_path:
        title = f"path ({hops.runs} run{'s' if hops.runs != 1 else ''} of the path probe)"
        parts += [Text(title, style="bold"), path_table(hops)]
        if hops.summary:
            parts.append(Text(visible(hops.summary), style="dim"))
    parts += [Text("events", style="bold"), events_text(state)]
    if keys:
        parts.append(Text(KEYS, style="dim"))
    return Group(*parts)


__all__ = ["KEYS", "Header", "events_text", "path_table", "screen", "stage_table"]
