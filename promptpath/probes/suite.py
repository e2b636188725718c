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
from promptpath.probes.settings import ProbeSettings
from promptpath.tracer.orchestrator import TraceResult

#: Built-in probe modules; each registers its class on import.
BUILTIN = (
    "promptpath.probes.buffering.probe",
    "promptpath.probes.idle_timeout.probe",
    "promptpath.probes.dns_cache.probe",
    "promptpath.probes.ghost_stream.probe",
    "promptpath.probes.ratelimit.probe",
    "promptpath.probes.tls.probe",
    "promptpath.probes.cors.probe",
    "promptpath.probes.path.probe",
    "promptpath.probes.mtu.probe",
    "promptpath.probes.upgrade.probe",
)

#: Slack over a probe's declared seconds before we stop it (scheduling noise, teardown).
GRACE_S = 5.0


def load_builtin() -> dict[str, type[Probe]]:
    for module in BUILTIN:
        importlib.import_module(module)  # each is part of the package: a failure is a bug
    return REGISTRY


def select(names: list[str]) -> list[type[Probe]]:
    registry = load_builtin()
    wanted: list[str] = []
    for name in names:
        for part in name.split(","):
            part = part.strip()
            if part == "all":
                wanted.extend(sorted(registry))
            elif part:
                wanted.append(part)
    unknown = [n for n in wanted if n not in registry]
    if unknown:
        known = ", ".join(sorted(registry)) or "none"
        raise UsageError(f"unknown probe {unknown[0]!r} (known: {known}, or 'all')")
    seen: list[str] = []
    for n in wanted:
        if n not in seen:
            seen.append(n)
    return [registry[n] for n in seen]


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
