"""The diff_reports tool: `promptpath diff --json` of two saved documents (or two time
ranges of one watch history), with its verdict line. Reads files, sends nothing, spends
nothing. The reading and the judgement are the diff command's own (cli/diff.py,
core/change); a file that is no promptpath document is the same usage error, naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from promptpath.core.textsafe import visible
from promptpath.mcpserver.jobs import Reply


def diff_reports(arguments: Mapping[str, Any]) -> Reply:
    """The diff of ``before`` and ``after`` (paths), with the diff flags' values."""
    from promptpath.cli.diff import DiffArgs, read_sides
    from promptpath.core.change.compose import diff_runs
    from promptpath.report.diff import diff_json, verdict_word

    args = DiffArgs.of(
        {
            "before_file": arguments["before"],
            "after_file": arguments.get("after"),
            "before_range": arguments.get("before_range"),
            "after_range": arguments.get("after_range"),
            "protocol": arguments.get("protocol", "2"),
        }
    )
    (b_side, b_runs), (a_side, a_runs) = read_sides(args)
    diff = diff_runs(b_runs, a_runs, before_side=b_side, after_side=a_side)
    # The terminal's last line (report/diff.py render_diff): the word, then the headline.
    return Reply(
        verdict=f"{verdict_word(diff)}: {visible(diff.headline)}", document=diff_json(diff)
    )


__all__ = ["diff_reports"]
