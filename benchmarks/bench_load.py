"""Load mode on one core: many concurrent streams, and how late each event is stamped.

    python3 benchmarks/bench_load.py [--streams 500] [--trials 3] [--http 2]
                                     [--connections K] [--rate 5] [--tokens 20]
                                     [--no-kernel-stamps] [--no-prefetch]
                                     [--profile FILE] [--capture] [--keep DIR]

The client (this process, ``run_concurrent``) is pinned to CPU 0, the reference endpoint
(``python -m promptpath.server``, its own process) to CPU 1. All streams start together
(``count == concurrency == --streams``). For every content event of every stream it takes

    arrival error = our read stamp (mapped to wall clock at the stream's t0)
                    − the server's send time (the event's ``sent_unix_ns``)

and prints its median, p99 and max per trial and over all trials, plus the same over a
single stream as a baseline. The error includes the kernel's loopback hop and the
server's own work after it stamped the event (hypercorn frames and flushes in its own
task, behind the other streams' writes). "read lateness" is how long after the kernel
received a read's bytes the socket was read: what stamping reads as they return
(``--no-kernel-stamps``, the way before SO_TIMESTAMPNS) adds. Packets that wait in the
kernel's queue merge and carry the last one's stamp, so a late read still shows;
``--no-prefetch`` leaves each HTTP/2 connection to its reader task alone, as before
RxStampedStream.prefetch(). ``--profile FILE`` writes a cProfile of the load runs.

``--capture`` (root, dumpcap and tshark; HTTP/2) captures the endpoint's port on ``lo``
during the trials and splits each event's error at the wire: the server's part (its stamp
to the packet) and ours (the packet to our stamp), which is promptpath's arrival error
and what the issue-25 target (p99 < 2 ms) is judged on; see load_capture.py. ``--keep
DIR`` keeps the capture and the TLS key log there. For an A/B on a machine others are
busy on, ``chrt -f 10`` before the command keeps them off the two pinned cores.

Loopback only: the server listens on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import math
import os
import shutil
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

import load_capture  # noqa: E402
from bench_capture import capture  # noqa: E402

from promptpath.cli.commands import RunArgs, build_options  # noqa: E402
from promptpath.core.stats import percentile  # noqa: E402
from promptpath.net import rxstamp  # noqa: E402
from promptpath.net.rxstamp import RxStampedStream  # noqa: E402
from promptpath.options import RunOptions  # noqa: E402
from promptpath.result import TraceResult  # noqa: E402
from promptpath.tracer.load import STREAMS_PER_CONNECTION, run_concurrent  # noqa: E402

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


class ReadLateness:
    """How long after the kernel received a read's last packet the socket was read (its
    recvmsg, by the connection's reader or a prefetch): what a stamp taken when the read
    returns would have added (RxStampedStream._take, wrapped for the benchmark only)."""

    def __init__(self) -> None:
        self.ms: list[float] = []
        original = RxStampedStream._take

        def take(stream: RxStampedStream, max_bytes: int) -> tuple[bytes, int | None]:
            data, stamp = original(stream, max_bytes)
            if data and stamp is not None:
                self.ms.append((time.time_ns() - stamp) / 1e6)
            return data, stamp

        RxStampedStream._take = take  # type: ignore[method-assign,assignment]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--trials", type=int, default=3, help="load runs, one after the other")
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
    parser.add_argument(
        "--no-kernel-stamps",
        action="store_true",
        help="stamp reads when they return, as before SO_TIMESTAMPNS (for comparison)",
    )
    parser.add_argument(
        "--no-prefetch",
        action="store_true",
        help="read each connection only from its reader task, as before prefetch()",
    )
    parser.add_argument("--profile", help="write a cProfile of the load runs here")
    parser.add_argument(
        "--capture",
        action="store_true",
        help="capture lo (root, dumpcap, tshark) and split each error at the wire",
    )
    parser.add_argument("--keep", help="with --capture: keep the capture and key log here")
    ns = parser.parse_args()
    if ns.capture and ns.http != "2":
        parser.error("--capture finds events in HTTP/2 DATA frames: use it with --http 2")
    if (os.cpu_count() or 1) < 2:
        sys.exit("needs 2 CPUs: one for the client, one for the server")
    if ns.no_kernel_stamps:
        rxstamp._SO_TIMESTAMPNS = None
    if ns.no_prefetch:
        RxStampedStream.prefetch = lambda _stream: None  # type: ignore[method-assign,assignment]
    connections = ns.connections
    if connections == 0 and ns.http != "1.1":
        connections = math.ceil(ns.streams / STREAMS_PER_CONNECTION)
    os.sched_setaffinity(0, {CLIENT_CPU})
    lateness = ReadLateness()
    pooled: list[float] = []
    trials: list[list[TraceResult]] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)  # dumpcap may drop to another user to write the file
        pcap, keylog = Path(tmp) / "load.pcapng", Path(tmp) / "keys.log"
        proc, info = start_server(tmp)
        if ns.capture:  # the client's keys (ssl.create_default_context reads it)
            os.environ["SSLKEYLOGFILE"] = str(keylog)
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
            print(
                f"{ns.streams} streams at once, {ns.tokens} tokens at {ns.rate:g}/s each, first"
                f" after {ns.ttft_ms:g} ms; client on CPU {CLIENT_CPU}, server on CPU"
                f" {SERVER_CPU}; kernel stamps {'off' if ns.no_kernel_stamps else 'on'},"
                f" prefetch {'off' if ns.no_prefetch else 'on'}"
            )
            print(line("arrival − server send, 1 stream", arrival_errors(single)))
            profiler = cProfile.Profile() if ns.profile else None
            port = int(str(info["port"]))
            wire_capture: contextlib.AbstractContextManager[list[str]] = (
                capture(pcap, [port], buffer_mib=64, idle=True)
                if ns.capture
                else contextlib.nullcontext([])
            )
            with wire_capture as dumpcap_said:
                for trial in range(1, ns.trials + 1):
                    results = trial_run(
                        trial, ns, options, connections, proc.pid, lateness, profiler
                    )
                    trials.append(results)
                    pooled += arrival_errors(results)
            if profiler is not None:
                profiler.dump_stats(ns.profile)
        finally:
            proc.terminate()
            proc.wait(5)
        print(line(f"arrival − server send, all {ns.trials} trials", pooled))
        if ns.capture:
            # Under `chrt -f` (an A/B on a busy machine: the runs' own policy), tshark's
            # decoding is no run to measure: back to the normal policy first.
            if os.sched_getscheduler(0) != os.SCHED_OTHER:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            print("dumpcap:", "; ".join(dumpcap_said))
            split_at_wire(trials, pcap, keylog, port, ns.keep)


def trial_run(
    trial: int,
    ns: argparse.Namespace,
    options: RunOptions,
    connections: int,
    server_pid: int,
    lateness: ReadLateness,
    profiler: cProfile.Profile | None,
) -> list[TraceResult]:
    """One load run, its figures printed."""
    lateness.ms.clear()
    server_cpu = cpu_seconds(server_pid)
    client_cpu = time.process_time()
    if profiler is not None:
        profiler.enable()
    results, wall = run(options, ns.streams, connections)
    if profiler is not None:
        profiler.disable()
    client_cpu = time.process_time() - client_cpu
    server_cpu = cpu_seconds(server_pid) - server_cpu
    failed = [r for r in results if not r.ok]
    connects = sum(1 for r in results if r.timeline.stage("connect") is not None)
    versions = ", ".join(sorted({r.timeline.http_version or "?" for r in results}))
    print(
        f"trial {trial}: {versions}, {connects} connections, {len(failed)} failed,"
        f" wall {wall:.2f} s, CPU busy: client {100 * client_cpu / wall:.0f} %,"
        f" server {100 * server_cpu / wall:.0f} %, load average"
        f" {os.getloadavg()[0]:.2f}"
    )
    for r in failed[:3]:
        print("  failed:", r.exc)
    print(line("  arrival − server send", arrival_errors(results)))
    print(line("  read lateness (loop behind kernel)", lateness.ms))
    ttfts = [
        (r.timeline.milestones["ttft"] - r.timeline.t0_ns) / 1e6
        for r in results
        if "ttft" in r.timeline.milestones
    ]
    if ttfts:
        print(line("  TTFT from start", ttfts))
    return results


def split_at_wire(
    trials: list[list[TraceResult]], pcap: Path, keylog: Path, port: int, keep: str | None
) -> None:
    """Each trial's arrival error split into the server's part and ours (load_capture.py)."""
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for path in (pcap, keylog):
            shutil.copy(path, Path(keep) / path.name)
    wire = load_capture.read_wire(pcap, keylog, port)
    print(
        f"capture: {len(wire.every_packet)} server packets with payload,"
        f" {len(wire.events)} events found in them"
    )
    if not wire.events and not keep:  # seen once in ~40 runs, not reproduced: keep the files
        kept = Path(tempfile.mkdtemp(prefix="bench-load-"))
        for path in (pcap, keylog):
            shutil.copy(path, kept / path.name)
        print(f"tshark decrypted no DATA frame: capture and key log kept in {kept}")
    pooled = load_capture.Split()
    met = 0
    for trial, results in enumerate(trials, 1):
        trial_split = load_capture.split(results, wire)
        load_capture.report(f"trial {trial}", trial_split, line)
        met += bool(trial_split.ours) and load_capture.verdict(trial_split.ours) == "target met"
        pooled += trial_split
    load_capture.report(f"all {len(trials)} trials", pooled, line)
    print(
        f"arrival error against the wire (ours), p99 < {load_capture.TARGET_P99_MS:g} ms:"
        f" met in {met} of {len(trials)} trials"
    )


if __name__ == "__main__":
    main()
