"""Load mode on one core: many concurrent streams, and how late each event is stamped.

    python3 benchmarks/bench_load.py [--streams 500] [--http 2] [--connections K]
                                     [--rate 5] [--tokens 20] [--profile FILE]

The client (this process, ``run_concurrent``) is pinned to CPU 0, the reference endpoint
(``python -m promptpath.server``, its own process) to CPU 1. All streams start together
(``count == concurrency == --streams``). For every content event of every stream it takes

    arrival error = our read stamp (mapped to wall clock at the stream's t0)
                    − the server's send time (the event's ``sent_unix_ns``)

and prints its median, p99 and max, plus the same over a single stream as a baseline
measured the same way. The error includes the kernel's loopback hop and the server's own
framing after it stamped the event; what load adds to it is the client's event loop
being late to the socket. ``--profile FILE`` writes a cProfile of the load run.

Loopback only: the server listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptpath.commands import RunArgs, build_options  # noqa: E402
from promptpath.core.stats import percentile  # noqa: E402
from promptpath.options import RunOptions  # noqa: E402
from promptpath.tracer.load import STREAMS_PER_CONNECTION, run_concurrent  # noqa: E402
from promptpath.tracer.orchestrator import TraceResult  # noqa: E402

CLIENT_CPU, SERVER_CPU = 0, 1


def start_server(tmp: str) -> tuple[subprocess.Popen[str], dict[str, object]]:
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "promptpath.server", "--host", "127.0.0.1", "--port", "0"),
            *("--self-signed", tmp, "--no-http3"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    os.sched_setaffinity(proc.pid, {SERVER_CPU})
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def arrival_errors(results: list[TraceResult]) -> list[float]:
    errors = []
    for result in results:
        tl = result.timeline
        for e in tl.events:
            if e.kind == "content" and e.server_sent_unix_ns:
                arrival_unix = tl.t0_unix_ns + (e.t_ns - tl.t0_ns)
                errors.append((arrival_unix - e.server_sent_unix_ns) / 1e6)
    return errors


def run(options: RunOptions, streams: int, connections: int) -> tuple[list[TraceResult], float]:
    start = time.perf_counter()
    results = anyio.run(
        lambda: run_concurrent(
            options,
            count=streams,
            concurrency=streams,
            connections=connections,
            on_run=lambda _i, _r: None,
        )
    )
    return results, time.perf_counter() - start


def line(name: str, values: list[float]) -> str:
    return (
        f"{name:<36} median {statistics.median(values):7.3f} ms   p99"
        f" {percentile(values, 99):7.3f} ms   max {max(values):8.3f} ms   n={len(values)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--http", default="2")
    parser.add_argument(
        "--connections",
        type=int,
        default=0,
        help=f"default: HTTP/2 streams/{STREAMS_PER_CONNECTION} connections, HTTP/1.1 one each",
    )
    parser.add_argument("--rate", type=float, default=5.0, help="tokens/s per stream")
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--ttft-ms", type=float, default=200.0)
    parser.add_argument("--profile", help="write a cProfile of the load run here")
    ns = parser.parse_args()
    if os.cpu_count() is None or os.cpu_count() < 2:  # type: ignore[operator]
        sys.exit("needs 2 CPUs: one for the client, one for the server")
    connections = ns.connections
    if connections == 0 and ns.http != "1.1":
        connections = math.ceil(ns.streams / STREAMS_PER_CONNECTION)
    os.sched_setaffinity(0, {CLIENT_CPU})
    with tempfile.TemporaryDirectory() as tmp:
        proc, info = start_server(tmp)
        try:
            args = RunArgs(
                target=f"https://localhost:{info['port']}/v1/chat/completions",
                cacert=str(info["ca"]),
                http=ns.http,
                family=socket.AF_INET,
                max_tokens=ns.tokens,
                timeout=120.0,
                headers=[
                    f"x-promptpath-ttft-ms: {ns.ttft_ms:g}",
                    f"x-promptpath-rate: {ns.rate:g}",
                    f"x-promptpath-tokens: {ns.tokens}",
                ],
            )
            options = build_options(args, environ={})
            single, _ = run(options, 1, 1)
            profiler = cProfile.Profile() if ns.profile else None
            if profiler is not None:
                profiler.enable()
            server_cpu = cpu_seconds(proc.pid)
            client_cpu = time.process_time()
            results, wall = run(options, ns.streams, connections)
            client_cpu = time.process_time() - client_cpu
            server_cpu = cpu_seconds(proc.pid) - server_cpu
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(ns.profile)
        finally:
            proc.terminate()
            proc.wait(5)
    failed = [r for r in results if not r.ok]
    connects = sum(1 for r in results if r.timeline.stage("connect") is not None)
    versions = sorted({r.timeline.http_version or "?" for r in results})
    print(
        f"{ns.streams} streams at once over {', '.join(versions)}: {connects} connections,"
        f" {len(failed)} failed, {ns.tokens} tokens at {ns.rate:g}/s each, wall {wall:.2f} s"
        f" (client on CPU {CLIENT_CPU}, server on CPU {SERVER_CPU})"
    )
    print(
        f"CPU busy during the load run: client {100 * client_cpu / wall:.0f} %,"
        f" server {100 * server_cpu / wall:.0f} %"
    )
    for r in failed[:3]:
        print("  failed:", r.exc)
    print(line("arrival − server send, 1 stream", arrival_errors(single)))
    print(line(f"arrival − server send, {ns.streams} streams", arrival_errors(results)))
    ttfts = [
        (r.timeline.milestones["ttft"] - r.timeline.t0_ns) / 1e6
        for r in results
        if "ttft" in r.timeline.milestones
    ]
    if ttfts:
        print(line(f"TTFT from start (injected {ns.ttft_ms:g} ms)", ttfts))


if __name__ == "__main__":
    main()
