"""Flake check of the whole suite: N full runs in a fresh clone, beside CPU hogs.

    sudo .venv/bin/python benchmarks/flake_suite.py [--ref HEAD] [--runs 3] [--hogs 2]
        [--lab-venvs DIR] [--json OUT] [--keep] [-- PYTEST_ARGS ...]

What CI sees is a fresh clone, and a test that fails one run in seven passes two green
runs easily. This clones ``--ref`` of this checkout's repository into a temp dir, makes
its virtual environment as ``.ci/run`` does (``python3 -m venv .venv`` and ``pip install
-e '.[dev]'``), links ``.lab`` to existing mitmproxy and LiteLLM environments instead of
installing them again (their versions are checked against the clone's ``.ci/run``), then
runs the README's test command, ``pytest -q`` (the suite's own 3 xdist workers), ``--runs``
times under ``PROMPTPATH_REQUIRE_LAB=1`` with ``--hogs`` CPU-bound loops running the whole
time. Each round starts as a fresh clone would: no pytest cache, no hypothesis database.

It prints, per round, pytest's exit status, the counts and the load average (1/5/15 min)
at its start and end, then every test that failed in at least one round: rounds failed /
rounds it ran in, and the first line of why. ``--json`` writes the same. The lab binaries
(nginx, squid, ...) are the machine's: install them first (``.ci/run`` does, as root).
Needs root, as the suite does (namespaces, SCHED_FIFO, captures on lo).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The lab environments .ci/run makes, each with the package whose version it pins there.
LAB_VENVS = {"mitmproxy": "MITMPROXY_VERSION", "litellm": "LITELLM_VERSION"}
#: A round that has not ended after this long is stopped (a hang is a finding too).
ROUND_TIMEOUT_S = 3 * 3600.0


# -- reading a round's JUnit XML (pure) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """One test's result in one round."""

    node: str  # pytest's node id: tests/unit/test_x.py::test_y[param]
    state: str  # passed | failed | error | skipped
    why: str = ""  # the first line of the failure, error or skip message


def node_id(classname: str, name: str, exists: Callable[[str], bool]) -> str:
    """pytest's node id from a JUnit testcase: ``classname`` is the module path dotted,
    then any classes (``tests.unit.test_x.TestY``); the shortest prefix that is a file
    (``exists``) is the module."""
    parts = [p for p in classname.split(".") if p]
    for cut in range(1, len(parts) + 1):
        path = "/".join(parts[:cut]) + ".py"
        if exists(path):
            return "::".join([path, *parts[cut:], name])
    return "::".join([*filter(None, [classname]), name])


def _first_line(text: str | None, limit: int = 200) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


#: A test reported twice in one round (a failure, then an error in its teardown) keeps
#: the worse state.
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 2}


def read_junit(xml_text: str, exists: Callable[[str], bool]) -> list[Outcome]:
    """Every test of a JUnit report, as pytest's ``--junitxml`` writes it."""
    outcomes: dict[str, Outcome] = {}
    for case in ET.fromstring(xml_text).iter("testcase"):
        node = node_id(case.get("classname", ""), case.get("name", ""), exists)
        state, why = "passed", ""
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                state = {"failure": "failed"}.get(tag, tag)
                why = _first_line(found.get("message")) or _first_line(found.text) or tag
                break
        seen = outcomes.get(node)
        if seen is None or _RANK[state] > _RANK[seen.state]:
            outcomes[node] = Outcome(node=node, state=state, why=why)
    return list(outcomes.values())


# -- the table over rounds (pure) ---------------------------------------------------------


@dataclass(slots=True)
class Tally:
    """One test over every round it ran in."""

    rounds_run: int = 0
    rounds_failed: int = 0
    why: str = ""  # the first failure's first line
    failed_in: list[int] = field(default_factory=list)  # round numbers, from 1


def tally(rounds: Iterable[Iterable[Outcome]]) -> dict[str, Tally]:
    """Per test: how many rounds it ran in and failed (an error counts as a failure)."""
    table: dict[str, Tally] = {}
    for index, outcomes in enumerate(rounds, 1):
        for outcome in outcomes:
            entry = table.setdefault(outcome.node, Tally())
            entry.rounds_run += 1
            if outcome.state in ("failed", "error"):
                entry.rounds_failed += 1
                entry.failed_in.append(index)
                entry.why = entry.why or outcome.why
    return table


def counts(outcomes: Iterable[Outcome]) -> dict[str, int]:
    found = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for outcome in outcomes:
        found[outcome.state] += 1
    return found


def failure_table(table: Mapping[str, Tally]) -> list[str]:
    """The lines of the table: the tests that failed at least once, most failures first."""
    failed = sorted(
        ((n, t) for n, t in table.items() if t.rounds_failed),
        key=lambda item: (-item[1].rounds_failed, item[0]),
    )
    return [f"{t.rounds_failed}/{t.rounds_run}  {node}\n      {t.why}" for node, t in failed]


# -- the clone and its environment --------------------------------------------------------


def _run(command: list[str], cwd: Path, log: Path | None = None) -> None:
    """Run ``command``; its output goes to ``log`` (shown only if it fails) when given."""
    if log is None:
        subprocess.run(command, cwd=cwd, check=True)
        return
    with log.open("ab") as out:
        done = subprocess.run(command, cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode:
        sys.stderr.write(log.read_text(errors="replace")[-4000:])
        raise subprocess.CalledProcessError(done.returncode, command)


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def clone(ref: str, into: Path) -> str:
    """A fresh clone of this repository at ``ref`` in ``into``; returns the commit."""
    commit = _git(ROOT, "rev-parse", "--verify", f"{ref}^{{commit}}")
    _run(["git", "clone", "--quiet", "--no-checkout", str(ROOT), str(into)], cwd=ROOT)
    if subprocess.run(["git", "cat-file", "-e", commit], cwd=into, check=False).returncode:
        _run(["git", "fetch", "--quiet", str(ROOT), commit], cwd=into)  # not on a branch
    _run(["git", "checkout", "--quiet", "--detach", commit], cwd=into)
    return commit


def make_venv(checkout: Path, log: Path) -> None:
    """The checkout's .venv, as .ci/run makes it (pip's output in ``log``)."""
    _run([shutil.which("python3") or sys.executable, "-m", "venv", ".venv"], checkout, log)
    pip = [".venv/bin/python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run([*pip, "-e", ".[dev]"], checkout, log)


def pinned_lab_versions(ci_script: str) -> dict[str, str]:
    """The lab environments' package versions .ci/run pins (``NAME_VERSION=x.y.z``)."""
    found = {}
    for venv, variable in LAB_VENVS.items():
        match = re.search(rf"^{variable}=(\S+)$", ci_script, re.MULTILINE)
        if match:
            found[venv] = match.group(1)
    return found


def link_lab(checkout: Path, lab: Path) -> list[str]:
    """``checkout/.lab`` -> ``lab``; the problems with what is there (empty: all good)."""
    (checkout / ".lab").symlink_to(lab.resolve(), target_is_directory=True)
    problems = []
    for venv, version in pinned_lab_versions((checkout / ".ci" / "run").read_text()).items():
        python = lab / venv / "bin" / "python"
        probe = f"import importlib.metadata as m; print(m.version({venv!r}))"
        try:
            got = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
            have = got.stdout.strip() if got.returncode == 0 else "none"
        except OSError:
            have = "no environment"
        if have != version:
            problems.append(f"{lab / venv}: .ci/run pins {venv}=={version}, found {have}")
    return problems


# -- rounds -------------------------------------------------------------------------------


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@dataclass(frozen=True, slots=True)
class Round:
    """One full run of the suite."""

    index: int
    rc: int
    timed_out: bool
    duration_s: float
    load_start: list[float]
    load_end: list[float]
    summary: str  # pytest's last line
    outcomes: list[Outcome]

    def line(self) -> str:
        c = counts(self.outcomes)
        stopped = " (stopped: timed out)" if self.timed_out else ""
        return (
            f"round {self.index}: rc {self.rc}{stopped}, {c['passed']} passed,"
            f" {c['failed']} failed, {c['error']} errors, {c['skipped']} skipped"
            f" in {self.duration_s:.0f} s; load {self.load_start} -> {self.load_end}"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "round": self.index,
            "rc": self.rc,
            "timed_out": self.timed_out,
            "duration_s": self.duration_s,
            "load_start": self.load_start,
            "load_end": self.load_end,
            "counts": counts(self.outcomes),
            "summary": self.summary,
        }


def run_round(checkout: Path, work: Path, index: int, pytest_args: list[str]) -> Round:
    """One ``pytest -q`` of the whole suite in ``checkout``."""
    shutil.rmtree(checkout / ".hypothesis", ignore_errors=True)  # a fresh clone has none
    junit = work / f"round{index}.xml"
    log = work / f"round{index}.log"
    env = dict(os.environ, PROMPTPATH_REQUIRE_LAB="1")
    command = [".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += [f"--junitxml={junit}", *pytest_args]
    started, load_start, timed_out = time.monotonic(), load(), False
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, cwd=checkout, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,  # its whole group is stopped on a hang
        )  # fmt: skip
        try:
            rc = process.wait(ROUND_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(process.pid, signal.SIGKILL)
            rc = process.wait()
    outcomes = []
    if junit.exists():
        outcomes = read_junit(junit.read_text(), lambda path: (checkout / path).is_file())
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return Round(
        index=index,
        rc=rc,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - started, 1),
        load_start=load_start,
        load_end=load(),
        summary=lines[-1][:200] if lines else "",
        outcomes=outcomes,
    )


def skips(rounds: Iterable[Round]) -> list[tuple[str, str]]:
    return sorted({(o.node, o.why) for r in rounds for o in r.outcomes if o.state == "skipped"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="HEAD", help="commit or branch to clone (HEAD)")
    parser.add_argument("--runs", type=int, default=3, help="full runs of the suite (3)")
    parser.add_argument(
        "--hogs", type=int, default=os.cpu_count() or 2, help="CPU-bound loops (one per core)"
    )
    parser.add_argument(
        "--lab-venvs",
        type=Path,
        default=ROOT / ".lab",
        help="the mitmproxy and LiteLLM environments to link as .lab (this checkout's)",
    )
    parser.add_argument("--json", type=Path, help="write the result here as JSON too")
    parser.add_argument("--keep", action="store_true", help="keep the clone and round logs")
    parser.add_argument("pytest_args", nargs="*", help="after --: more pytest arguments")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="flake-suite-"))
    # mkdtemp makes it 0700: the path lab runs the clone's promptpath as nobody, which
    # must be able to reach it, as it can a checkout in a home or CI directory.
    work.chmod(0o755)
    checkout = work / "clone"
    hogs: list[subprocess.Popen[bytes]] = []
    rounds: list[Round] = []
    commit, setup_s, problems = "", 0.0, []
    try:
        started = time.monotonic()
        commit = clone(args.ref, checkout)
        print(f"flake suite: {commit[:12]} ({args.ref}) cloned into {checkout}", flush=True)
        make_venv(checkout, work / "setup.log")
        problems = link_lab(checkout, args.lab_venvs)
        for problem in problems:
            print(f"  lab environment: {problem}", flush=True)
        setup_s = time.monotonic() - started
        print(f"  clone and venv: {setup_s:.0f} s", flush=True)
        hogs = [
            subprocess.Popen(["nice", "-n", "0", sys.executable, "-c", "while 1: pass"])
            for _ in range(args.hogs)
        ]
        print(f"  {args.runs} round(s) beside {args.hogs} CPU hogs, load {load()}", flush=True)
        for index in range(1, args.runs + 1):
            rounds.append(run_round(checkout, work, index, args.pytest_args))
            print("  " + rounds[-1].line(), flush=True)
    except KeyboardInterrupt:
        print("  interrupted: the rounds that ended are below", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    table = tally(r.outcomes for r in rounds)
    lines = failure_table(table)
    print(f"\ntests that failed at least once (rounds failed / rounds run): {len(lines)}")
    for line in lines:
        print("  " + line)
    skipped = skips(rounds)
    if skipped:
        print(f"skipped (not failures): {len(skipped)}")
        for node, why in skipped:
            print(f"  {node}: {why}")
    if args.keep:
        print(f"kept: {work}")
    if args.json is not None:
        body = {
            "ref": args.ref,
            "commit": commit,
            "runs": args.runs,
            "hogs": args.hogs,
            "setup_s": round(setup_s, 1),
            "lab_problems": problems,
            "rounds": [r.as_json() for r in rounds],
            "failed": {
                node: {
                    "rounds_failed": t.rounds_failed,
                    "rounds_run": t.rounds_run,
                    "failed_in": t.failed_in,
                    "why": t.why,
                }
                for node, t in sorted(table.items())
                if t.rounds_failed
            },
            "skipped": [{"test": node, "why": why} for node, why in skipped],
        }
        args.json.write_text(json.dumps(body, indent=1) + "\n")
    return 1 if len(rounds) < args.runs or any(r.rc != 0 for r in rounds) else 0


if __name__ == "__main__":
    sys.exit(main())
