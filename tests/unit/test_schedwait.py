"""net/schedwait.py reads the calling thread's own run-queue time from Linux's schedstat."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from promptpath.net.schedwait import run_queue_ns

pytestmark = [
    pytest.mark.unit,
    pytest.mark.skipif(sys.platform != "linux", reason="schedstat is Linux's"),
]


def _file_figure() -> int:
    """This thread's run-queue time, read from its task's own schedstat file."""
    text = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat").read_text()
    return int(text.split()[1])


def _bracketed() -> tuple[int, int | None, int]:
    before = _file_figure()
    got = run_queue_ns()
    return before, got, _file_figure()


def test_the_figure_is_the_calling_threads_own_counter() -> None:
    # Bracketed by reads of this task's own file: between them, never outside. A reading
    # of another thread's counter (the process leader's, /proc/self/schedstat) would fall
    # outside the worker's bracket below.
    before, got, after = _bracketed()
    assert got is not None and before <= got <= after
    seen: list[tuple[int, int | None, int]] = []
    worker = threading.Thread(target=lambda: seen.append(_bracketed()))
    worker.start()
    worker.join()
    w_before, w_got, w_after = seen[0]
    assert w_got is not None and w_before <= w_got <= w_after
    assert w_after < before or w_after != after  # a fresh thread's counter, not the main one's
