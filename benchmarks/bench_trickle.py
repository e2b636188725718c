"""What a trickling server costs the tracer's memory: one byte per packet for a whole run.

    python3 benchmarks/bench_trickle.py --seconds 5 [--interval-us 10] [--cap 10000]

A separate process on 127.0.0.1 answers the request with an SSE head, then writes the
body one byte per send (TCP_NODELAY, ``--interval-us`` apart, busy-waited) until the
tracer's ``--timeout`` (``--seconds``) ends the run. The tracer runs in this process, so
its RSS growth and the timeline's list lengths (reads kept, counted; body chunks kept)
are read directly; ``--cap`` lowers core.timeline.MAX_KEPT_READS (100,000) to see the
bound in a short run. Loopback only. Prints the load average beside every figure: the
machine may be shared.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import os
import socket
import time

from promptpath.core import timeline as timeline_mod
from promptpath.options import RunOptions, parse_target
from promptpath.tracer.orchestrator import trace

EVENT = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"


def _serve(listener: socket.socket, interval_ns: int) -> None:
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.settimeout(5)
    request = b""
    while b"\r\n\r\n" not in request:  # the head; the body (a JSON prompt) is not read
        request += conn.recv(65536)
    conn.sendall(HEAD)
    clock = time.perf_counter_ns
    due = clock()
    try:
        while True:
            for byte in EVENT:
                due += interval_ns
                while clock() < due:
                    pass
                conn.send(bytes((byte,)))
    except OSError:  # the tracer gave up (its timeout) and closed
        pass
    conn.close()


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--interval-us", type=float, default=10.0)
    parser.add_argument("--cap", type=int, default=None, help="reads kept (default 100000)")
    args = parser.parse_args()
    if args.cap is not None:
        timeline_mod.MAX_KEPT_READS = args.cap
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    server = multiprocessing.get_context("fork").Process(
        target=_serve, args=(listener, int(args.interval_us * 1000)), daemon=True
    )
    server.start()
    target = parse_target(f"http://127.0.0.1:{port}/v1/chat/completions")
    options = RunOptions(target=target, provider="openai", model="m", timeout=args.seconds)
    gc.collect()
    before = _rss_kib()
    result = asyncio.run(trace(options))
    gc.collect()
    after = _rss_kib()
    server.join(timeout=5)
    if server.is_alive():
        server.kill()
    tl = result.timeline
    from promptpath.report.json import result_json  # off the measured span

    stream = result_json(result, exit_code=0)["stream"]
    not_kept = tl.not_kept
    reads_not_kept = getattr(tl, "reads_not_kept", None)
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average {load}")
    print(
        f"run: {args.seconds:g} s, one byte per send every {args.interval_us:g} us,"
        f" cap {timeline_mod.MAX_KEPT_READS}"
    )
    print(f"error: {tl.error.kind if tl.error else None}")
    print(f"reads kept {len(tl.reads)}, socket_reads {stream['socket_reads']}")
    print(f"chunks kept {len(tl.chunks)}, bytes {stream['bytes']}")
    print(f"reads_not_kept {reads_not_kept}")
    print(f"events kept {len(tl.events)}, events {stream['events']}, not_kept {not_kept}")
    print(f"RSS {before} -> {after} KiB: +{after - before} KiB  (load {load})")


if __name__ == "__main__":
    main()
