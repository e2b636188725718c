"""`promptpath vantage`'s options, declared once (the table cli/faces.py builds it from).

Kept apart from flags.py's table of run, probe and demo: `vantage` shares none of their
options, and its rows load only when `vantage` is built.
"""

from __future__ import annotations

from typing import Final

from promptpath.plan.flags import Flag

VANTAGE_ONLY: Final = frozenset({"vantage"})
PANEL: Final = "Vantage points"
OUT: Final = "Output"
DEFAULT_SINCE: Final = "1h"
DEFAULT_TIMEOUT_S: Final = 10.0

FLAGS: tuple[Flag, ...] = (
    Flag(
        dest="prometheus",
        decls=("--prometheus",),
        type=str | None,
        default=None,
        metavar="URL",
        help="The Prometheus (or Thanos Query, Mimir) API's base URL, e.g."
        " http://127.0.0.1:9090 (default: $PROMPTPATH_PROMETHEUS_URL).",
        panel=PANEL,
        commands=VANTAGE_ONLY,
    ),
    Flag(
        dest="target",
        decls=("--target",),
        type=str | None,
        default=None,
        metavar="NAME",
        help="Only this target: an exporter target's name (the instance label), or a URL"
        " (the target label).",
        panel=PANEL,
        commands=VANTAGE_ONLY,
    ),
    Flag(
        dest="module",
        decls=("--module",),
        type=str | None,
        default=None,
        metavar="M",
        help="Only this exporter module (the module label).",
        panel=PANEL,
        commands=VANTAGE_ONLY,
    ),
    Flag(
        dest="since",
        decls=("--since",),
        type=str,
        default=DEFAULT_SINCE,
        metavar="DURATION",
        help="The range the percentiles cover, back from now (90s, 15m, 1h, 2d).",
        panel=PANEL,
        commands=VANTAGE_ONLY,
    ),
    Flag(
        dest="by",
        decls=("--by",),
        type=str,
        default="vantage",
        metavar="LABEL",
        help="The label whose values are the rows (default vantage; e.g. region).",
        panel=PANEL,
        commands=VANTAGE_ONLY,
    ),
    Flag(
        dest="timeout",
        decls=("--timeout",),
        type=float,
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="How long Prometheus may take to answer, every query together.",
        panel=PANEL,
        commands=VANTAGE_ONLY,
    ),
    Flag(
        dest="cacert",
        decls=("--cacert",),
        type=str | None,
        default=None,
        metavar="FILE",
        help="CA bundle for an https:// Prometheus (default: the system's).",
        panel=PANEL,
        commands=VANTAGE_ONLY,
    ),
    Flag(
        dest="json_out",
        decls=("--json",),
        type=bool,
        default=False,
        help="Print the promptpath.vantage/1 JSON object on stdout instead of the table.",
        panel=OUT,
        commands=VANTAGE_ONLY,
    ),
    Flag(
        dest="html",
        decls=("--html",),
        type=str | None,
        default=None,
        metavar="FILE",
        help="Also write the table as a self-contained HTML page.",
        panel=OUT,
        commands=VANTAGE_ONLY,
    ),
)

__all__ = ["FLAGS"]
