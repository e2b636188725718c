"""Run the probes a user asked for, each within its declared cost, never crashing the report."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable

import anyio

from promptpath.core.errors import UsageError
from promptpath.core.findings import Finding, Verdict
from promptpath.options import RunOptions
from promptpath.probes.base import REGISTRY, Probe, ProbeContext
from promptpath.probes.catalog import NAMES, module_of
from promptpath.probes.settings import ProbeSettings
from promptpath.tracer.orchestrator import TraceResult

#: Slack over a probe's declared seconds before we stop it (scheduling noise, teardown).
GRACE_S = 5.0


def load(name: str) -> type[Probe]:
    """The class of probe ``name`` (a name from the catalogue), its module imported."""
    importlib.import_module(module_of(name))  # part of the package: a failure is a bug
    return REGISTRY[name]


def load_builtin() -> dict[str, type[Probe]]:
    """Every probe of the catalogue, by name."""
    return {name: load(name) for name in NAMES}


def select(names: list[str]) -> list[type[Probe]]:
    """The probes asked for (names, comma lists, ``all``), checked against the catalogue
    before any probe's module is imported; each once, in the order asked."""
    wanted: list[str] = []
    for name in names:
        for part in name.split(","):
            part = part.strip()
            if part == "all":
                wanted.extend(sorted(NAMES))
            elif part:
                wanted.append(part)
    unknown = [n for n in wanted if n not in NAMES]
    if unknown:
        known = ", ".join(sorted(NAMES))
        raise UsageError(f"unknown probe {unknown[0]!r} (known: {known}, or 'all')")
    seen: list[str] = []
    for n in wanted:
        if n not in seen:
            seen.append(n)
    return [load(n) for n in seen]


async def run_probes(
    options: RunOptions,
    result: TraceResult | None,
    probes: list[type[Probe]],
    progress: Callable[[str], None],
    settings: ProbeSettings | None = None,
) -> list[Finding]:
    """Run each probe in turn; an exception or an overrun becomes an ``error`` finding."""
    findings: list[Finding] = []
    for cls in probes:
        probe = cls()
        ctx = ProbeContext(
            options=options, result=result, progress=progress, settings=settings or ProbeSettings()
        )
        cost = probe.cost(ctx)
        progress(f"probe {cls.name}: {cls.description} (cost: {cost.describe()})")
        start = time.perf_counter()
        try:
            with anyio.fail_after(cost.seconds + GRACE_S if cost.seconds else None):
                finding = await probe.run(ctx)
        except TimeoutError:
            finding = Finding(
                probe=cls.name,
                verdict=Verdict.ERROR,
                summary=f"stopped after {cost.seconds + GRACE_S:g} s: over its declared cost",
            )
        except Exception as exc:  # a probe bug must not take the report down with it
            finding = Finding(
                probe=cls.name,
                verdict=Verdict.ERROR,
                summary=f"the probe failed: {type(exc).__name__}: {exc}",
            )
        elapsed = time.perf_counter() - start
        progress(f"probe {cls.name}: {finding.verdict.value} in {elapsed:.1f} s")
        findings.append(finding)
    return findings
