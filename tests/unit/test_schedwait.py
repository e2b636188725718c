"""net/schedwait.py reads this thread's run-queue time from Linux's schedstat."""

from __future__ import annotations

import sys
import threading

import pytest

from promptpath.net.schedwait import run_queue_ns

pytestmark = pytest.mark.unit


@pytest.mark.skipif(sys.platform != "linux", reason="schedstat is Linux's")
def test_the_run_queue_time_is_a_count_that_never_goes_back() -> None:
    first = run_queue_ns()
    assert first is not None and first >= 0
    assert (run_queue_ns() or 0) >= first


@pytest.mark.skipif(sys.platform != "linux", reason="schedstat is Linux's")
def test_each_thread_reads_its_own() -> None:
    seen: list[int | None] = []
    worker = threading.Thread(target=lambda: seen.append(run_queue_ns()))
    worker.start()
    worker.join()
    assert seen and seen[0] is not None  # a fresh thread's own figure, from its own file
