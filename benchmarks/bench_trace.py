"""Speed and accuracy of promptpath against the reference endpoint on loopback.

    python3 benchmarks/bench_trace.py [--runs 50] [--http 2] [--progress]

Prints:
- startup: wall time of `promptpath --version` (median of 10);
- overhead: wall time of a full `run` in-process minus the request it measured;
- accuracy: measured TTFT (from request_sent) minus the injected first-token delay, and
  measured gaps minus the server's own send-time gaps (from each event's sent_unix_ns),
  median and p99 over all runs.

--progress draws the CLI's live progress line during each trace, into a terminal-like
console on /dev/null: its ticks share the event loop with the read loop, so the gap error
with it on shows what it costs the measurement.

Loopback only: the server is `python -m promptpath.server` on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

import anyio
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptpath.cli.commands import RunArgs, build_options  # noqa: E402
from promptpath.core.analysis import compute  # noqa: E402
from promptpath.core.stats import percentile  # noqa: E402
from promptpath.modes.progress import LiveProgress  # noqa: E402
from promptpath.result import TraceResult  # noqa: E402
from promptpath.tracer.orchestrator import trace  # noqa: E402

INJECTED_TTFT_MS = 200.0
RATE = 50.0  # tokens/s → 20 ms cadence
TOKENS = 20


def start_server(tmp: str) -> tuple[subprocess.Popen[str], dict[str, object]]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "promptpath.server",
            "--port",
            "0",
            "--self-signed",
            tmp,
            "--no-http3",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    info = json.loads(proc.stdout.readline())
    return proc, info


def startup_ms() -> list[float]:
    samples = []
    for _ in range(10):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "promptpath", "--version"],
            check=True,
            capture_output=True,
            cwd=ROOT,
        )
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def cli_run_overhead(info: dict[str, object], http: str, *, runs: int) -> list[float]:
    """A whole `promptpath run --json` as a user runs it (interpreter start, imports,
    rendering, HTTP/3 discovery) minus the span it measured (t0 → body closed)."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "promptpath",
                "run",
                f"https://localhost:{info['port']}/v1/chat/completions",
                "--cacert",
                str(info["ca"]),
                "--http",
                http,
                "-4",
                "--json",
                "-H",
                f"x-promptpath-ttft-ms: {INJECTED_TTFT_MS:g}",
            ],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        wall_ms = (time.perf_counter() - start) * 1000
        samples.append(wall_ms - json.loads(out.stdout)["stream"]["closed_ms"])
    return samples


def line(name: str, values: list[float], unit: str = "ms") -> str:
    return (
        f"{name:<34} median {statistics.median(values):8.3f} {unit}"
        f"   p99 {percentile(values, 99):8.3f} {unit}   n={len(values)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--http", default="2")
    parser.add_argument("--progress", action="store_true", help="live progress line on")
    ns = parser.parse_args()

    print(line("startup: promptpath --version", startup_ms()))
    with tempfile.TemporaryDirectory() as tmp:
        proc, info = start_server(tmp)
        devnull = open(os.devnull, "w")  # noqa: SIM115 - closed with the server below
        try:
            args = RunArgs(
                target=f"https://localhost:{info['port']}/v1/chat/completions",
                cacert=str(info["ca"]),
                http=ns.http,
                family=socket.AF_INET,
                max_tokens=TOKENS,
                headers=[
                    f"x-promptpath-ttft-ms: {INJECTED_TTFT_MS:g}",
                    f"x-promptpath-rate: {RATE:g}",
                    f"x-promptpath-tokens: {TOKENS}",
                ],
            )
            options = build_options(args, environ={})
            console = Console(file=devnull, force_terminal=True, width=100) if ns.progress else None

            async def traced() -> TraceResult:
                live = LiveProgress(console, fallback=print)
                async with live.running():
                    return await trace(options, on_start=lambda r: live.watch(r.timeline))

            overhead, ttft_err, gap_err, arrival_lag = [], [], [], []
            for _ in range(ns.runs):
                start = time.perf_counter_ns()
                result = anyio.run(traced)
                wall = time.perf_counter_ns() - start
                assert result.exc is None, result.exc
                tl = result.timeline
                m = compute(tl)
                measured = (tl.closed_ns or tl.milestones["end"]) - tl.t0_ns
                overhead.append((wall - measured) / 1e6)
                assert m.ttft_from_request_ms is not None
                ttft_err.append(m.ttft_from_request_ms - INJECTED_TTFT_MS)
                content = [e for e in tl.events if e.kind == "content"]
                for prev, cur in pairwise(content):
                    assert prev.server_sent_unix_ns and cur.server_sent_unix_ns
                    server_gap = (cur.server_sent_unix_ns - prev.server_sent_unix_ns) / 1e6
                    gap_err.append((cur.t_ns - prev.t_ns) / 1e6 - server_gap)
                for e in content:
                    assert e.server_sent_unix_ns
                    arrival_unix = tl.t0_unix_ns + (e.t_ns - tl.t0_ns)
                    arrival_lag.append((arrival_unix - e.server_sent_unix_ns) / 1e6)
            cli_overhead = cli_run_overhead(info, ns.http, runs=min(ns.runs, 20))
        finally:
            proc.terminate()
            proc.wait(5)
            devnull.close()
    print(f"live progress: {'on' if ns.progress else 'off'}")
    print(line("overhead: trace() wall − measured", overhead))
    print(line("overhead: CLI run wall − measured", cli_overhead))
    print(line(f"ttft error vs injected {INJECTED_TTFT_MS:g} ms", ttft_err))
    print(line("gap error vs server send gaps", [abs(g) for g in gap_err]))
    print(line("arrival − server send time", arrival_lag))


if __name__ == "__main__":
    main()
