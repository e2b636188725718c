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

    def as_dict(self) -> dict[str, object]:
        return {
            "probe": self.probe,
            "verdict": self.verdict.value,
            "summary": self.summary,
            "evidence": self.evidence,
            "advice": self.advice,
        }
