"""The prefill probe's own accuracy: slope and fixed part against what the reference
endpoint injects (--ttft-ms 200 --prefill-ms-per-1k 40), over N runs of the default probe.

    .venv/bin/python benchmarks/bench_prefill.py --runs 10

Loopback only: the endpoint is a subprocess on 127.0.0.1 (plain HTTP).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIXED_MS, SLOPE = 200.0, 40.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    from tests.helpers.refserver import reference_server  # the repository's, on sys.path

    serve = ["--ttft-ms", str(FIXED_MS), "--prefill-ms-per-1k", str(SLOPE)]
    serve += ["--tokens", "4", "--rate", "0"]
    slopes: list[float] = []
    fixed: list[float] = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        reference_server(tls=False, extra_args=serve, tmp_path=Path(tmp)) as server,
    ):
        url = server.path("/v1/chat/completions")
        for n in range(args.runs):
            began = time.perf_counter()
            out = subprocess.run(
                [sys.executable, "-m", "promptpath", "run", url, "--probe", "prefill",
                 "--json"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            doc = json.loads(out.stdout)
            [f] = [f for f in doc["findings"] if f["probe"] == "prefill"]
            fit = f["evidence"]["fit"]
            slopes.append(fit["slope_ms_per_1k"])
            fixed.append(fit["fixed_ms"])
            print(
                f"run {n + 1}: slope {fit['slope_ms_per_1k']:.2f} ± "
                f"{fit['slope_ci95_ms_per_1k']:.2f} ms/1k, fixed {fit['fixed_ms']:.1f} ± "
                f"{fit['fixed_ci95_ms']:.1f} ms ({time.perf_counter() - began:.1f} s)"
            )
    worst_slope = max(abs(s - SLOPE) / SLOPE for s in slopes)
    worst_fixed = max(abs(f - FIXED_MS) for f in fixed)
    print(
        f"slope: median {statistics.median(slopes):.2f}, range {min(slopes):.2f}-"
        f"{max(slopes):.2f} ms/1k (worst {worst_slope:.1%} off 40); fixed: median "
        f"{statistics.median(fixed):.1f}, range {min(fixed):.1f}-{max(fixed):.1f} ms "
        f"(worst {worst_fixed:.1f} ms off 200)"
    )


if __name__ == "__main__":
    main()
