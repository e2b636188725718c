"""`promptpath ARGS...` with a stamp at each phase of the run, for bench_startup.py --phases.

    python benchmarks/startup_phases.py run URL --json ...

Wraps a few functions of the run path (``STAMPED``; nothing else changes) and, at exit,
writes one JSON line to stderr: perf_counter_ns stamps, which on Linux are CLOCK_MONOTONIC
and so comparable with the parent's stamps around the process. A benchmark aid, not a
test; tests/unit/test_startup_phases.py checks that every function it stamps still exists
where it looks (the top-floor refactor moved two and broke it silently).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STAMPS: dict[str, int] = {"interpreter_up": time.perf_counter_ns()}
ROOT = Path(__file__).resolve().parents[1]

#: (module, attribute, label): ``label.in`` / ``label.out`` stamped around every call of
#: ``module.attribute``, looked up there at call time by the run path (a function imported
#: by name elsewhere must be wrapped where it is called from: ``session.finish_tls``).
STAMPED = (
    ("promptpath.cli.commands", "execute", "execute"),
    ("promptpath.tracer.orchestrator", "trace", "trace"),
    ("promptpath.tracer.session", "finish_tls", "finish_tls"),
    ("promptpath.tracer.h3discovery", "discover_h3", "discover_h3"),
    ("promptpath.modes.runner", "anyio", "anyio_run"),  # runner.anyio.run: the event loop
    ("promptpath.cli.commands", "deliver", "deliver"),
)


def stamp(name: str) -> None:
    STAMPS[name] = time.perf_counter_ns()


def wrap(inner: Callable[..., Any], label: str) -> Callable[..., Any]:
    """``inner`` with ``label.in`` and ``label.out`` stamped around each call."""
    if inspect.iscoroutinefunction(inner):

        @functools.wraps(inner)
        async def wrapped_async(*args: Any, **kwargs: Any) -> Any:
            stamp(f"{label}.in")
            try:
                return await inner(*args, **kwargs)
            finally:
                stamp(f"{label}.out")

        return wrapped_async

    @functools.wraps(inner)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        stamp(f"{label}.in")
        try:
            return inner(*args, **kwargs)
        finally:
            stamp(f"{label}.out")

    return wrapped


def install() -> None:
    """Wrap every STAMPED function (the modules imported here: after ``cli_imported``)."""
    for module_name, attr, label in STAMPED:
        module = importlib.import_module(module_name)
        target = getattr(module, attr)
        if inspect.ismodule(target):  # anyio: wrap its run()
            module, attr, target = target, "run", target.run
        setattr(module, attr, wrap(target, label))
    orchestrator = importlib.import_module("promptpath.tracer.orchestrator")
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

    orchestrator.trace = trace


def report() -> None:
    stamp("exit")
    sys.stderr.write("PHASES " + json.dumps(STAMPS) + "\n")


def main() -> None:
    """entry.main's steps, the stamps installed and written between them."""
    from promptpath.cli import entry, gchold

    gchold.hold()
    install()
    stamp("stamps_installed")
    code = entry.run(sys.argv[1:])
    stamp("returned")
    report()
    entry.end(code)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
