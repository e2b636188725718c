"""One gate for the terminal: every line printed is redacted, then its control characters shown.

The terminal report prints strings a server, proxy, certificate or resolver chose (header
values, reason phrases, error bodies, certificate names, probe evidence). Rather than
trusting each call site to remember, ``sanitised(console, redactor)`` puts a render hook
on the console: every renderable printed while it is in place passes through ``clean``
first, which redacts the run's secrets (core/redaction.py) and spells out control
characters (core/textsafe.py), keeping the styles our own code gave the text. Tables are
cleaned cell by cell. The hook sees text before rich lays it out, so a key is found
whole even where the line will later wrap.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import cast

from rich.console import Console, ConsoleRenderable, RenderableType, RenderHook
from rich.markup import escape
from rich.table import Table
from rich.text import Span, Text

from promptpath.core.redaction import MARKER, Redactor
from promptpath.core.textsafe import is_visible, visible


def clean_str(value: str, redactor: Redactor | None = None) -> str:
    """``value`` redacted, then with its control characters spelled out: safe to print."""
    if redactor is not None:
        value = redactor.text(value)
    return visible(value)


def clean_text(text: Text, redactor: Redactor | None = None) -> Text:
    """A copy of ``text`` cleaned as ``clean_str`` cleans a str, its style spans moved
    with the characters they cover (``text`` itself when nothing needed a change)."""
    plain = text.plain
    cut = redactor.spans(plain) if redactor is not None else []
    if not cut and is_visible(plain):
        return text
    out: list[str] = []
    offset = [0] * (len(plain) + 1)
    length = 0
    i = 0
    for start, end in [*cut, (len(plain), len(plain))]:
        while i < start:
            offset[i] = length
            shown = visible(plain[i])
            out.append(shown)
            length += len(shown)
            i += 1
        if start == end:
            break
        for j in range(start, end):
            offset[j] = length
        out.append(MARKER)
        length += len(MARKER)
        i = end
    offset[len(plain)] = length
    copy = text.blank_copy("".join(out))
    copy.spans = [
        Span(offset[s.start], offset[min(s.end, len(plain))], s.style)
        for s in text.spans
        if offset[s.start] < offset[min(s.end, len(plain))]
    ]
    return copy


class Sanitiser(RenderHook):
    """The render hook: Text and tables cleaned, other renderables passed through."""

    def __init__(self, redactor: Redactor | None) -> None:
        self.redactor = redactor

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [self.clean(r) for r in renderables]

    def clean(self, renderable: ConsoleRenderable) -> ConsoleRenderable:
        if isinstance(renderable, Text):
            return clean_text(renderable, self.redactor)
        if isinstance(renderable, Table):
            self._table(renderable)
            return renderable
        # A wrapper (rich's Padding, Panel, Align; the terminal's trimmed lines) keeps what
        # it wraps in ``.renderable``: clean that, or it would print uncleaned.
        inner = getattr(renderable, "renderable", None)
        if isinstance(inner, Text | Table):
            renderable.renderable = self.clean(inner)  # type: ignore[attr-defined]
        return renderable

    def _cell(self, cell: RenderableType) -> RenderableType:
        if isinstance(cell, str):
            # A table's str cell is markup, parsed later: the marker must stay literal.
            cleaned = clean_str(cell, self.redactor)
            return cleaned.replace(MARKER, escape(MARKER)) if cleaned != cell else cell
        if isinstance(cell, Text | Table):
            return self.clean(cell)
        return cell

    def _table(self, table: Table) -> None:
        # Cleaned in place: a table is built for one print. Column._cells is where rich
        # keeps a column's cells (rich 13-15); add_row appends to it.
        for column in table.columns:
            column._cells = [self._cell(c) for c in column._cells]
            column.header = self._cell(column.header)
        title = table.title
        if isinstance(title, str | Text):
            table.title = cast("str | Text", self._cell(title))


@contextlib.contextmanager
def sanitised(console: Console, redactor: Redactor | None) -> Iterator[Console]:
    """Every print to ``console`` inside the block goes through ``Sanitiser(redactor)``."""
    hook = Sanitiser(redactor)
    console.push_render_hook(hook)
    try:
        yield console
    finally:
        console.pop_render_hook()


__all__ = ["Sanitiser", "clean_str", "clean_text", "sanitised"]
