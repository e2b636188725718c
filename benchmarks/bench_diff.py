"""What `promptpath diff` costs on two large series: 1,000 runs a side, judged in full.

    python3 benchmarks/bench_diff.py [--runs 1000] [--trials 5]

Builds two ``promptpath.series/1`` documents in memory from examples/sample-run.json, each
run's stages and milestones jittered (the after side's first token 100 ms later), writes
them to a temp dir, then times over ``--trials``:

- ``judge``: core/change's ``diff_runs`` alone on the run objects (every metric's rank
  test, interval and floor, Holm over the diff, the error rate, every fact);
- ``cli``: the whole `promptpath diff BEFORE AFTER --json` in-process: reading and parsing
  both files, judging, the terminal table and the JSON text.

It prints the fastest of the trials (load on a shared machine only adds time) and the
headline, which must name first_token.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptpath.cli.faces import main  # noqa: E402
from promptpath.core.change.compose import diff_runs  # noqa: E402
from promptpath.environment import Environment  # noqa: E402

SAMPLE: dict[str, Any] = json.loads((ROOT / "examples" / "sample-run.json").read_text())


def _run(rng: random.Random, later_ms: float) -> dict[str, Any]:
    run = copy.deepcopy(SAMPLE)
    for stage in run["stages_ms"]:
        run["stages_ms"][stage] *= rng.uniform(0.9, 1.1)
    shift = later_ms + rng.gauss(0, 5)
    run["stages_ms"]["first_token"] += shift
    run["ttft_ms"]["from_start"] += shift
    run["ttft_ms"]["from_request"] += shift
    run["first_output_ms"]["from_start"] += shift
    run["milestones_ms"]["end"] += shift
    for gap in ("p50", "p95", "p99"):
        run["tokens"]["gaps_ms"][gap] *= rng.uniform(0.95, 1.05)
    return run


def _series(n: int, later_ms: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    return {"schema": "promptpath.series/1", "runs": [_run(rng, later_ms) for _ in range(n)]}


def main_bench() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=5)
    args = parser.parse_args()
    before, after = _series(args.runs, 0.0, 1), _series(args.runs, 100.0, 2)
    folder = Path(tempfile.mkdtemp())
    paths = []
    for name, body in (("before", before), ("after", after)):
        path = folder / f"{name}.json"
        path.write_text(json.dumps(body))
        paths.append(str(path))
    size = sum(Path(p).stat().st_size for p in paths) / 2 / 1e6
    judge, cli = [], []
    headline = ""
    for _ in range(args.trials):
        t0 = time.perf_counter_ns()
        diff = diff_runs(before["runs"], after["runs"])
        judge.append((time.perf_counter_ns() - t0) / 1e6)
        headline = diff.headline
        out, err = io.StringIO(), io.StringIO()
        env = Environment(stdout=out, stderr=err, environ={"COLUMNS": "100"})
        t0 = time.perf_counter_ns()
        code = main(["diff", *paths, "--json"], env=env)
        cli.append((time.perf_counter_ns() - t0) / 1e6)
        assert code == 1, err.getvalue()
    print(f"{args.runs} vs {args.runs} runs ({size:.1f} MB a side), best of {args.trials}")
    print(f"judge  {min(judge):8.1f} ms  (diff_runs on the run objects)")
    print(f"cli    {min(cli):8.1f} ms  (read + parse + judge + table + JSON, in-process)")
    print(f"headline: {headline}")


if __name__ == "__main__":
    main_bench()
