"""Head-of-line blocking: concurrent streams on ONE connection, HTTP/2 vs HTTP/3, under loss.

    .venv/bin/python benchmarks/bench_hol.py [--streams 8] [--loss 2] [--rounds 3]

Needs root and the load mode (``promptpath.tracer.load.run_concurrent``, issue 11). Starts
the impairer lab (tests/helpers/impairer.py, a process of its own: 20 ms each way, the
given loss both ways, a seeded RNG), the reference endpoint in the server namespace (TLS,
HTTP/3 on), and moves this process into the client namespace. Each round traces
``--streams`` prompts at once over one connection (``connections=1``) with HTTP/2, then
with HTTP/3, each stream ``--tokens`` tokens at ``--rate`` tokens/s.

HTTP/2 carries every stream in one TCP byte stream: a lost segment holds back the bytes
of all streams behind it until its retransmission arrives. QUIC retransmits per stream, so
a lost packet stalls only the streams whose frames it carried. What is measured, per
protocol, over all streams of all rounds:
- arrival gaps: p50, p99, max (ms), between a stream's distinct arrivals (events that
  came in one read count once);
- stalls: gaps longer than the stream's cadence plus half a round trip;
- co-stall: for each stall, the share of the *other* streams that stalled over an
  overlapping interval (1.0 = every stream stopped together: head-of-line blocking).
The stalls and co-stall shares are the hol probe's own measurement
(``promptpath/probes/hol/measure.py``, ``--probe hol``), imported from there.
Separate processes would be separate connections and show no head-of-line blocking at
all, which is why this runs the load mode in process.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptpath.cli.commands import RunArgs, build_options  # noqa: E402
from promptpath.core.stats import percentile  # noqa: E402
from promptpath.probes.hol.measure import (  # noqa: E402
    Stream,
    co_stall_shares,
    stall_threshold_ms,
    stream_of,
)
from promptpath.result import TraceResult  # noqa: E402
from tests.helpers.impairer import enter_namespace, impairer_process  # noqa: E402
from tests.helpers.refserver import reference_server  # noqa: E402

ONE_WAY_MS = 20.0


async def one_round(args: RunArgs, streams: int) -> list[Stream]:
    from promptpath.tracer.load import run_concurrent  # the load mode (issue 11)

    def ignore(index: int, result: TraceResult) -> None:
        return None

    results = await run_concurrent(
        build_options(args, environ={}),
        count=streams,
        concurrency=streams,
        connections=1,
        on_run=ignore,
    )
    # A batch's events share one read: each arrival counts once (stream_of).
    return [
        stream_of(r.timeline, ok=r.exc is None and r.timeline.stream_end is not None)
        for r in results
    ]


def report(name: str, rounds: list[list[Stream]], threshold_ms: float) -> None:
    streams = [s for r in rounds for s in r]
    gaps = [g for s in streams for g in s.gaps_ms()]
    shares = [x for r in rounds for x in co_stall_shares(r, threshold_ms)]
    count = len(shares)
    failed = sum(not s.ok for s in streams)
    share_text = "—" if not shares else f"{statistics.mean(shares):.2f}"
    print(
        f"{name}: streams {len(streams)} (failed {failed}), arrival gaps n={len(gaps)}"
        f" p50 {statistics.median(gaps):.1f} p99 {percentile(gaps, 99):.1f}"
        f" max {max(gaps):.1f} ms; stalls > {threshold_ms:.0f} ms: {count},"
        f" co-stall share {share_text}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--loss", type=float, default=2.0, help="percent, each way")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=100)
    parser.add_argument("--rate", type=float, default=50.0, help="tokens/s per stream")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--batch", type=int, default=1, help="events per server write (the endpoint's --batch)"
    )
    ns = parser.parse_args()
    try:
        import promptpath.tracer.load  # noqa: F401
    except ImportError:
        sys.exit("bench_hol needs the load mode (promptpath/tracer/load.py, issue 11)")
    cadence_ms = 1000.0 * ns.batch / ns.rate
    threshold_ms = stall_threshold_ms(cadence_ms, 2 * ONE_WAY_MS)  # + half a round trip
    impair = ("--delay-ms", str(ONE_WAY_MS), "--loss", str(ns.loss), "--seed", str(ns.seed))
    with contextlib.ExitStack() as stack:
        lab = stack.enter_context(impairer_process(*impair))
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        server = stack.enter_context(
            reference_server(
                tls=True,
                http3=True,
                tmp_path=tmp,
                host=lab["server_addr"],
                command_prefix=("ip", "netns", "exec", lab["server_ns"]),
                extra_args=(
                    *("--tokens", str(ns.tokens), "--rate", str(ns.rate)),
                    *("--batch", str(ns.batch), "--ttft-ms", "0"),
                ),
            )
        )
        assert server.ca is not None
        enter_namespace(lab["client_ns"])
        print(
            f"RTT {2 * ONE_WAY_MS:g} ms, loss {ns.loss:g} % each way (seed {ns.seed}),"
            f" {ns.streams} streams on one connection, {ns.tokens} tokens at {ns.rate:g}/s"
            f" each, {ns.rounds} rounds"
        )
        for http in ("2", "3"):
            args = RunArgs(
                target=f"https://localhost:{server.port}/v1/chat/completions",
                cacert=server.ca,
                http=http,
                resolve=[f"localhost:{server.port}:{lab['server_addr']}"],
                max_tokens=ns.tokens,
            )
            rounds = [anyio.run(one_round, args, ns.streams) for _ in range(ns.rounds)]
            report(f"HTTP/{http}", rounds, threshold_ms)


if __name__ == "__main__":
    main()
