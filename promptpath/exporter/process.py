"""The process' own figures for /metrics: open descriptors, resident memory, CPU, start, tasks.

Read from /proc on Linux (what Prometheus' client libraries read); elsewhere the figures
that need it are left out rather than guessed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import time

from promptpath.exporter.metrics import ProcessState

_START_UNIX = time.time()


def _start_unix() -> float:
    """When this process started: /proc/self/stat's starttime over the boot time."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            # The command name (field 2) may hold spaces and parentheses: split after it.
            fields = f.read().rsplit(")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of the whole line
        with open("/proc/stat", encoding="ascii") as f:
            btime = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _START_UNIX


START_UNIX = _start_unix()


def process_state() -> ProcessState:
    fds: int | None = None
    with contextlib.suppress(OSError):
        fds = len(os.listdir("/proc/self/fd")) - 1  # less the descriptor listdir opened
    rss: int | None = None
    with (
        contextlib.suppress(OSError, ValueError, IndexError),
        open("/proc/self/statm", encoding="ascii") as f,
    ):
        rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    times = os.times()
    try:
        tasks = len(asyncio.all_tasks())
    except RuntimeError:  # no running loop
        tasks = 0
    return ProcessState(
        open_fds=fds,
        max_fds=None if soft == resource.RLIM_INFINITY else soft,
        resident_bytes=rss,
        cpu_seconds=times.user + times.system,
        start_unix=START_UNIX,
        tasks=tasks,
    )


__all__ = ["START_UNIX", "process_state"]
