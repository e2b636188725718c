"""The live view's keys: the terminal in cbreak mode (keys arrive one by one, unechoed;
Ctrl-C still sends SIGINT), read by the event loop when they come, restored on the way
out whatever happens."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def keys_read(fd: int | None, on_key: Callable[[str], None]) -> Iterator[bool]:
    """Call ``on_key`` with each key typed on ``fd`` while the block runs; yields whether
    keys are read at all (not when ``fd`` is None or not a terminal)."""
    if fd is None or not os.isatty(fd):
        yield False
        return
    import termios
    import tty

    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        yield False
        return
    loop = asyncio.get_running_loop()

    def readable() -> None:
        try:
            data = os.read(fd, 64)
        except OSError:
            loop.remove_reader(fd)
            return
        if not data:  # the terminal went away
            loop.remove_reader(fd)
            return
        for char in data.decode("utf-8", errors="replace"):
            on_key(char)

    try:
        tty.setcbreak(fd)
        loop.add_reader(fd, readable)
        yield True
    finally:
        with contextlib.suppress(Exception):
            loop.remove_reader(fd)
        with contextlib.suppress(termios.error):
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


__all__ = ["keys_read"]
