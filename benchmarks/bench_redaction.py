"""What redaction and escaping cost a report: series JSON and terminal text, with and without a key.

    python3 benchmarks/bench_redaction.py [--runs 1000] [--trials 5]

Builds ``--runs`` finished runs in memory (no network: the cost measured is the
reporters'), each with the response headers, a proxy, an error message, stream events and
a finding a real run carries, then times over ``--trials``:

- ``result_json`` for every run (the series JSON's bulk) and ``dumps`` of the lot, once
  with no secret in the options and once with a 164-character key plus a Basic proxy
  credential (every string searched for every spelling and 12-character piece of both);
- the terminal report of one such run, with and without the key (the render hook).

It prints the fastest of the interleaved trials (load on a shared machine only adds time)
and the per-run difference: what redaction adds to a report.
"""

from __future__ import annotations

import argparse
import io
import json
import time

from rich.console import Console

from promptpath.core.errors import HTTPStatusError
from promptpath.core.findings import Finding, Verdict
from promptpath.core.timeline import ErrorInfo, ProxyInfo, Stage, StreamEvent, Timeline
from promptpath.options import RunOptions, parse_target
from promptpath.proxies import parse_proxy_url
from promptpath.report import terminal
from promptpath.report.json import dumps, result_json
from promptpath.result import TraceResult

MS = 1_000_000
KEY = "sk-proj-" + "Zq9Xw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed" * 5 + "abcd"


def run(options: RunOptions, index: int) -> TraceResult:
    t0 = (10_000 + index) * MS
    tl = Timeline(t0_ns=t0, t0_unix_ns=0)
    for at, name in enumerate(("dns", "connect", "tls", "request", "wait")):
        tl.stages.append(Stage(name=name, start_ns=t0 + at * MS, end_ns=t0 + (at + 1) * MS))
    tl.milestones.update(connected=t0 + 2 * MS, ttfb=t0 + 5 * MS, ttft=t0 + 6 * MS)
    tl.address, tl.family, tl.http_version, tl.status = ("127.0.0.1", 443), "ipv4", "HTTP/2", 429
    tl.response_headers = [
        ("content-type", "application/json"),
        ("x-request-id", f"req_{index:08d}abcdef0123456789"),
        ("via", "1.1 varnish, 1.1 google"),
        ("server", "cloudflare"),
        ("cf-ray", f"8a{index:06d}f00d-AMS"),
    ]
    tl.proxy = ProxyInfo(
        url="http://127.0.0.1:3128", source="--proxy", headers=[("via", "1.1 squid")]
    )
    for n in range(20):
        tl.events.append(StreamEvent(t_ns=t0 + (6 + n) * MS, kind="content", text=f"token {n} "))
    exc = HTTPStatusError(
        "HTTP 429 — Rate limit reached for gpt-4o-mini in organization org-abc on requests per"
        " min: Limit 500, Used 500, Requested 1. Please try again in 120ms.",
        stage="response",
        kind="rate_limited",
        status=429,
    )
    tl.error = ErrorInfo.from_error(exc)
    finding = Finding(
        probe="ratelimit",
        verdict=Verdict.FAIL,
        summary="429 from the application (its own rate-limit headers came with it)",
        evidence={"headers": {"via": "1.1 varnish", "retry-after": "1"}},
    )
    return TraceResult(options=options, timeline=tl, findings=[finding])


def options(with_key: bool) -> RunOptions:
    target = parse_target("https://api.example.test/v1/chat/completions")
    if not with_key:
        return RunOptions(target=target, provider="openai", model="gpt-4o-mini")
    proxy = parse_proxy_url("http://alice:correct-horse-battery@127.0.0.1:3128", source="--proxy")
    return RunOptions(
        target=target, provider="openai", model="gpt-4o-mini", api_key=KEY, proxy=proxy
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    jobs = {}
    for with_key in (False, True):
        results = [run(options(with_key), i) for i in range(args.runs)]

        def series_json(results: list[TraceResult] = results) -> None:
            json.loads(dumps({"runs": [result_json(r, exit_code=6) for r in results]}))

        def render(result: TraceResult = results[0]) -> None:
            for _ in range(10):
                console = Console(file=io.StringIO(), width=100, color_system=None)
                terminal.render(console, result)

        jobs[with_key] = (series_json, render)
    # Interleaved, and the fastest of each kept: on a shared machine the others' load
    # only ever adds time, so the minimum is the cost of the code itself.
    best: dict[tuple[bool, int], float] = {}
    for _ in range(args.trials):
        for with_key, fns in jobs.items():
            for which, fn in enumerate(fns):
                start = time.perf_counter()
                fn()
                took = time.perf_counter() - start
                best[with_key, which] = min(best.get((with_key, which), took), took)
    json_plain, json_key = best[False, 0], best[True, 0]
    term_plain, term_key = best[False, 1] / 10, best[True, 1] / 10
    print(
        f"series JSON of {args.runs} runs (fastest of {args.trials}):"
        f" {json_plain * 1e3:.0f} ms without a key, {json_key * 1e3:.0f} ms with one:"
        f" {(json_key - json_plain) / args.runs * 1e3:+.3f} ms per run"
    )
    print(
        f"terminal report of one run: {term_plain * 1e3:.1f} ms without a key,"
        f" {term_key * 1e3:.1f} ms with one: {(term_key - term_plain) * 1e3:+.1f} ms"
    )


if __name__ == "__main__":
    main()
