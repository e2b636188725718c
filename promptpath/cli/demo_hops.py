"""What ``promptpath demo --hop NAME`` runs: which probe finds each demo hop, and how.

The hops themselves are in ``server/hops.py``; the demo traces through one with the canary
on (the reference endpoint's send stamps make each finding exact) and runs these probes.
"""

from __future__ import annotations

from promptpath.server.hops import HOPS, HopKind

#: hop -> the probes that find it (a clean hop runs them all and passes every one).
HOP_PROBES: dict[HopKind, tuple[str, ...]] = {
    "clean": ("buffering", "idle-timeout", "ghost-stream"),
    "buffering": ("buffering",),
    "compression": ("buffering",),
    "idle-timeout": ("idle-timeout",),
    "ghost-stream": ("ghost-stream",),
}
#: The idle hop cuts after 3 s: a 5 s pause finds it without a two-minute wait.
IDLE_MAX_S = 5.0

assert set(HOP_PROBES) == set(HOPS)
