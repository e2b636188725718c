"""--count N one after another: N traced prompts in this process, fresh connections each
(every run a whole ``trace``), or with --reuse all over one connection, as --warm reuses it.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from promptpath.options import RunOptions
from promptpath.result import TraceResult
from promptpath.tracer.orchestrator import Tracer, trace
from promptpath.tracer.session import Session, TransportFactory, gc_held, refusal
from promptpath.tracer.strategy import OneConnection

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
    transport_factory: TransportFactory | None = None,
) -> list[TraceResult]:
    """``count`` traced prompts, ``interval_s`` apart (end of one to start of the next)."""
    if reuse and refusal(options) is None:  # trace() words why HTTP/3 cannot run, per run
        return await _reused(options, count, interval_s, on_start, on_run, transport_factory)
    results: list[TraceResult] = []
    for index in range(count):
        if index and interval_s:
            await anyio.sleep(interval_s)

        def started(result: TraceResult, index: int = index) -> None:
            if on_start is not None:
                on_start(index, result)

        result = await trace(options, on_start=started, transport_factory=transport_factory)
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
    transport_factory: TransportFactory | None,
) -> list[TraceResult]:
    # The one connection is reused while the peer keeps it open, and a new one opened
    # (dns, connect, tls stages and all) when it did not: that run's timeline shows it.
    session = Session(options, transport_factory=transport_factory)
    tracer = Tracer(options, session.transport, strategy=OneConnection(reuse=True))
    results: list[TraceResult] = []
    try:
        for index in range(count):
            if index and interval_s:
                await anyio.sleep(interval_s)
            # As trace() does, per run: the collection made before t0 (it takes ~10 ms,
            # which the request stage would show), none in the middle of a stream.
            with gc_held():
                result = session.new_result(tracer.sent)
                if on_start is not None:
                    on_start(index, result)
                await tracer.request(result.timeline)
            session.finish([result])
            results.append(result)
            if on_run is not None:
                on_run(index, result)
    finally:
        await tracer.aclose()
    return results


__all__ = ["OnRun", "trace_repeated"]
