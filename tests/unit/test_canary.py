"""The canary controls the probes send, read by the reference endpoint's own parser."""

from __future__ import annotations

from promptpath.probes.canary import canary_headers
from promptpath.server.behaviour import Behaviour, from_headers

#: A server started with every default a probe must not inherit.
HOSTILE = Behaviour(
    ttft_ms=900,
    tokens=5,
    rate=1,
    pause_after=2,
    pause_s=30,
    keepalive_s=5,
    truncate_after=3,
    error_after=4,
    batch=8,
)


def test_paced_stream_overrides_every_server_default_that_shapes_it() -> None:
    got = from_headers(HOSTILE, canary_headers(tokens=60, rate=20.0))
    # pause_s is left as the server had it: without pause_after it never applies.
    assert got == Behaviour(ttft_ms=0, tokens=60, rate=20.0, batch=1, pause_s=HOSTILE.pause_s)


def test_pause_with_keepalives_reaches_the_server_as_asked() -> None:
    got = from_headers(
        HOSTILE, canary_headers(tokens=6, rate=20.0, pause_after=3, pause_s=1.5, keepalive_s=0.5)
    )
    assert got == Behaviour(
        ttft_ms=0, tokens=6, rate=20.0, pause_after=3, pause_s=1.5, keepalive_s=0.5, batch=1
    )
