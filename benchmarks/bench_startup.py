"""The tool's own time: start-up and exit of the CLI, beside curl and httptap.

    .venv/bin/python benchmarks/bench_startup.py [--runs 20] [--http 2] [--importtime]
        [--phases] [--httptap PATH] [--before DIR]

Starts the reference endpoint (`python -m promptpath.server`, TLS on 127.0.0.1, 0 ms
first token, flat-out cadence) and times, as processes, `--runs` times each and interleaved
so every tool sees the same noise:
- `python -c pass` (the interpreter's own start, the floor under every Python tool);
- `promptpath --version` and `promptpath --help` (wall);
- `promptpath run URL --json`: wall, and wall - `milestones_ms.end` (what the tool spends
  outside the stream it measured: interpreter, imports, set-up, rendering, exit);
- `curl` with the same request: wall, and wall - `time_total`;
- `httptap` (when installed; `--httptap PATH`, else found on PATH): wall, and wall - its
  own `timing.total_ms`.

`--phases` also runs `run` under startup_phases.py and prints where its wall time goes
(interpreter, imports, set-up, before t0, the trace, after end, exit).
The package is byte-compiled first (as `pip install` does; an editable install has no
.pyc files otherwise), and the children run without PYTHONDONTWRITEBYTECODE and
PYTHONUNBUFFERED, which some runners export.
`--importtime` also prints the modules `promptpath run` imports, by cumulative time
(`python -X importtime`), the largest first. The load average is printed with the figures:
on a shared 2-core machine, read the figures beside it.

Loopback only.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptpath.core.stats import percentile  # noqa: E402

TOKENS = 8
BODY = json.dumps(
    {
        "model": "bench",
        "messages": [{"role": "user", "content": "hi"}],
        "stream": True,
        "max_tokens": TOKENS,
    }
)


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
            "--ttft-ms",
            "0",
            "--rate",
            "0",
            "--tokens",
            str(TOKENS),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    return proc, json.loads(proc.stdout.readline())


def promptpath_exe() -> list[str]:
    """The console script beside this interpreter, as a user runs it."""
    script = Path(sys.executable).parent / "promptpath"
    return [str(script)] if script.exists() else [sys.executable, "-m", "promptpath"]


#: CPU time (user + system, ms) of the last process timed(): on a loaded machine the
#: steadier figure, since waiting for a core is not in it.
LAST_CPU_MS = [0.0]


def timed(argv: list[str], env: dict[str, str], cwd: Path = ROOT) -> tuple[float, str]:
    """Wall time (ms) of one process, and its stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter_ns()
    out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, check=False)
    wall = (time.perf_counter_ns() - start) / 1e6
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU_MS[0] = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e3
    if out.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {out.returncode}: {out.stderr.strip()[:400]}")
    return wall, out.stdout


def line(name: str, values: list[float]) -> str:
    return (
        f"{name:<40} median {statistics.median(values):8.1f} ms"
        f"   p90 {percentile(values, 90):8.1f} ms   min {min(values):8.1f} ms   n={len(values)}"
    )


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def importtime(argv: list[str], env: dict[str, str], top: int = 25) -> None:
    """The run path's imports by cumulative time, from `-X importtime` (stderr)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "promptpath", *argv[1:]],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    rows = []
    for raw in out.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", raw)
        if m:
            rows.append((int(m.group(2)), len(m.group(3)), m.group(4)))
    total = sum(cum for cum, depth, _ in rows if depth == 1)
    print(f"\nimports of `promptpath run`: {len(rows)} modules, {total / 1e3:.0f} ms")
    for cum, _depth, name in sorted(rows, reverse=True)[:top]:
        print(f"  {cum / 1e3:8.1f} ms  {name}")


#: (label, from, to): consecutive spans of one run, from bench_startup's spawn to reap
#: (startup_phases.py stamps them; "  " rows are parts of the row above).
PHASES = (
    ("interpreter start", "spawn", "interpreter_up"),
    ("import the run path (cli, commands, tracer)", "interpreter_up", "stamps_installed"),
    ("click: build `run`, parse argv", "stamps_installed", "execute.in"),
    ("resolve the options, mode → trace()", "execute.in", "trace.in"),
    ("trace() before t0 (transport, CA store)", "trace.in", "t0"),
    ("t0 → end (the measured trace)", "t0", "end"),
    ("end → body closed", "end", "closed"),
    ("closed → trace() returns", "closed", "trace.out"),
    ("  of it: finish_tls (certificate parse)", "finish_tls.in", "finish_tls.out"),
    ("trace() → HTTP/3 discovery done", "trace.out", "discover_h3.out"),
    ("→ anyio.run returns (loop close)", "discover_h3.out", "anyio_run.out"),
    ("→ deliver() called (exit code, scrub)", "anyio_run.out", "deliver.in"),
    ("deliver (terminal report + JSON)", "deliver.in", "deliver.out"),
    ("deliver → main returns", "deliver.out", "returned"),
    ("exit (flush, os._exit) → reaped", "exit", "reaped"),
)


def phases(run_argv: list[str], env: dict[str, str], runs: int) -> None:
    """Where a run's wall time goes (startup_phases.py stamps the run path)."""
    wrapper = [sys.executable, str(ROOT / "benchmarks" / "startup_phases.py")]
    spans: dict[str, list[float]] = {}
    for _ in range(runs):
        spawn = time.perf_counter_ns()
        out = subprocess.run(
            [*wrapper, *run_argv[1:]], capture_output=True, text=True, env=env, check=False
        )
        reaped = time.perf_counter_ns()
        line_ = next((x for x in out.stderr.splitlines() if x.startswith("PHASES ")), None)
        if line_ is None:
            raise SystemExit(f"startup_phases.py wrote no PHASES line: {out.stderr[-2000:]}")
        stamps = {**json.loads(line_.removeprefix("PHASES ")), "spawn": spawn, "reaped": reaped}
        if "discover_h3.out" not in stamps:  # http:// targets have no HTTP/3 to discover
            stamps["discover_h3.out"] = stamps["trace.out"]
        missing = {s for _, a, b in PHASES for s in (a, b)} - set(stamps)
        if missing - {"finish_tls.in", "finish_tls.out"}:
            raise SystemExit(f"startup_phases.py did not stamp {sorted(missing)}: {out.stderr}")
        for label, start, end in PHASES:
            if start in stamps and end in stamps:
                spans.setdefault(label, []).append((stamps[end] - stamps[start]) / 1e6)
        spans.setdefault("wall", []).append((reaped - spawn) / 1e6)
    print(f"\nwhere `promptpath run` spends its wall time ({runs} runs, load {loadavg()})")
    for label, values in spans.items():
        print(
            f"  {label:<36} median {statistics.median(values):8.2f} ms   max {max(values):8.2f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--http", default="2", choices=("1.1", "2"))
    parser.add_argument("--httptap", default=shutil.which("httptap"), help="httptap to compare")
    parser.add_argument("--importtime", action="store_true")
    parser.add_argument("--phases", action="store_true", help="where a run's wall time goes")
    parser.add_argument(
        "--before",
        metavar="DIR",
        help="also time `run` from another checkout's promptpath/ (e.g. `git worktree add"
        " DIR main`), interleaved with this one's, on this venv's libraries",
    )
    ns = parser.parse_args()

    # A user's process: no proxy, and neither of the two interpreter settings some runners
    # export (PYTHONDONTWRITEBYTECODE made every promptpath module compile from source on
    # every run, ~90 ms measured, while httptap's venv had its .pyc files from pip;
    # PYTHONUNBUFFERED turns each write into a syscall).
    env = {
        k: v
        for k, v in os.environ.items()
        if "proxy" not in k.lower() and k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED")
    }
    # The .pyc files pip writes at install time; an editable install (pip install -e) has
    # none until a process may write them.
    compileall.compile_dir(str(ROOT / "promptpath"), quiet=1)
    if ns.before:
        compileall.compile_dir(str(Path(ns.before) / "promptpath"), quiet=1)
    exe = promptpath_exe()
    curl = shutil.which("curl")
    samples: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        samples.setdefault(name, []).append(value)

    with tempfile.TemporaryDirectory() as tmp:
        proc, info = start_server(tmp)
        try:
            url = f"https://localhost:{info['port']}/v1/chat/completions"
            ca = str(info["ca"])
            run_argv = [*exe, "run", url, "--cacert", ca, "--http", ns.http, "-4", "--json"]
            http_flag = "--http2" if ns.http == "2" else "--http1.1"
            curl_argv = [
                str(curl), "-sS", "-4", "--cacert", ca, http_flag, "-o", os.devnull,
                "-H", "content-type: application/json", "-H", "accept: text/event-stream",
                "--data", BODY, "-w", "%{time_total}", url,
            ]  # fmt: skip
            tap_json = str(Path(tmp) / "httptap.json")
            tap_argv = [
                str(ns.httptap), "--cacert", ca, "-4", "--json", tap_json,
                "-H", "content-type: application/json", "-d", BODY, url,
            ]  # fmt: skip
            if ns.http == "1.1":
                tap_argv.insert(1, "--http1.1")

            def pp_version() -> None:
                add("promptpath --version: wall", timed([*exe, "--version"], env)[0])
                add("promptpath --version: CPU", LAST_CPU_MS[0])

            def pp_help() -> None:
                add("promptpath --help: wall", timed([*exe, "--help"], env)[0])

            def pp_run() -> None:
                wall, out = timed(run_argv, env)
                end = json.loads(out)["milestones_ms"]["end"]
                add("promptpath run --json: wall", wall)
                add("promptpath run --json: wall - end", wall - end)
                add("promptpath run --json: CPU", LAST_CPU_MS[0])

            def pp_run_before() -> None:
                # `python -m promptpath` runs the console script's own main (__main__.py),
                # wherever an earlier checkout kept it (promptpath.entry before the house
                # move, promptpath.cli.entry after), with that checkout first on the path.
                argv = [sys.executable, "-m", "promptpath", *run_argv[len(exe) :]]
                # cwd: not this checkout, which `python -c` would put first on sys.path.
                wall, out = timed(argv, {**env, "PYTHONPATH": str(ns.before)}, Path(ns.before))
                end = json.loads(out)["milestones_ms"]["end"]
                add("before: promptpath run --json: wall - end", wall - end)
                add("before: promptpath run --json: CPU", LAST_CPU_MS[0])

            def curl_run() -> None:
                wall, out = timed(curl_argv, env)
                add("curl: wall", wall)
                add("curl: wall - time_total", wall - float(out) * 1e3)
                add("curl: CPU", LAST_CPU_MS[0])

            def tap_run() -> None:
                wall, _ = timed(tap_argv, env)
                total = json.loads(Path(tap_json).read_text())["steps"][-1]["timing"]["total_ms"]
                add("httptap: wall", wall)
                add("httptap: wall - total_ms", wall - total)
                add("httptap: CPU", LAST_CPU_MS[0])

            def interpreter() -> None:
                add(
                    "python -c pass: wall (the floor)",
                    timed([sys.executable, "-c", "pass"], env)[0],
                )

            jobs: list[Callable[[], None]] = [interpreter, pp_version, pp_help, pp_run]
            if ns.before:
                jobs.append(pp_run_before)
            if curl:
                jobs.append(curl_run)
            if ns.httptap:
                jobs.append(tap_run)
            for job in jobs:  # one warm-up each: page cache, .pyc files
                job()
            samples.clear()
            load_before = loadavg()
            for _ in range(ns.runs):
                for job in jobs:
                    job()
            load_after = loadavg()
            if ns.importtime:
                importtime(run_argv, env)
            if ns.phases:
                phases(run_argv, env, ns.runs)
        finally:
            proc.terminate()
            proc.wait(5)
    print(f"\nHTTP/{ns.http}, {ns.runs} runs each, load average {load_before} → {load_after}")
    if not ns.httptap:
        print("httptap: not installed (pip install httptap, or --httptap PATH)")
    for name, values in samples.items():
        print(line(name, values))


if __name__ == "__main__":
    main()
