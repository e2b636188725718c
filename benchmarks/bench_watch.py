"""`promptpath watch`'s own cost: CPU per trace outside the trace, and memory over traces.

    python3 benchmarks/bench_watch.py [--traces 300] [--soak 10000]

1. CPU: a watch (the real WatchMode, JSON lines to /dev/null, a history file, the live
   screen drawn into a console on /dev/null after every trace as a terminal would get it)
   runs ``--traces`` traces against the reference endpoint (``python -m promptpath.server``,
   its own process, plain HTTP on 127.0.0.1, 8 tokens at 400 tokens/s) with no pause. The
   process's CPU time (``time.process_time_ns``) is read around each trace() call and around
   each whole iteration; their difference is the tool's own CPU per trace (the run document,
   the history line, the statistics and bands, the screen). Target: median ≤ 10 ms.
2. Memory: ``--soak`` run documents (a real one measured above, its stage times varied)
   are fed to the state, the path's hops and the screen exactly as the loop does; tracemalloc's
   current size after 1,000 and after ``--soak`` documents must be the same within noise
   (bounded windows, no growing list). Target: flat. Measured twice: the state and the
   hops alone, then with the screen drawn every 10 documents. rich keeps the width of each
   line it measured in an LRU cache of 4,096 entries (rich/cells.py): with the screen, the
   memory grows until that cache is full (~0.9 MB, at a few thousand documents), then is
   flat; compare the half-way and the last figures.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def start_server() -> tuple[subprocess.Popen[str], str]:
    args = [
        sys.executable,
        "-m",
        "promptpath.server",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--no-http3",
        "--rate",
        "400",
        "--tokens",
        "8",
    ]
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stdout is not None
    info = json.loads(proc.stdout.readline())
    return proc, str(info["url"])


def cpu_per_trace(url: str, traces: int, history: Path) -> tuple[list[float], list[float], Any]:
    from rich.console import Console
    from rich.live import Live

    import promptpath.tracer.orchestrator as orchestrator
    from promptpath.environment import Environment
    from promptpath.modes.watch import WatchMode
    from promptpath.plan.watch_options import resolve_watch

    values = {
        "target": url + "/v1/chat/completions",
        "interval": 0.0,
        "count": traces,
        "budget": 0,
        "history": str(history),
        "jsonl": True,
    }
    plan, watch = resolve_watch(values, environ={})
    devnull = open(os.devnull, "w")  # noqa: SIM115 - open for the whole run
    env = Environment(stdout=devnull, stderr=io.StringIO(), environ={})
    console = Console(file=devnull, force_terminal=True, width=120, color_system="truecolor")
    mode = WatchMode(plan, watch, env, console)
    mode.prepare()
    inside: list[int] = []
    real_trace = orchestrator.trace

    async def timed_trace(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time_ns()
        try:
            return await real_trace(*args, **kwargs)
        finally:
            inside.append(time.process_time_ns() - start)

    orchestrator.trace = timed_trace  # type: ignore[assignment]
    whole: list[int] = []
    real_one = mode._one

    async def timed_one() -> None:
        start = time.process_time_ns()
        await real_one()
        # The screen a terminal would get after each trace (JSON lines mode draws none).
        live.update(mode._screen(), refresh=True)
        whole.append(time.process_time_ns() - start)

    mode._one = timed_one  # type: ignore[method-assign]
    with Live(mode._screen(), console=console, auto_refresh=False) as live:
        asyncio.run(mode.run())
    orchestrator.trace = real_trace  # type: ignore[assignment]
    own = [(w - i) / 1e6 for w, i in zip(whole, inside, strict=True)]
    return own, [i / 1e6 for i in inside], mode


def soak(doc: dict[str, Any], n: int, *, draw: bool) -> list[tuple[int, float]]:
    from rich.console import Console

    from promptpath.modes.watch.hops import PathHops
    from promptpath.modes.watch.state import WatchState
    from promptpath.modes.watch.view import Header, screen

    rng = random.Random(1)
    state, hops = WatchState(window=30), PathHops(window=30)
    console = Console(file=open(os.devnull, "w"), force_terminal=True, width=120)  # noqa: SIM115
    header = Header(target="http://127.0.0.1/v1/chat/completions", status="bench")
    finding = {
        "probe": "path",
        "verdict": "pass",
        "summary": "1 hop",
        "evidence": {
            "hops": [
                {
                    "ttl": 1,
                    "responders": ["127.0.0.1"],
                    "sent": 3,
                    "answered": 3,
                    "rtt_ms": {"min": 0.1, "median": 0.2, "max": 0.3},
                    "destination": True,
                }
            ],
            "deprioritised": [],
        },
    }
    marks: list[tuple[int, float]] = []
    tracemalloc.start()
    for i in range(1, n + 1):
        copy = json.loads(json.dumps(doc))
        for stage in copy.get("stages_ms", {}):
            if isinstance(copy["stages_ms"][stage], float):
                copy["stages_ms"][stage] *= rng.uniform(0.8, 1.2)
        if i % 20 == 0:  # a failure event every 20: the event log is full (200) by 4,000
            copy["ok"], copy["error"] = (
                False,
                {"stage": "connect", "kind": "refused", "message": "connection refused"},
            )
        state.feed(copy, seq=i, at="2026-12-06T21:00:00.000Z")
        if i % 10 == 0:
            hops.feed(finding)
        if draw and i % 10 == 0:
            console.print(screen(state, hops, header, show_path=True))
        if i in (1000, n // 2, n):
            marks.append((i, tracemalloc.get_traced_memory()[0] / 1024))
    tracemalloc.stop()
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=int, default=300)
    parser.add_argument("--soak", type=int, default=10_000)
    args = parser.parse_args()
    proc, url = start_server()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            history = Path(tmp) / "watch.jsonl"
            own, inside, _mode = cpu_per_trace(url, args.traces, history)
            last = json.loads(history.read_text().splitlines()[-1])["run"]
    finally:
        proc.terminate()
        proc.wait(10)
    own.sort()
    print(f"traces            {len(own)} (load average {os.getloadavg()[0]:.1f})")
    print(
        f"own CPU / trace   median {statistics.median(own):.2f} ms, p90"
        f" {own[int(0.9 * len(own))]:.2f} ms, max {own[-1]:.2f} ms  (target: median ≤ 10 ms)"
    )
    print(f"trace() CPU       median {statistics.median(inside):.2f} ms (for comparison)")
    for draw in (False, True):
        marks = soak(last, args.soak, draw=draw)
        what = "state + screen" if draw else "state + hops  "
        print(f"memory, {what}  " + ", ".join(f"{k:,.0f} KiB after {i:,}" for i, k in marks))
    from rich.cells import cached_cell_len

    info = cached_cell_len.cache_info()
    print(f"rich's width cache {info.currsize:,} of {info.maxsize:,} entries")


if __name__ == "__main__":
    main()
