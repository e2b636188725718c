"""Probe findings: what a probe concluded, on which evidence, and what to change."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Verdict(str, Enum):  # noqa: UP042 - StrEnum changes str(member)
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"

    @property
    def severity(self) -> int:
        """Order used by --fail-on: pass/skip < warn < fail; error counts as fail."""
        return {"pass": 0, "skip": 0, "warn": 1, "fail": 2, "error": 2}[self.value]


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    probe: str
    verdict: Verdict
    summary: str  # one line a person can paste into a ticket
    evidence: dict[str, object] = field(default_factory=dict)  # JSON-serialisable
    advice: list[str] = field(default_factory=list)
    #: The few words that lead the verdict line (``a hop delivers the stream in 3.9 KiB
    #: blocks (Via: 1.1 nginx)``); empty: the summary's first clause.
    lead: str = ""

    @property
    def lead_words(self) -> str:
        return self.lead or first_clause(self.summary)

    def as_dict(self) -> dict[str, object]:
        return {
            "probe": self.probe,
            "verdict": self.verdict.value,
            "summary": self.summary,
            "lead": self.lead_words,
            "evidence": self.evidence,
            "advice": self.advice,
        }


#: A first clause shorter than this is a label ("TLS: ..."), not a statement: read on.
_MIN_CLAUSE = 16


def first_clause(summary: str) -> str:
    """``summary`` up to its first ``; `` or ``: `` outside brackets (at least a few words):
    ``the certificate expired on 2026-12-05; incomplete chain: …`` leads with its expiry."""
    depth = 0
    for i, char in enumerate(summary):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char in ";:" and depth == 0 and summary[i + 1 : i + 2] == " " and i >= _MIN_CLAUSE:
            return summary[:i]
    return summary
