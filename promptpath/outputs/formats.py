"""The output formats, one row each: the option that asks for it, its writer, where it goes.

``--json`` prints on stdout; ``--otlp-endpoint`` sends to a collector; ``--pushgateway``
pushes; the others are files, checked before the first packet and written after the run
(outputs/deliver.py). `run`, `probe` and `demo` take their options from these rows
(plan/flags.py builds them), and the exporter answers /probe with a row's writer.

A writer is named as ``"module:function"`` and imported only when its format is written:
every ``--help`` reads this module, which must not load the renderers of report/ (nor may
the plan storey import them: tests/unit/test_layers.py). A writer takes the JSON report
and a WriteContext (the ExportPlan: --fail-on, --label, the command line) and returns the text.

Adding a format is its writer plus one row here: e.g. ``--csv`` is a renderer in
report/csv.py, a three-line ``csv`` writer in outputs/writers.py, and a row
``Format(dest="csv", flag="--csv", goes="file", writer="promptpath.outputs.writers:csv",
...)``; the option, its --help line, its destination check and its write follow.

This module is read by every --help: the standard library only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

#: Where a format goes: printed on stdout, sent to an OTLP collector, pushed to a
#: Pushgateway, or written to a file checked before the run.
Goes = Literal["stdout", "collector", "push", "file"]


if TYPE_CHECKING:  # for the type checker alone: a Protocol class costs every --help

    class WriteContext(Protocol):
        """What a writer may read besides the report (outputs.deliver.ExportPlan has it)."""

        @property
        def fail_on(self) -> str: ...
        @property
        def labels(self) -> tuple[tuple[str, str], ...]: ...
        @property
        def command(self) -> tuple[str, ...]: ...

    #: A writer: the JSON report (a run or a series) and the context, to the format's text.
    Writer = Callable[[Mapping[str, Any], WriteContext], str]


_RUN: Final = frozenset({"run"})
_EVERY: Final = frozenset({"run", "probe", "demo"})
#: The reports `diff` writes too (its JSON and its HTML page, from the diff's own object).
_WITH_DIFF: Final = _EVERY | {"diff"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Format:
    """One output format: how it is asked for, how it is written, where it goes."""

    dest: str  # the option's parameter name (the key of the parsed values)
    flag: str  # its one spelling
    help: str
    goes: Goes
    #: "module:function" of ``(report, ExportPlan) -> str``; None for the OTLP export,
    #: which the OpenTelemetry SDK encodes itself (outputs/otlp.py).
    writer: str | None
    #: What the option takes; None for a switch (--json).
    metavar: str | None = "FILE"
    commands: frozenset[str] = _RUN
    #: Read by machines (CI, monitoring): a single run or a series, never --compare-http.
    machine: bool = False

    def render(self, report: Mapping[str, Any], plan: WriteContext) -> str:
        """The format's text of ``report``, its writer imported now."""
        assert self.writer is not None, f"{self.flag} has no writer of its own"
        return writer(self.writer)(report, plan)


def writer(reference: str) -> Writer:
    """The function a ``"module:function"`` reference names."""
    module, _, name = reference.partition(":")
    function: Writer = getattr(importlib.import_module(module), name)
    return function


_WRITERS: Final = "promptpath.outputs.writers"

FORMATS: tuple[Format, ...] = (
    Format(
        dest="json_out",
        flag="--json",
        metavar=None,
        help="Print one JSON object on stdout.",
        goes="stdout",
        writer=f"{_WRITERS}:json_text",
        commands=_WITH_DIFF,
    ),
    Format(
        dest="junit",
        flag="--junit",
        help="Also write the run as JUnit XML to FILE.",
        goes="file",
        writer=f"{_WRITERS}:junit",
        machine=True,
    ),
    Format(
        dest="har",
        flag="--har",
        help="Also write the run as a HAR 1.2 log to FILE.",
        goes="file",
        writer=f"{_WRITERS}:har",
        machine=True,
    ),
    Format(
        dest="prom_textfile",
        flag="--prom-textfile",
        help="Also write Prometheus metrics to FILE (node_exporter textfile collector; atomic).",
        goes="file",
        writer=f"{_WRITERS}:prometheus",
        machine=True,
    ),
    Format(
        dest="pushgateway",
        flag="--pushgateway",
        metavar="URL",
        help="Also push Prometheus metrics to this Pushgateway (job promptpath).",
        goes="push",
        writer=f"{_WRITERS}:prometheus",
        machine=True,
    ),
    Format(
        dest="otlp_endpoint",
        flag="--otlp-endpoint",
        metavar="URL",
        help="Also send the run's spans and GenAI metrics over OTLP/HTTP to this collector"
        " (/v1/traces, /v1/metrics under URL; default $OTEL_EXPORTER_OTLP_ENDPOINT; needs the"
        " otel extra).",
        goes="collector",
        writer=None,
        machine=True,
    ),
    Format(
        dest="html",
        flag="--html",
        help="Also write the report as one self-contained HTML page (opens offline, prints)"
        " to FILE: for a ticket.",
        goes="file",
        writer=f"{_WRITERS}:html",
        commands=_WITH_DIFF,
    ),
    Format(
        dest="markdown",
        flag="--markdown",
        help="Also write a Markdown summary (verdict, stages, TTFT, findings, the command"
        " to reproduce) to FILE: to paste into a ticket.",
        goes="file",
        writer=f"{_WRITERS}:markdown",
        commands=_EVERY,
    ),
    Format(
        dest="svg",
        flag="--svg",
        help="Also write the waterfall and token timeline as one SVG image to FILE.",
        goes="file",
        writer=f"{_WRITERS}:svg",
        commands=_EVERY,
    ),
)

BY_DEST: Final[Mapping[str, Format]] = {fmt.dest: fmt for fmt in FORMATS}


def going(*where: Goes) -> tuple[Format, ...]:
    """The formats that go ``where``, in the table's order."""
    return tuple(fmt for fmt in FORMATS if fmt.goes in where)


def formats_of(command: str) -> tuple[Format, ...]:
    """The formats ``command`` offers, in the table's order."""
    return tuple(fmt for fmt in FORMATS if command in fmt.commands)


#: The exports --compare-http refuses (--otlp-endpoint is named on its own: the
#: environment's collector is skipped rather than refused).
MACHINE_EXPORTS: Final = "/".join(fmt.flag for fmt in going("file", "push") if fmt.machine)

__all__ = [
    "BY_DEST",
    "FORMATS",
    "MACHINE_EXPORTS",
    "Format",
    "Goes",
    "formats_of",
    "going",
    "writer",
]
