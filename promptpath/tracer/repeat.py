"""--count N one after another: N traced prompts in this process, fresh connections each
(every run a whole ``trace``), or with --reuse all over one connection, as --warm reuses it.
"""

from __future__ import annotations

import gc
from collections.abc import Callable

import anyio

from promptpath.net import dns
from promptpath.net.tlsinfo import finish_tls
from promptpath.options import RunOptions
from promptpath.tracer.orchestrator import Tracer, TraceResult, new_timeline, trace, transport_for

#: Called with each run's index and result: as it starts, and as it ends.
OnRun = Callable[[int, TraceResult], None]


async def trace_repeated(
    options: RunOptions,
    *,
    count: int,
    interval_s: float = 0.0,
    reuse: bool = False,
    on_start: OnRun | None = None,
    on_run: OnRun | None = None,
) -> list[TraceResult]:
    """``count`` traced prompts, ``interval_s`` apart (end of one to start of the next)."""
    quic_refused = options.http == "3" and (
        options.target.scheme != "https" or options.proxy is not None
    )
    if reuse and not quic_refused:  # trace() words why HTTP/3 cannot run, once per run
        return await _reused(options, count, interval_s, on_start, on_run)
    results: list[TraceResult] = []
    for index in range(count):
        if index and interval_s:
            await anyio.sleep(interval_s)

        def started(result: TraceResult, index: int = index) -> None:
            if on_start is not None:
                on_start(index, result)

        result = await trace(options, on_start=started)
        results.append(result)
        if on_run is not None:
            on_run(index, result)
    return results


async def _reused(
    options: RunOptions,
    count: int,
    interval_s: float,
    on_start: OnRun | None,
    on_run: OnRun | None,
) -> list[TraceResult]:
    # What trace() loads before t0, so the first run does not time it.
    await dns.prepare(options.resolver)
    if options.target.scheme == "https":
        import cryptography.x509  # noqa: F401
    # The Tracer reuses its connection while the peer keeps it open, and opens a new one
    # (dns, connect, tls stages and all) when it did not: that run's timeline shows it.
    tracer = Tracer(options, transport_for(options))
    was_enabled = gc.isenabled()
    results: list[TraceResult] = []
    try:
        for index in range(count):
            if index and interval_s:
                await anyio.sleep(interval_s)
            # As trace() does: no full collection in the middle of a stream, and the one
            # made here before t0 (it takes ~10 ms, which the request stage would show).
            gc.collect()
            gc.disable()
            result = TraceResult(options=options, timeline=new_timeline())
            if on_start is not None:
                on_start(index, result)
            try:
                await tracer.request(result.timeline)
            finally:
                if was_enabled:
                    gc.enable()
            finish_tls(result.timeline.tls)
            results.append(result)
            if on_run is not None:
                on_run(index, result)
    finally:
        await tracer.aclose()
    return results


__all__ = ["OnRun", "trace_repeated"]
