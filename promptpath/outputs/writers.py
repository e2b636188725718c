"""Each output format's writer: the JSON report in, the format's text out.

The rows of outputs/formats.py name these as ``"promptpath.outputs.writers:NAME"``; each
imports its renderer from report/ only when its format is written, so a run without
--junit never loads the JUnit renderer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from promptpath.outputs.formats import WriteContext


def json_text(report: Mapping[str, Any], _context: WriteContext) -> str:
    """--json: the report as one line (report/json.py, checked against schema.json)."""
    from promptpath.report.json import dumps

    return dumps(dict(report))


def junit(report: Mapping[str, Any], context: WriteContext) -> str:
    from promptpath.report import junit

    return junit.render(report, fail_on=context.fail_on)


def har(report: Mapping[str, Any], _context: WriteContext) -> str:
    from promptpath.report import har

    return json.dumps(har.render(report), indent=2) + "\n"


def prometheus(report: Mapping[str, Any], context: WriteContext) -> str:
    """--prom-textfile, --pushgateway and the exporter's /probe: the exposition text."""
    from promptpath.report import prometheus

    return prometheus.render(report, labels=dict(context.labels))


def html(report: Mapping[str, Any], context: WriteContext) -> str:
    if report.get("schema") == "promptpath.diff/1":
        from promptpath.report.diff_html import render_diff_html

        return render_diff_html(report, command=context.command)
    from promptpath.report.html import render_html

    return render_html(report, command=context.command)


def markdown(report: Mapping[str, Any], context: WriteContext) -> str:
    from promptpath.report.markdown import render_markdown

    return render_markdown(report, command=context.command)


def svg(report: Mapping[str, Any], _context: WriteContext) -> str:
    from promptpath.report.svg import render_svg

    return render_svg(report)


__all__ = ["har", "html", "json_text", "junit", "markdown", "prometheus", "svg"]
