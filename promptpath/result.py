"""What a traced run hands every reporter, probe and export: its timeline and findings.

It lives outside ``tracer/`` so that reporters read a run without importing the code
that traced it (tests/unit/test_layers.py holds them to that).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from promptpath.core.errors import PromptpathError
from promptpath.core.findings import Finding
from promptpath.core.timeline import Timeline
from promptpath.options import RunOptions


@dataclass(kw_only=True)
class TraceResult:
    """A traced request: its timeline, the error that ended it (if any), and findings."""

    options: RunOptions
    timeline: Timeline
    warm: TraceResult | None = None
    findings: list[Finding] = field(default_factory=list)
    h3: dict[str, Any] | None = None  # HTTP/3 discovery (Alt-Svc, HTTPS RR), TCP runs only

    @property
    def exc(self) -> PromptpathError | None:
        """The error that ended the trace: kept in one place, ``timeline.error``."""
        error = self.timeline.error
        return None if error is None else error.exc

    @property
    def ok(self) -> bool:
        return self.exc is None and (self.warm is None or self.warm.ok)


__all__ = ["TraceResult"]
