"""A client that waits for a CPU does not blame the path (net/schedwait.py).

Checked by hand first (linux 6.18, 2 cores): a trace pinned to CPU 0, the reference endpoint
on CPU 1, 2,000 tokens at 1,000/s, and beside the trace on CPU 0 a SCHED_FIFO process busy
30 ms of every 100 ms. Each burst keeps the trace off its core for ~30 ms; the tokens sent
meanwhile merge in its TCP receive queue and carry the last one's receive stamp, so the
stamps alone read as a hop holding them: 414 of 2,000 events counted as path coalescing
(0 without the busy process), every such read carrying a 29-31 ms run-queue wait of the
trace's since the read before it. With that wait taken off, none is the path's.

The trace runs in a process of its own: pinning and the busy neighbour must not touch the
test worker. Root only (SCHED_FIFO); in the timed group, so no timing-bound test runs
beside the busy neighbour.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.lab

SCRIPT = textwrap.dedent(
    """
    import json, os, subprocess, sys, tempfile, time
    import anyio
    from promptpath.cli.commands import RunArgs, build_options
    from promptpath.core.coalescing import coalescing
    from promptpath.core.timeline import content_events
    from promptpath.tracer.orchestrator import trace

    server = subprocess.Popen(
        ["taskset", "-c", "1", sys.executable, "-m", "promptpath.server", "--port", "0",
         "--no-http3"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    hog = None
    try:
        port = json.loads(server.stdout.readline())["port"]
        os.sched_setaffinity(0, {0})
        hog = subprocess.Popen(["chrt", "-f", "10", "taskset", "-c", "0", sys.executable, "-c",
            "import time\\nwhile True:\\n t = time.perf_counter()\\n"
            " while time.perf_counter() - t < 0.03: pass\\n time.sleep(0.07)"])
        time.sleep(0.2)
        args = RunArgs(target=f"http://127.0.0.1:{port}/v1/chat/completions", http="1.1",
                       max_tokens=2000, headers=["x-promptpath-tokens: 2000",
                                                 "x-promptpath-rate: 1000"])
        result = anyio.run(trace, build_options(args, environ={}))
    finally:
        if hog is not None:
            hog.kill()
        server.terminate()
    tl = result.timeline
    by_read = {}
    for e in content_events(tl.events):
        by_read.setdefault(e.read_index, []).append(e)
    merged_in_our_wait = 0
    for index, events in by_read.items():
        sent = [e.server_sent_unix_ns for e in events]
        read = tl.read_at(index)
        spread = max(sent) - min(sent)
        if len(events) >= 2 and spread >= 20_000_000 and read.waited_ns >= 20_000_000:
            merged_in_our_wait += 1
    c = coalescing(tl)
    # The same reads as the stamps alone say them: without our wait taken off.
    tl.reads[:] = [type(r)(r.t_ns, r.nbytes) for r in tl.reads]
    blind = coalescing(tl)
    print(json.dumps({"ok": result.exc is None, "events": len(content_events(tl.events)),
                      "path": c.path, "read_loop": c.read_loop, "blind_path": blind.path,
                      "merged_in_our_wait": merged_in_our_wait, "cpu_wait_ns": tl.cpu_wait_ns}))
    """
)


@pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_FIFO needs root")
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_tokens_merged_while_the_client_waited_for_a_cpu_are_not_the_paths() -> None:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.splitlines()[-1])
    assert seen["ok"] and seen["events"] == 2000
    # The busy neighbour did what it is here for: reads that merged a 20 ms+ burst while
    # the trace waited 20 ms+ for its core (else this test would prove nothing).
    assert seen["merged_in_our_wait"] >= 3 and seen["blind_path"] >= 100, seen
    assert seen["cpu_wait_ns"] >= 100_000_000, seen  # 2 s beside a 30 %-of-the-core hog
    # Taken off, most of it goes (0 in 5 runs by hand, alone). The endpoint on the other
    # core still writes some late when other tests load that core, a hold of the origin's
    # and rightly counted: a fresh-clone CI run beside other work left 54 of 493 (11 %),
    # and 1 run in 6 at load 4.5 left 68. Without our wait taken off all of them stay.
    assert seen["path"] <= seen["blind_path"] // 4, seen
