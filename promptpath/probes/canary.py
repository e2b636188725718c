"""Probes against the reference endpoint (``--canary``): the request controls it obeys.

``promptpath serve`` reads ``x-promptpath-*`` request headers (``server/behaviour.py``);
a probe sends every control that could shape its stream, so a server started with other
defaults (pauses, batching, errors) cannot change what the probe measures.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from promptpath.options import RunOptions


def is_canary(options: RunOptions) -> bool:
    """The target is ``promptpath serve`` (``--canary``): it obeys control headers."""
    return bool(options.probe_options.get("canary", False))


def canary_headers(
    *,
    tokens: int,
    rate: float,
    pause_after: int | None = None,
    pause_s: float = 0.0,
    keepalive_s: float = 0.0,
) -> tuple[tuple[str, str], ...]:
    """A paced stream of ``tokens`` at ``rate`` per second, one token per event from the
    start; a pause of ``pause_s`` after token ``pause_after`` only when that is given."""
    if pause_after is None:
        pause: tuple[tuple[str, str], ...] = (("x-promptpath-pause-after", "off"),)
    else:
        pause = (
            ("x-promptpath-pause-after", str(pause_after)),
            ("x-promptpath-pause-s", f"{pause_s:g}"),
        )
    return (
        ("x-promptpath-tokens", str(tokens)),
        ("x-promptpath-rate", f"{rate:g}"),
        ("x-promptpath-ttft-ms", "0"),
        ("x-promptpath-batch", "1"),
        *pause,
        ("x-promptpath-keepalive-s", f"{keepalive_s:g}"),
        ("x-promptpath-truncate-after", "off"),
        ("x-promptpath-error-after", "off"),
    )
