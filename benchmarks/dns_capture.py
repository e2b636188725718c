"""The `dns` stage against a capture of a loopback resolver's queries (`bench_capture.py --dns`).

A dnsmasq on 127.0.25.53:53 answers `*.bench.test` with 127.0.0.1; dumpcap captures its
port on `lo`. Every run is a process of its own, as a user runs it (so the first-call costs
of a process land where they land for a user), and asks for a name of its own
(`p3.sys.bench.test`), which is how its queries are found in the capture:
- system: `promptpath run http://NAME:PORT/... --json` inside a private mount namespace
  whose /etc/resolv.conf names the dnsmasq (`unshare -m` + a bind mount: root), and curl
  the same way (`time_namelookup`);
- resolver: `promptpath run ... --resolver 127.0.25.53 --json` (dnspython), no namespace.

Truth = the capture's first query of the name -> its last answer (A and AAAA both go).
error = the tool's figure - truth. The target is a platform's only: the reference endpoint
on 127.0.0.1 answers the request, the request itself is not what is measured.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

RESOLVER = "127.0.25.53"
DOMAIN = "bench.test"
TARGET_MEDIAN_MS = 0.2
TARGET_P99_MS = 0.5
CASES = ("promptpath system", "curl system", "promptpath --resolver")


@contextlib.contextmanager
def dnsmasq(tmp: Path) -> Iterator[None]:
    conf = tmp / "dnsmasq.conf"
    conf.write_text(
        f"port=53\nlisten-address={RESOLVER}\nbind-interfaces\nno-resolv\nno-hosts\n"
        f"address=/{DOMAIN}/127.0.0.1\n"
    )
    proc = subprocess.Popen(
        ["dnsmasq", "-k", "-C", str(conf), f"--pid-file={tmp / 'dnsmasq.pid'}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(0.5)  # it binds at once; a failed bind exits
        if proc.poll() is not None:
            assert proc.stderr is not None
            raise SystemExit(f"dnsmasq did not start: {proc.stderr.read().strip()}")
        yield
    finally:
        proc.terminate()
        proc.wait(5)


def in_namespace(resolv_conf: Path, argv: list[str]) -> list[str]:
    """``argv`` in a private mount namespace whose /etc/resolv.conf is ``resolv_conf``."""
    script = f'mount --bind {resolv_conf} /etc/resolv.conf && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, "sh", *argv]


def promptpath_argv(name: str, port: int, *extra: str) -> list[str]:
    url = f"http://{name}:{port}/v1/chat/completions"
    return [sys.executable, "-m", "promptpath", "run", url, "--json", "--max-tokens", "3", *extra]


def run_promptpath(argv: list[str], env: dict[str, str]) -> float:
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    try:
        body = json.loads(out.stdout)
    except json.JSONDecodeError as exc:
        raise SystemExit(f"promptpath: {out.stderr.strip()[-300:]}") from exc
    if not body["ok"]:
        raise SystemExit(f"promptpath: {body['error']}")
    return float(body["stages_ms"]["dns"])


def run_curl(argv: list[str], env: dict[str, str]) -> float:
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return float(out.stdout) * 1e3


def read_queries(pcap: Path) -> dict[str, float]:
    """Per name: first query -> last answer, ms, from the capture."""
    fields = ["frame.time_relative", "dns.qry.name", "dns.flags.response"]
    cmd = ["tshark", "-r", str(pcap), "-T", "fields", "-E", "separator=\t"]
    for name in fields:
        cmd += ["-e", name]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for row in out.splitlines():
        t_s, qname, response = row.split("\t")
        qname = qname.lower().rstrip(".")
        if response in ("1", "True"):
            last[qname] = float(t_s)
        else:
            first.setdefault(qname, float(t_s))
    return {q: (last[q] - first[q]) * 1e3 for q in first if q in last}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure(
    runs: int, tmp: Path, port: int, capture: contextlib.AbstractContextManager[object]
) -> None:
    """``capture``: dumpcap on lo for udp port 53 (started by the caller, who owns it)."""
    resolv_conf = tmp / "resolv.conf"
    resolv_conf.write_text(f"nameserver {RESOLVER}\noptions attempts:1\n")
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    curl = ["curl", "-sS", "-o", os.devnull, "-H", "content-type: application/json"]
    curl += ["--data", '{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}']
    curl += ["-w", "%{time_namelookup}"]
    measured: list[tuple[str, str, float]] = []  # (case, name, ms)

    def one(i: int, case: str) -> None:
        tag = {"promptpath system": "sys", "curl system": "curl", "promptpath --resolver": "res"}
        name = f"r{i}.{tag[case]}.{DOMAIN}"
        if case == "promptpath system":
            ms = run_promptpath(in_namespace(resolv_conf, promptpath_argv(name, port)), env)
        elif case == "curl system":
            url = f"http://{name}:{port}/v1/chat/completions"
            ms = run_curl(in_namespace(resolv_conf, [*curl, url]), env)
        else:
            ms = run_promptpath(promptpath_argv(name, port, "--resolver", RESOLVER), env)
        measured.append((case, name, ms))

    load_before = loadavg()
    with dnsmasq(tmp), capture:
        for i in range(-1, runs):  # run -1 warms the page cache: left out
            for case in CASES:
                one(i, case)
    load_after = loadavg()
    truth = read_queries(tmp / "dns.pcapng")
    print(f"\ndns stage vs capture, {runs} runs each, load average {load_before} → {load_after}")
    for case in CASES:
        errors = [ms - truth[n] for c, n, ms in measured if c == case and n in truth]
        errors = errors[-runs:]
        wire = [truth[n] for c, n, _ in measured[-runs * len(CASES) :] if c == case and n in truth]
        med, p99 = statistics.median(errors), percentile([abs(e) for e in errors], 99)
        ok = abs(med) <= TARGET_MEDIAN_MS and p99 <= TARGET_P99_MS
        mark = ("   target met" if ok else "   TARGET MISSED") if "promptpath" in case else ""
        print(
            f"  {case:<22} capture median {statistics.median(wire):6.3f} ms   error median"
            f" {med:+7.3f} ms   p99 |err| {p99:7.3f} ms   n={len(errors)}{mark}"
        )
