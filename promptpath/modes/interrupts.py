"""Every way out of a run: a signal leaves the partial report, a closed pipe a known code.

SIGINT, SIGTERM and SIGHUP cancel the running trace through its cancel scope, scheduled on
the event loop, instead of raising into whatever line the loop happens to be on: the
trace's own cleanup runs, the partial result stays whole, and the caller reports it with
exit 128 + the signal (as shells report a process the signal killed). CI runners and
timeout(1) stop jobs with SIGTERM, a closed terminal or SSH session sends SIGHUP; they
deserve the JSON that Ctrl-C gets. A second signal ends the process at once, by that
signal: whoever sends it again has stopped waiting for a report.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import io
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import ParamSpec, TypeVar

import anyio
from rich.console import Console

from promptpath.core.exitcodes import ExitCode
from promptpath.environment import Environment

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

T = TypeVar("T")
P = ParamSpec("P")


def exit_code_of(signum: int) -> ExitCode:
    return ExitCode(128 + signum)


class Stopper:
    """The first stop signal received (``signum``), and the scope it cancels."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._cancel: Callable[[], object] | None = None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signum = signum
        if self._cancel is not None:
            self._cancel()

    async def run(self, main: Callable[[], Awaitable[T]]) -> T | None:
        """``main()``'s result, or None when a stop signal cancelled it."""
        loop = asyncio.get_running_loop()
        with anyio.CancelScope() as scope:
            # Python runs the handler in this thread between two bytecodes, maybe inside
            # the loop's own bookkeeping: only a callback the loop runs may cancel.
            self._cancel = functools.partial(loop.call_soon_threadsafe, scope.cancel)
            try:
                if self.signum is not None:  # arrived before the loop ran
                    scope.cancel()
                return await main()
            finally:
                self._cancel = None
        return None


@contextmanager
def stop_on_signals() -> Iterator[Stopper]:
    """Handle the stop signals while the block runs; the previous handlers come back after.

    A signal the process inherited as ignored (``nohup`` ignores SIGHUP) stays ignored, and
    outside the main thread (a library caller's worker) nothing is installed: Python allows
    handlers only there."""
    stopper = Stopper()
    previous: dict[int, Callable[[int, FrameType | None], object] | int] = {}
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            current = signal.getsignal(signum)
            if current is None or current == signal.SIG_IGN:  # None: set outside Python
                continue
            previous[signum] = current
            signal.signal(signum, stopper._on_signal)
    try:
        yield stopper
    finally:
        for restored, handler in previous.items():
            signal.signal(restored, handler)


def quiet_on_closed_pipe(command: Callable[P, int]) -> Callable[P, int]:
    """A reader that went away (``| head -1``, a closed terminal) ends the command with
    ExitCode.PIPE_CLOSED and no message: there is nobody left to read one.

    The command takes ``env``. Its real streams are pointed at /dev/null afterwards, or
    Python's flush at exit would fail again and print "Exception ignored ... BrokenPipe"."""

    @functools.wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> int:
        try:
            return command(*args, **kwargs)
        except BrokenPipeError:
            env = kwargs["env"]
            assert isinstance(env, Environment)
            _to_devnull(env)
            return int(ExitCode.PIPE_CLOSED)

    return wrapper


class PipeConsole(Console):
    """rich's Console, but a closed pipe raises BrokenPipeError for quiet_on_closed_pipe
    to handle: rich's own answer is SystemExit(1), and 1 is the probe-finding code."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to write, even from a finally block
        raise BrokenPipeError(errno.EPIPE, "the reader closed the pipe")


def _to_devnull(env: Environment) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        for stream in (env.stdout, env.stderr):
            try:
                fd = stream.fileno()
            except (OSError, ValueError, io.UnsupportedOperation):  # a test's StringIO
                continue
            os.dup2(devnull, fd)
    finally:
        os.close(devnull)
