"""`promptpath ARGS...` with a stamp at each phase of the run, for bench_startup.py --phases.

    python benchmarks/startup_phases.py run URL --json ...

Wraps a few functions of the run path (nothing else changes) and, at exit, writes one JSON
line to stderr: perf_counter_ns stamps, which on Linux are CLOCK_MONOTONIC and so
comparable with the parent's stamps around the process. A benchmark aid, not a test.
"""

from __future__ import annotations

import atexit
import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAMPS: dict[str, int] = {"interpreter_up": time.perf_counter_ns()}
ROOT = Path(__file__).resolve().parents[1]


def stamp(name: str) -> None:
    STAMPS[name] = time.perf_counter_ns()


def around(module: Any, name: str, label: str) -> None:
    """Stamp ``label.in`` and ``label.out`` around every call of ``module.name``."""
    inner: Callable[..., Any] = getattr(module, name)
    if _is_async(inner):

        @functools.wraps(inner)
        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            stamp(f"{label}.in")
            try:
                return await inner(*args, **kwargs)
            finally:
                stamp(f"{label}.out")

        setattr(module, name, wrapped_async)
    else:

        @functools.wraps(inner)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            stamp(f"{label}.in")
            try:
                return inner(*args, **kwargs)
            finally:
                stamp(f"{label}.out")

        setattr(module, name, wrapped)


def _is_async(fn: Callable[..., Any]) -> bool:
    import inspect

    return inspect.iscoroutinefunction(fn)


def main() -> int:
    import anyio

    from promptpath import cli, commands
    from promptpath.tracer import h3discovery, orchestrator

    stamp("cli_imported")
    around(orchestrator, "trace", "trace")
    around(orchestrator, "finish_tls", "finish_tls")
    around(h3discovery, "discover_h3", "discover_h3")
    around(commands, "emit", "emit")
    around(anyio, "run", "anyio_run")
    real_trace = orchestrator.trace

    async def trace(*args: Any, **kwargs: Any) -> Any:
        result = await real_trace(*args, **kwargs)
        tl = result.timeline
        STAMPS["t0"] = tl.t0_ns
        if "end" in tl.milestones:
            STAMPS["end"] = tl.milestones["end"]
        if tl.closed_ns is not None:
            STAMPS["closed"] = tl.closed_ns
        return result

    orchestrator.trace = trace  # type: ignore[assignment]
    try:
        return cli.main(sys.argv[1:])
    finally:
        stamp("main_returned")


@atexit.register
def _report() -> None:
    stamp("atexit")
    sys.stderr.write("PHASES " + json.dumps(STAMPS) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
