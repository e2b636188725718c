"""The verdict line: the one line a person pastes into a ticket, what is wrong first. Pure.

A run that broke says where (``FAILED in tls: …``). A run that completed leads with what
makes its exit code non-zero: each SLO it breached (``FAILED: ttft_p95 < 800ms breached
(912 ms)``), then the worst probe finding at or above ``--fail-on`` (``FAIL buffering: a
hop delivers the stream in 3.9 KiB blocks (Via: 1.1 nginx)``), then, after a dash, where
the time went. With nothing wrong it is ``OK: `` and where the time went.

Every channel shows this one line (the terminal, ``--json``'s ``headline``, the HTML
banner, the SVG, JUnit), and ``tone_of`` reads back from it the colour to show it in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from promptpath.core.analysis import Metrics, failure_line, where_time_went
from promptpath.core.findings import Finding, Verdict
from promptpath.core.timeline import Timeline

if TYPE_CHECKING:
    from promptpath.core.slo import SLOResult  # a plain run never loads the SLO grammar

Tone = Literal["ok", "warn", "fail"]

#: The first word of a verdict line, and the tone it is shown in.
_TONES: dict[str, Tone] = {"FAILED": "fail", "FAIL": "fail", "ERROR": "fail", "WARN": "warn"}


def counts(verdict: Verdict, fail_on: str) -> bool:
    """A finding with this verdict makes the run fail under ``--fail-on``."""
    bar = Verdict.WARN.severity if fail_on == "warn" else Verdict.FAIL.severity
    return verdict.severity >= bar


def counted(findings: Sequence[Finding], fail_on: str) -> list[Finding]:
    """The findings at or above ``--fail-on``, worst first (FAIL before a probe's ERROR;
    otherwise in the order the probes ran)."""
    hits = [f for f in findings if counts(f.verdict, fail_on)]
    return sorted(hits, key=lambda f: (-f.verdict.severity, f.verdict is Verdict.ERROR))


def finding_lead(finding: Finding) -> str:
    """``FAIL buffering: a hop delivers the stream in 3.9 KiB blocks (Via: 1.1 nginx)``."""
    return f"{finding.verdict.value.upper()} {finding.probe}: {finding.lead_words}"


def wrong_first(
    findings: Sequence[Finding], fail_on: str, slos: Sequence[SLOResult] = ()
) -> str | None:
    """What makes the run fail, most serious first; None when nothing does."""
    parts: list[str] = []
    breached = [r for r in slos if not r.ok]
    if breached:
        parts.append("FAILED: " + "; ".join(r.breach() for r in breached))
    worst = counted(findings, fail_on)
    if worst:
        lead = finding_lead(worst[0])
        if len(worst) > 1:
            more = worst[1:]
            names = ", ".join(dict.fromkeys(f.probe for f in more))
            lead += f" (and {len(more)} more: {names})"
        parts.append(lead)
    return "; ".join(parts) or None


def run_line(
    timeline: Timeline,
    metrics: Metrics,
    *,
    findings: Sequence[Finding] = (),
    fail_on: str = "fail",
    slos: Sequence[SLOResult] = (),
) -> str:
    """The verdict line of one run: what broke or what is wrong first, then the figures."""
    wrong = wrong_first(findings, fail_on, slos)
    failed = failure_line(timeline, metrics)
    if failed is not None:
        # The stage that broke comes first; a probe may still say why (a stale address).
        return failed if wrong is None else f"{failed}; {wrong}"
    figures = where_time_went(timeline, metrics)
    return f"OK: {figures}" if wrong is None else f"{wrong} — {figures}"


def tone_of(line: str) -> Tone:
    """The colour a verdict line is shown in, from its first word."""
    word = line.split(" ", 1)[0].rstrip(":")
    return _TONES.get(word, "ok")


__all__ = ["Tone", "counted", "counts", "finding_lead", "run_line", "tone_of", "wrong_first"]
