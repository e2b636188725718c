"""`promptpath exporter` soaked: N targets scraped every second for minutes, faults injected.

    python3 benchmarks/bench_exporter.py [--targets 20] [--duration 600] [--interval 1]
                                         [--min-interval 5] [--restart-every 120]
                                         [--json FILE]

The reference endpoint (``python -m promptpath.server``, its own process, TLS) and the
exporter (``python -m promptpath exporter``, its own process) run on 127.0.0.1. The
targets share four modules: a healthy stream (half of them), a first token later than the
deadline (slow), an HTTP 500 (broken) and a stream that stalls after two tokens (stall).
The endpoint is stopped and started again on the same port every ``--restart-every``
seconds (down ~1-2 s each time). This process plays Prometheus: one task per target, one
keep-alive connection each, a GET /probe every ``--interval`` seconds with
``X-Prometheus-Scrape-Timeout-Seconds: --interval`` and a client timeout of the same.

It prints the exporter's descriptors, resident memory and asyncio tasks (read from its own
/metrics) before the scrapers connect, after a warm-up, every minute, at the end (the
scrapers still connected: comparable with the start) and after they left (comparable with
before); the scrape latency
(p50/p99/max, all answers, and the fresh and cached ones apart) beside the probes' own
probe_duration_seconds; and how many scrapes timed out on the client side (the number
that must stay 0). Loopback only; every loop is bounded by --duration.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptpath.core.stats import percentile  # noqa: E402

MODULES = {
    "chat": '{ "x-promptpath-tokens" = "8", "x-promptpath-rate" = "100" }',
    "slow": '{ "x-promptpath-ttft-ms" = "3000", "x-promptpath-tokens" = "4" }',
    "broken": '{ "x-promptpath-status" = "500" }',
    "stall": '{ "x-promptpath-pause-after" = "2", "x-promptpath-pause-s" = "30",'
    ' "x-promptpath-tokens" = "8" }',
}


def module_of(index: int, targets: int) -> str:
    share = index / targets
    return (
        "chat" if share < 0.5 else "slow" if share < 0.7 else "broken" if share < 0.85 else "stall"
    )


def start_server(tmp: Path, port: int) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    args = [sys.executable, "-m", "promptpath.server", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--self-signed", str(tmp / "certs"), "--no-http3"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    info: dict[str, Any] = json.loads(proc.stdout.readline())
    return proc, info


def write_config(tmp: Path, url: str, ca: str, args: argparse.Namespace) -> Path:
    lines = [
        "[exporter]",
        f"max_in_flight = {args.targets}",
        f"min_interval_s = {args.min_interval}",
        "scrape_timeout_offset_s = 0.5",
    ]
    for name, headers in MODULES.items():
        lines += [f"[modules.{name}]", 'provider = "openai"', "max_tokens = 8"]
        lines += [f"headers = {headers}"]
    for i in range(args.targets):
        lines += [f"[targets.t{i:02d}]", f'url = "{url}/v1/chat/completions"', f'cacert = "{ca}"']
        lines += [f'modules = ["{module_of(i, args.targets)}"]']
    path = tmp / "exporter.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@dataclass
class Scrapes:
    latency: list[float] = field(default_factory=list)
    fresh: list[float] = field(default_factory=list)
    cached: list[float] = field(default_factory=list)
    probe_duration: list[float] = field(default_factory=list)
    results: dict[str, int] = field(default_factory=dict)
    client_timeouts: int = 0
    errors: int = 0


def _gauge(text: str, name: str) -> float | None:
    """A label-less sample's value: a regex, not the client's parser, so that playing
    Prometheus costs this process little of the two cores the exporter needs."""
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    return None if found is None else float(found.group(1))


async def scrape_loop(
    base: str, target: str, module: str, args: argparse.Namespace, end: float, out: Scrapes
) -> None:
    headers = {"X-Prometheus-Scrape-Timeout-Seconds": f"{args.interval:g}"}
    url = f"{base}/probe"
    async with httpx.AsyncClient(timeout=args.interval, trust_env=False) as client:
        next_at = time.monotonic()
        while time.monotonic() < end:
            start = time.perf_counter()
            try:
                response = await client.get(
                    url, params={"target": target, "module": module}, headers=headers
                )
            except httpx.TimeoutException:
                out.client_timeouts += 1
            except httpx.HTTPError:
                out.errors += 1
            else:
                took = time.perf_counter() - start
                out.latency.append(took)
                key = str(response.status_code)
                if response.status_code == 200:
                    cached = _gauge(response.text, "promptpath_exporter_cached") == 1
                    (out.cached if cached else out.fresh).append(took)
                    if not cached:
                        duration = _gauge(response.text, "probe_duration_seconds")
                        if duration is not None:
                            out.probe_duration.append(duration)
                        ok = _gauge(response.text, "probe_success") == 1
                        key = f"{module}:{'success' if ok else 'failure'}"
                    else:
                        key = "cached"
                out.results[key] = out.results.get(key, 0) + 1
            next_at += args.interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))


async def own_metrics(base: str) -> dict[str, float | None]:
    async with httpx.AsyncClient(timeout=5, trust_env=False) as client:
        text = (await client.get(f"{base}/metrics")).text
    return {
        "fds": _gauge(text, "process_open_fds"),
        "rss_mib": (_gauge(text, "process_resident_memory_bytes") or 0) / 2**20,
        "tasks": _gauge(text, "promptpath_exporter_asyncio_tasks"),
        "in_flight": _gauge(text, "promptpath_exporter_probes_in_flight"),
    }


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    ms = sorted(v * 1000 for v in values)
    return (
        f"p50 {percentile(ms, 50):7.1f}  p99 {percentile(ms, 99):7.1f}"
        f"  max {ms[-1]:7.1f} ms  (n={len(ms)})"
    )


async def soak(base: str, args: argparse.Namespace, restart: Any) -> dict[str, Any]:
    out = Scrapes()
    before = await own_metrics(base)
    print(f"before the scrapers: {before}", flush=True)
    warmup = min(10.0, args.duration / 10)
    end = time.monotonic() + warmup + args.duration
    loops = [
        asyncio.create_task(
            scrape_loop(base, f"t{i:02d}", module_of(i, args.targets), args, end, out)
        )
        for i in range(args.targets)
    ]
    await asyncio.sleep(warmup)
    for series in (out.latency, out.fresh, out.cached, out.probe_duration):
        series.clear()
    out.results.clear()
    out.client_timeouts = out.errors = 0
    start = await own_metrics(base)
    print(f"start (after {warmup:g} s warm-up): {start}", flush=True)
    samples = [(0.0, start)]
    t0 = time.monotonic()
    last_restart = t0
    while time.monotonic() < end - 1:
        await asyncio.sleep(min(5.0, max(0.0, end - 1 - time.monotonic())))
        now = time.monotonic()
        if args.restart_every and now - last_restart >= args.restart_every:
            last_restart = now
            await restart()
        if now - t0 - samples[-1][0] >= 60:
            sample = await own_metrics(base)
            samples.append((now - t0, sample))
            print(f"{now - t0:5.0f} s: {sample}", flush=True)
    final = await own_metrics(base)  # the scrapers still connected, as at the start
    print(f"end: {final}", flush=True)
    await asyncio.gather(*loops)
    await asyncio.sleep(2)  # the probes the last scrapes started, the connections closed
    after = await own_metrics(base)
    print(f"after the scrapers: {after}", flush=True)
    return {
        "scrapes": out,
        "before": before,
        "start": start,
        "end": final,
        "after": after,
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=20)
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--min-interval", type=float, default=5.0)
    parser.add_argument("--restart-every", type=float, default=120.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        server, info = start_server(tmp, 0)
        port = int(info["port"])
        config = write_config(tmp, str(info["url"]), str(info["ca"]), args)
        stderr = (tmp / "exporter.stderr").open("w")
        exporter = subprocess.Popen(
            [sys.executable, "-m", "promptpath", "exporter", "--config", str(config),
             "--listen", "127.0.0.1:0"],
            stdout=subprocess.DEVNULL, stderr=stderr, env={**os.environ, "NO_PROXY": "*"},
        )  # fmt: skip
        base = ""
        for _ in range(200):
            with contextlib.suppress(OSError, ValueError):
                for line in (tmp / "exporter.stderr").read_text().splitlines():
                    event = json.loads(line)
                    if event.get("event") == "listening":
                        base = str(event["url"])
            if base:
                break
            time.sleep(0.05)
        assert base, "the exporter did not start"
        state = {"server": server, "restarts": 0}

        async def restart() -> None:
            state["server"].terminate()  # type: ignore[attr-defined]
            await asyncio.to_thread(state["server"].wait, 10)  # type: ignore[attr-defined]
            state["server"], _ = await asyncio.to_thread(start_server, tmp, port)
            state["restarts"] = int(state["restarts"]) + 1  # type: ignore[call-overload]

        try:
            result = asyncio.run(soak(base, args, restart))
        finally:
            exporter.send_signal(signal.SIGTERM)
            code = exporter.wait(30)
            state["server"].terminate()  # type: ignore[attr-defined]
            stderr.close()
        log = (tmp / "exporter.stderr").read_text()
    scrapes: Scrapes = result["scrapes"]
    print(
        f"targets {args.targets}, every {args.interval:g} s for {args.duration:g} s,"
        f" min_interval {args.min_interval:g} s, {state['restarts']} endpoint restarts"
    )
    print(f"scrape latency, all      {summary(scrapes.latency)}")
    print(f"scrape latency, fresh    {summary(scrapes.fresh)}")
    print(f"scrape latency, cached   {summary(scrapes.cached)}")
    print(f"probe_duration_seconds   {summary(scrapes.probe_duration)}")
    print(f"client-side timeouts {scrapes.client_timeouts}, connection errors {scrapes.errors}")
    print(f"answers {dict(sorted(scrapes.results.items()))}")
    print(f"exporter exit {code}, tracebacks in its log: {log.count('Traceback')}")
    if args.json:
        body = {
            "args": vars(args) | {"json": str(args.json)},
            "before": result["before"],
            "start": result["start"],
            "end": result["end"],
            "after": result["after"],
            "samples": result["samples"],
            "results": scrapes.results,
            "client_timeouts": scrapes.client_timeouts,
            "latency_ms": {k: summary(getattr(scrapes, k)) for k in ("latency", "fresh", "cached")},
            "probe_duration_ms": summary(scrapes.probe_duration),
        }
        args.json.write_text(json.dumps(body, indent=2, default=str))


if __name__ == "__main__":
    main()
