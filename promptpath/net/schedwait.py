"""How long this thread has waited for a CPU: Linux's schedstat run-queue time.

Our read loop can be late for two reasons the stamps alone cannot tell apart from a hop
holding events: the loop was busy, or the process was runnable and another one had the
core. In the second case TCP merges the packets that wait in the receive queue, and the
merged bytes carry the last packet's receive stamp (rxstamp.py), so a burst sent over
30 ms looks delivered at once. ``/proc/thread-self/schedstat`` gives the time the thread
spent waiting on a run queue (ns, its second field); the Recorder keeps the wait between
one read (or write) and the next, and coalescing.py does not count a merge that our own
wait explains against the path. Checked by hand on this kernel (6.18), a trace pinned to
CPU 0 beside a SCHED_FIFO process busy 30 ms of every 100 ms on that CPU: 414 of 2,000
events at 1,000 tokens/s were counted as held by the path, every merged read carrying a
29-31 ms wait of ours since the read before it (0 such events without the hog).

Reading it costs ~0.5 µs (one pread on a descriptor kept open per thread). None where
the file is missing (not Linux, a kernel without CONFIG_SCHED_INFO).
"""

from __future__ import annotations

import os
import threading

_SCHEDSTAT = "/proc/thread-self/schedstat"
_local = threading.local()


def run_queue_ns() -> int | None:
    """Nanoseconds the calling thread has waited on a run queue since it started."""
    fd: int | None = getattr(_local, "fd", None)
    if fd is None:
        try:
            fd = os.open(_SCHEDSTAT, os.O_RDONLY)
        except OSError:
            fd = -1
        _local.fd = fd
    if fd < 0:
        return None
    try:
        return int(os.pread(fd, 96, 0).split()[1])
    except (OSError, ValueError, IndexError):
        return None


__all__ = ["run_queue_ns"]
