"""Probe settings for tests that run probes without the command line."""

from __future__ import annotations

from promptpath.probes.settings import (
    CanarySettings,
    ControlsVia,
    DNSCacheSettings,
    IdleTimeoutSettings,
    ProbeSettings,
)


def probe_settings(
    *,
    canary: bool = False,
    controls: ControlsVia = "both",
    idle_max: float | None = None,
    dns_recheck: float | None = None,
    authoritative: str | None = None,
) -> ProbeSettings:
    """The settings --canary, --canary-controls, --idle-max, --dns-recheck and
    --authoritative would give."""
    dns = DNSCacheSettings(authoritative=authoritative)
    return ProbeSettings(
        canary=CanarySettings(on=canary, controls=controls),
        idle_timeout=IdleTimeoutSettings()
        if idle_max is None
        else IdleTimeoutSettings(max_s=idle_max),
        dns_cache=dns
        if dns_recheck is None
        else DNSCacheSettings(recheck_s=dns_recheck, authoritative=authoritative),
    )
