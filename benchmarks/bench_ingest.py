"""How fast the ingest turns body bytes into events, and how long one decode step holds
the event loop (the resolution of --timeout inside a compressed read).

    python3 benchmarks/bench_ingest.py --events 300000

Pure: no socket. It feeds one OpenAI token event repeated, in 64 KiB wire pieces, to a
BodyIngest, as identity and as gzip (one piece then inflates ~330x), draining the
backlog step by step as the orchestrator does (the collector held off, as trace() does
it), and prints events per second, the longest
step and the peak RSS of this process.
"""

from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time
import zlib

from promptpath.core.timeline import Timeline
from promptpath.tracer.ingest import BodyIngest

EVENT = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
PIECE = 64 * 1024


def run(events: int, encoding: str | None) -> tuple[float, float, float, int, int]:
    """(events per second, median and longest step in ms, events kept, events counted)."""
    body = EVENT * events
    if encoding == "gzip":
        body = zlib.compress(body, 9, wbits=31)
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    tl.status = 200
    tl.response_headers = [("content-type", "text/event-stream")]
    if encoding:
        tl.response_headers.append(("content-encoding", encoding))
    ingest = BodyIngest(tl, "openai")
    steps: list[int] = []
    gc.collect()
    gc.disable()  # as trace() holds the collector off
    started = time.perf_counter_ns()
    for i in range(0, len(body), PIECE):
        t = time.perf_counter_ns()
        ingest.feed(body[i : i + PIECE], t, i // PIECE)
        steps.append(time.perf_counter_ns() - t)
        while ingest.backlog:
            t = time.perf_counter_ns()
            ingest.resume()
            steps.append(time.perf_counter_ns() - t)
    elapsed = (time.perf_counter_ns() - started) / 1e9
    gc.enable()
    counted = len(tl.events) + tl.not_kept.events
    median = statistics.median(steps) / 1e6
    return counted / elapsed, median, max(steps) / 1e6, len(tl.events), counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=300_000)
    args = parser.parse_args()
    for encoding in (None, "gzip"):
        rate, median, longest, kept, counted = run(args.events, encoding)
        print(
            f"{encoding or 'identity':8} {rate:8,.0f} events/s  step median {median:5.1f} ms,"
            f" longest {longest:5.1f} ms  kept {kept:,} of {counted:,}"
        )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak:.0f} MB (the gzip input itself included)")


if __name__ == "__main__":
    main()
