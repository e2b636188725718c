"""Run any mode interruptibly: the stop signals handled once, for every mode.

A mode's ``run()`` is cancelled through its cancel scope by the first SIGINT, SIGTERM or
SIGHUP (interrupts.py); the mode then reports what it measured, its in-flight runs marked
interrupted by ``mark_interrupted``, and the exit code is 128 + the signal.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import anyio

from promptpath.environment import Environment
from promptpath.modes.interrupts import Stopper, exit_code_of, stop_on_signals

if TYPE_CHECKING:
    from promptpath.result import TraceResult


class Interruptible:
    """The stop signals, handled from the moment the command starts (before its options
    are resolved: a CI runner may send SIGTERM at any instant) to the end of its run."""

    def __init__(self, stopper: Stopper, env: Environment) -> None:
        self._stopper, self._env = stopper, env

    def run(self, main: Callable[[], Awaitable[None]]) -> int | None:
        """Run ``main`` to its end or to the first stop signal (one that arrived before it
        began cancels it at once); that signal's number, if any, the "interrupted" line
        on stderr by then."""
        anyio.run(self._stopper.run, main)
        signum = self._stopper.signum
        if signum is not None:
            print(f"promptpath: interrupted ({signal.Signals(signum).name})", file=self._env.stderr)
        return signum


@contextmanager
def interruptible(env: Environment) -> Iterator[Interruptible]:
    """Handle SIGINT, SIGTERM and SIGHUP while the block runs (interrupts.stop_on_signals)."""
    with stop_on_signals() as stopper:
        yield Interruptible(stopper, env)


def run_interruptibly(main: Callable[[], Awaitable[None]], env: Environment) -> int | None:
    """``main`` run under the stop signals; the signal that cut it short, if any."""
    with interruptible(env) as runner:
        return runner.run(main)


def mark_interrupted(result: TraceResult, signum: int, *, before_start: bool = False) -> None:
    """Record the signal as the run's error, in the stage it cut (or before it began)."""
    from promptpath.core.errors import Interrupted
    from promptpath.tracer.orchestrator import phase_of, record_error

    stage = phase_of(result.timeline, result.options)
    name = signal.Signals(signum).name
    message = (
        f"interrupted by {name} before this run started"
        if before_start
        else f"interrupted by {name} in stage {stage!r}"
    )
    error = Interrupted(message, stage=stage, kind="interrupted")
    error.exit_code = exit_code_of(signum)  # the class's 130 is SIGINT's
    record_error(result.timeline, error)


__all__ = ["Interruptible", "interruptible", "mark_interrupted", "run_interruptibly"]
