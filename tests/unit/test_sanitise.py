"""The terminal's one gate: redaction and visible control characters, styles kept."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from promptpath.core.redaction import MARKER, Redactor
from promptpath.report.sanitise import clean_text, sanitised

pytestmark = pytest.mark.unit

KEY = "sk-live-0123456789abcdefXYZ"


def test_styles_stay_on_the_characters_they_covered() -> None:
    text = Text.assemble(("SERVER ", "bold"), (f"id {KEY} \x1b[31m", "red"), ("end", "green"))
    clean = clean_text(text, Redactor.of([KEY]))
    assert clean.plain == f"SERVER id {MARKER} \\x1b[31mend"
    styled = {clean.plain[s.start : s.end]: str(s.style) for s in clean.spans}
    assert styled == {"SERVER ": "bold", f"id {MARKER} \\x1b[31m": "red", "end": "green"}


def test_a_key_split_across_two_styles_is_still_found() -> None:
    text = Text.assemble((KEY[:10], "bold"), (KEY[10:], "red"))
    assert clean_text(text, Redactor.of([KEY])).plain == MARKER


def test_text_that_needs_nothing_is_the_same_object() -> None:
    text = Text("plain words")
    assert clean_text(text, Redactor.of([KEY])) is text


def _printed(*renderables: object, width: int = 60) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, color_system=None)
    with sanitised(console, Redactor.of([KEY])):
        for r in renderables:
            console.print(r)
    console.print(f"after the block {KEY}")  # the hook is gone: our own text again
    return out.getvalue()


def test_every_print_in_the_block_is_cleaned_tables_included() -> None:
    table = Table(title=f"t {KEY}")
    table.add_column("h")
    table.add_row(f"cell {KEY}\x00")
    table.add_row(Text(f"text cell \x1b[2J{KEY[:13]}"))
    inner = Table.grid()
    inner.add_row(f"nested {KEY}")
    table.add_row(inner)
    shown = _printed(f"[dim]markup {KEY}[/dim]", table, width=100)
    body, after = shown.rsplit("after the block ", 1)
    assert KEY[:12] not in body and "\x00" not in body and "\x1b" not in body
    assert body.count(MARKER) == 5 and "\\x00" in body and "\\x1b[2J" in body
    assert after.strip() == KEY


def test_a_key_longer_than_the_line_is_redacted_before_the_line_wraps() -> None:
    shown = _printed(Text("x" * 50 + KEY), width=60)
    assert KEY[:12] not in shown.replace("\n", "").split("after the block")[0]
