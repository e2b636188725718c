"""The dialect table of docs/options.md, written from the plug-ins' ``docs`` rows.

``python -m promptpath.dialects.doctable`` prints it; tests/unit/test_dialect_table.py
holds the docs to it, so a new plug-in's row reaches the docs or the suite says so.
"""

from __future__ import annotations

from promptpath.dialects.plugins import dialects

__all__ = ["HEADER", "table"]

HEADER = (
    "| `--provider` | detected from the path | auth header | key variable |"
    " the end of the stream |\n|---|---|---|---|---|"
)


def table() -> str:
    """The Markdown table: its header, then each plug-in's rows in the registry's order."""
    rows = [
        f"| `{d.name}`{row.qualifier} | {row.detection} | {row.auth} | {row.keys} | {row.end} |"
        for d in dialects()
        for row in d.docs
    ]
    return "\n".join([HEADER, *rows])


if __name__ == "__main__":
    print(table())
