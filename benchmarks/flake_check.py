"""Flake check: every lab test with a timing bound, run N times beside a CPU hog.

    .venv/bin/python benchmarks/flake_check.py [--runs 10] [--hogs 2] [-k EXPR] [--json OUT]
        [NODE_ID ...]

A timing bound is only as good as the spread it was set from. This starts ``--hogs``
CPU-bound loops of its own (``while 1: pass`` at nice 0, one per core by default) and
runs the timing-bounded lab tests (``TIMED`` below) ``--runs`` times, one pytest run per
round with ``PROMPTPATH_REQUIRE_LAB=1`` (a skip is a failure, as in CI). Each test notes
what it measured just before asserting its bound (``tests/helpers/timing.py``); this
prints, per test, how many rounds passed, and per measured quantity its bound and the
spread seen (min / median / max over every round). The load average is printed at the
start, after each round and at the end: this machine is shared, so the hogs come on top
of whatever else runs. Needs root for the impairer lab, like the tests themselves.
Given node ids, it runs those instead (pass counts only, unless they note their values).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from flake_suite import node_id  # a sibling script: benchmarks/ is sys.path[0]

ROOT = Path(__file__).resolve().parents[1]

#: Lab tests whose assertions hold a measured time to a bound (audited 2026-12-01; the
#: rest of tests/lab asserts behaviour, or only lower bounds seconds away from the value).
TIMED = (
    "tests/lab/test_idle_timeout.py::test_nginx_proxy_read_timeout_cuts_a_paused_stream_and_keepalives_save_it",
    "tests/lab/test_idle_timeout.py::test_haproxy_timeout_server_and_http_keep_alive_are_both_found",
    "tests/lab/test_idle_timeout.py::test_haproxy_keep_alive_close_is_found_without_the_canary",
    "tests/lab/test_canary_controls.py::test_body_carried_controls_cross_litellm_and_the_cut_is_found_near_3s",
    "tests/lab/test_canary_controls.py::test_nginx_stripping_the_pause_header_is_named_and_the_body_field_makes_up_for_it",
    "tests/lab/test_impaired_path.py",
    "tests/lab/test_buffering.py::test_nginx_buffering_is_the_same_size_triggered_fail_at_20_and_50_tokens_per_second",
    "tests/lab/test_buffering.py::test_nginx_proxy_buffering_off_passes",
    "tests/lab/test_buffering.py::test_haproxy_without_http_no_delay_coalesces_into_200ms_bursts",
    "tests/lab/test_buffering.py::test_haproxy_cork_is_the_same_time_triggered_warn_at_20_and_50_tokens_per_second",
    "tests/lab/test_ghost_stream.py::test_nginx_default_stops_the_upstream",
    "tests/lab/test_ghost_stream.py::test_nginx_ignoring_client_abort_costs_a_token_or_two",
    "tests/lab/test_ghost_stream.py::test_nginx_ignoring_client_abort_with_buffering_ghosts",
)


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} {five:.1f} {fifteen:.1f}"


def _exists(path: str) -> bool:
    return (ROOT / path).is_file()


def _cases(junit: Path) -> dict[str, str | None]:
    """Test id -> None when it passed, else the first line of why not."""
    if not junit.exists():
        return {}
    found: dict[str, str | None] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = node_id(case.get("classname", ""), case.get("name", ""), _exists)
        problem = None
        for tag in ("failure", "error", "skipped"):
            bad = case.find(tag)
            if bad is not None:
                message = (bad.get("message") or tag).strip().splitlines()
                problem = f"{tag}: {message[0][:160] if message else ''}"
        found[name] = problem
    return found


def _round(tests: list[str], keyword: str | None, work: Path, index: int) -> dict[str, str | None]:
    junit = work / f"round{index}.xml"
    env = dict(
        os.environ, PROMPTPATH_REQUIRE_LAB="1", PROMPTPATH_TIMING_LOG=str(work / "timing.jsonl")
    )
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-n",
        "0",  # one at a time, beside the hogs only (not the suite's 3 workers)
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
    ]
    if keyword:
        command += ["-k", keyword]
    subprocess.run([*command, *tests], cwd=ROOT, env=env, capture_output=True, check=False)
    return _cases(junit)


Bounds = dict[tuple[str, str], tuple[float | None, float | None]]


def _spread(log: Path) -> tuple[dict[str, dict[str, list[float]]], Bounds]:
    """Test id -> quantity -> every value noted; and each (test, quantity)'s bound."""
    seen: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    bounds: Bounds = {}
    if log.exists():
        for line in log.read_text().splitlines():
            note = json.loads(line)
            seen[note["test"]][note["quantity"]].append(float(note["value"]))
            bounds[(note["test"], note["quantity"])] = (note["low"], note["high"])
    return seen, bounds


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="rounds (default 10)")
    parser.add_argument(
        "--hogs",
        type=int,
        default=os.cpu_count() or 2,
        help="CPU-bound loops (default: one per core)",
    )
    parser.add_argument("-k", dest="keyword", help="pytest -k expression to narrow the tests")
    parser.add_argument(
        "tests", nargs="*", help="pytest node ids instead of TIMED (an integration file, say)"
    )
    parser.add_argument("--json", type=Path, help="write the result here as JSON too")
    args = parser.parse_args(argv)

    hogs = [
        subprocess.Popen(["nice", "-n", "0", sys.executable, "-c", "while 1: pass"])
        for _ in range(args.hogs)
    ]
    passes: dict[str, int] = defaultdict(int)
    failures: dict[str, list[str]] = defaultdict(list)
    loads = [_load()]
    started = time.monotonic()
    print(f"flake check: {args.runs} rounds, {args.hogs} CPU hogs, load {loads[0]}", flush=True)
    try:
        with tempfile.TemporaryDirectory(prefix="flake-") as tmp:
            work = Path(tmp)
            for index in range(args.runs):
                cases = _round(args.tests or list(TIMED), args.keyword, work, index)
                for name, problem in cases.items():
                    if problem is None:
                        passes[name] += 1
                    else:
                        passes.setdefault(name, 0)
                        failures[name].append(f"round {index + 1}: {problem}")
                loads.append(_load())
                good = sum(p is None for p in cases.values())
                print(f"  round {index + 1}: {good}/{len(cases)}, load {loads[-1]}", flush=True)
            seen, bounds = _spread(work / "timing.jsonl")
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    minutes = (time.monotonic() - started) / 60
    print(f"\n{minutes:.0f} min; load (1/5/15 min) at start {loads[0]}, at end {loads[-1]}\n")
    result: dict[str, object] = {"runs": args.runs, "hogs": args.hogs, "loads": loads, "tests": {}}
    for name in sorted(passes):
        print(f"{passes[name]:>3}/{args.runs}  {name}")
        entry: dict[str, object] = {
            "passed": passes[name],
            "failures": failures[name],
            "spread": {},
        }
        for quantity, values in sorted(seen.get(name, {}).items()):
            low, high = bounds[(name, quantity)]
            line = {
                "low": low,
                "high": high,
                "min": min(values),
                "median": statistics.median(values),
                "max": max(values),
                "n": len(values),
            }
            entry["spread"][quantity] = line  # type: ignore[index]
            print(
                f"          {quantity}: bound [{_fmt(low)}, {_fmt(high)}]  seen"
                f" {min(values):.3f} / {statistics.median(values):.3f} / {max(values):.3f}"
                f" (min / median / max, n={len(values)})"
            )
        for failure in failures[name]:
            print(f"          {failure}")
        result["tests"][name] = entry  # type: ignore[index]
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1))
    return 0 if all(passes[name] == args.runs for name in passes) else 1


if __name__ == "__main__":
    sys.exit(main())
