"""Waiting for an observable event instead of sleeping a fixed time.

A fixed sleep is either too short on a loaded machine (a flake) or longer than needed
everywhere else; polling for the event itself, with a deadline, is neither.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")
POLL_S = 0.02


def wait_for(check: Callable[[], T], *, timeout: float, what: str) -> T:
    """Call ``check`` until it returns something truthy, and return that; fail the test
    naming ``what`` when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"waited {timeout:g} s for {what}")
        time.sleep(POLL_S)


def unread_socket_bytes(pid: int) -> int:
    """Bytes that arrived on process ``pid``'s TCP and UDP sockets and it has not read
    yet (Linux: the rx_queue column of /proc/net/{tcp,udp}{,6})."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    unread = 0
    for table in ("tcp", "tcp6", "udp", "udp6"):
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            if fields[9] in inodes:
                unread += int(fields[4].split(":")[1], 16)
    return unread
