"""The interface every mode implements, and the Report each returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console


def _no_render(_console: Console) -> None:
    return None


@dataclass(kw_only=True)
class Report:
    """One run's outcome, whatever the mode."""

    code: int
    render: Callable[[Console], None] = _no_render
    #: Builds the JSON object; None when nothing was measured (stopped before the first
    #: run began: the exit code alone says so).
    build: Callable[[], dict[str, Any]] | None = None
    _body: dict[str, Any] | None = field(default=None, repr=False)

    def json(self) -> dict[str, Any]:
        """The JSON object, built on first use and kept: stdout and exports read one."""
        assert self.build is not None, "nothing was measured"
        if self._body is None:
            self._body = self.build()
        return self._body


class Mode(Protocol):
    async def run(self) -> None:
        """Do the mode's work; cancelled (not raised into) by a stop signal."""

    def report(self, signum: int | None) -> Report:
        """What was measured, with ``signum`` the stop signal that cut it short, if any."""


__all__ = ["Mode", "Report"]
