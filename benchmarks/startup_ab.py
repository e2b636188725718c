"""Start-up CPU of the short commands, this checkout against another one, interleaved.

    .venv/bin/python benchmarks/startup_ab.py --before DIR [--runs 15]

DIR is a checkout of an earlier commit (``git worktree add --detach DIR COMMIT``). Each
round runs ``python -m promptpath`` with ``--version``, ``--help``, ``run --help`` and
``probe --help`` from both trees (PYTHONPATH puts each tree first; the cwd is a temp dir),
and records each child's CPU time (user + system): on a shared 2-core machine CPU time
moves far less with the load than wall time does. Both trees are byte-compiled first, as
``pip install`` does. Prints the median of each command per tree, and the load average.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = {
    "--version": ["--version"],
    "--help": ["--help"],
    "run --help": ["run", "--help"],
    "probe --help": ["probe", "--help"],
}


def cpu_ms(argv: list[str], env: dict[str, str], cwd: str) -> float:
    """One child's user + system CPU time, in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, type=Path, help="an earlier checkout")
    parser.add_argument("--runs", type=int, default=15)
    ns = parser.parse_args()
    trees = {"before": ns.before.resolve(), "after": ROOT}
    envs = {tag: dict(os.environ, PYTHONPATH=str(tree)) for tag, tree in trees.items()}
    for tree in trees.values():
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "promptpath")])
    samples: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(ns.runs):
            for name, args in CASES.items():
                for tag, env in envs.items():
                    argv = [sys.executable, "-m", "promptpath", *args]
                    samples.setdefault((name, tag), []).append(cpu_ms(argv, env, cwd))
    print(f"{ns.runs} runs each, load average {os.getloadavg()[0]:.1f}")
    for name in CASES:
        b, a = (statistics.median(samples[(name, tag)]) for tag in trees)
        print(f"{name:14s} CPU median: before {b:6.1f} ms  after {a:6.1f} ms")


if __name__ == "__main__":
    main()
