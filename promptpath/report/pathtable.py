"""The path probe's hops as a table under its finding, as mtr prints them."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from promptpath.core.findings import Finding
from promptpath.report.pathrows import HEAD, hop_rows


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def path_table(finding: Finding) -> Table | None:
    """Hop, responder, loss, min/median/max RTT, and what the reading says of the hop."""
    rows = hop_rows(finding.evidence) if finding.probe == "path" else []
    if not rows:
        return None
    table = Table(show_edge=False, box=None, pad_edge=False)
    for name in HEAD:
        left = name in ("address", "")
        table.add_column(name, justify="left" if left else "right", no_wrap=True)
    for row in rows:
        table.add_row(
            row.ttl,
            Text(row.address),  # a resolver's text: never read as markup
            row.loss,
            _ms(row.min_ms),
            _ms(row.median_ms),
            _ms(row.max_ms),
            row.adds,
            row.note,
        )
    return table
