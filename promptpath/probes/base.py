"""The probe interface: a name, a declared cost, and ``async run(ctx) -> Finding``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from promptpath.core.findings import Finding
from promptpath.probes.settings import ProbeSettings

if TYPE_CHECKING:
    from promptpath.options import RunOptions
    from promptpath.result import TraceResult


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """What a probe may spend, stated before it runs and never exceeded."""

    requests: int = 0
    tokens: int = 0
    seconds: float = 0.0
    dns_queries: int = 0

    def describe(self) -> str:
        parts = []
        if self.requests:
            parts.append(f"{self.requests} request{'s' if self.requests != 1 else ''}")
        if self.tokens:
            parts.append(f"≤{self.tokens} tokens")
        if self.dns_queries:
            parts.append(f"≤{self.dns_queries} DNS queries")
        parts.append(f"≤{self.seconds:g} s")
        return ", ".join(parts)


def _no_progress(message: str) -> None:
    return None


@dataclass(kw_only=True)
class ProbeContext:
    options: RunOptions
    result: TraceResult | None  # the main traced request; may carry an error
    progress: Callable[[str], None] = _no_progress
    settings: ProbeSettings = field(default_factory=ProbeSettings)  # each probe reads its own


class Probe(ABC):
    name: ClassVar[str]
    description: ClassVar[str]

    @abstractmethod
    def cost(self, ctx: ProbeContext) -> Cost: ...

    @abstractmethod
    async def run(self, ctx: ProbeContext) -> Finding: ...


REGISTRY: dict[str, type[Probe]] = {}


def register(cls: type[Probe]) -> type[Probe]:
    REGISTRY[cls.name] = cls
    return cls
