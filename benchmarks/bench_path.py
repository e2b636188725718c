"""The path probe's per-hop RTTs against a packet capture on the client's own link.

    sudo .venv/bin/python benchmarks/bench_path.py [--runs 5] [--delay-ms 10] [--routers 3]
        [--silent-destination]

Builds the routed namespace chain of tests/helpers/pathlab.py (client ── r1 ── r2 ══ r3 ──
server, ``--delay-ms`` one way on r2 ══ r3), runs ``promptpath run … --probe path --json``
``--runs`` times from the client namespace while dumpcap captures the client's interface,
and pairs each TTL-limited SYN on the wire with the ICMP time-exceeded, SYN/ACK or RST that
answered it (by the SYN's source port, which the ICMP quotes). Prints, per hop, the wire's
median RTT, the probe's median (the mean of its per-run medians) and the difference; and the
whole probe's time per run. ``--routers 14`` puts the server 15 hops away (the probe's
default reach); ``--silent-destination`` drops the SYNs in the server namespace, so every
round probes all 15 TTLs and waits out its timeout: the probe's worst case. Needs root,
iproute2, dumpcap and tshark.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.helpers.pathlab import path_lab, server_of  # noqa: E402

PORT = 8443
PROMPTPATH = str(Path(sys.executable).parent / "promptpath")


def _wire(pcap: Path, server_ip: str) -> dict[int, list[float]]:
    """TTL -> RTTs (ms) of every probe the capture saw sent and answered."""
    fields = [
        "frame.time_epoch",
        "ip.ttl",
        "tcp.srcport",
        "tcp.dstport",
        "tcp.flags.syn",
        "tcp.flags.ack",
        "tcp.flags.reset",
        "icmp.type",
        "ip.src",
    ]
    cmd = ["tshark", "-r", str(pcap), "-T", "fields", "-E", "separator=\t", "-E", "occurrence=a"]
    for name in fields:
        cmd += ["-e", name]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    sent: dict[int, tuple[float, int]] = {}
    rtts: dict[int, list[float]] = {}
    for line in out.splitlines():
        t, ttls, sport, dport, syn, ack, rst, icmp, src = (line.split("\t") + [""] * 9)[:9]
        when = float(t)
        outer_ttl = int(ttls.split(",")[0]) if ttls else 0
        if icmp == "11":  # time exceeded: the quoted SYN's source port names the probe
            port = int(sport.split(",")[-1]) if sport else None
            if port in sent:
                t_sent, ttl = sent.pop(port)
                rtts.setdefault(ttl, []).append((when - t_sent) * 1e3)
            continue
        if not sport:
            continue
        if src.split(",")[0] != server_ip and syn == "1" and ack == "0" and outer_ttl <= 30:
            sent[int(sport)] = (when, outer_ttl)
        elif src.split(",")[0] == server_ip and int(dport) in sent and (ack == "1" or rst == "1"):
            t_sent, ttl = sent.pop(int(dport))
            rtts.setdefault(ttl, []).append((when - t_sent) * 1e3)
    return rtts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--delay-ms", type=float, default=10.0)
    parser.add_argument("--routers", type=int, default=3)
    parser.add_argument("--silent-destination", action="store_true")
    args = parser.parse_args()
    server_ip = server_of(args.routers)
    with (
        path_lab(delay_ms=args.delay_ms, routers=args.routers) as lab,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for name in lab.namespaces:
            if name != "client":
                lab.sysctl(name, "net.ipv4.icmp_ratelimit", "0")
        server = subprocess.Popen(
            lab.exec(
                "server",
                PROMPTPATH,
                "serve",
                "--host",
                server_ip,
                "--port",
                str(PORT),
                "--self-signed",
                tmp,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert server.stdout is not None
        server.stdout.readline()
        if args.silent_destination:  # the trace's own connect then times out too (--timeout)
            lab.nft(
                "server",
                "table inet pp {\n chain in {\n type filter hook input priority 0;\n"
                f" tcp dport {PORT} drop\n }}\n}}\n",
            )
        pcap = Path(tmp) / "client.pcap"
        capture = subprocess.Popen(
            lab.exec("client", "dumpcap", "-q", "-i", "client-1", "-w", str(pcap)),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)
        probe_medians: dict[int, list[float]] = {}
        elapsed = []
        try:
            for _ in range(args.runs):
                result = subprocess.run(
                    lab.exec(
                        "client",
                        PROMPTPATH,
                        "run",
                        f"https://localhost:{PORT}/v1/chat/completions",
                        "--resolve",
                        f"localhost:{PORT}:{server_ip}",
                        "--cacert",
                        f"{tmp}/ca.pem",
                        "--probe",
                        "path",
                        "--timeout",
                        "2",
                        "--json",
                    ),
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                (finding,) = [
                    f for f in json.loads(result.stdout)["findings"] if f["probe"] == "path"
                ]
                elapsed.append(finding["evidence"]["elapsed_s"])
                for hop in finding["evidence"]["hops"]:
                    if hop["rtt_ms"]:
                        probe_medians.setdefault(hop["ttl"], []).append(hop["rtt_ms"]["median"])
        finally:
            time.sleep(0.5)
            capture.terminate()
            capture.wait(10)
            server.kill()
        wire = _wire(pcap, server_ip)
    load = os.getloadavg()[0]
    print(
        f"path probe vs capture: {args.runs} runs, {args.routers} routers,"
        f" {args.delay_ms:g} ms one way on r2-r3,"
        f"{' destination silent,' if args.silent_destination else ''} load {load:.1f}"
    )
    print(f"{'hop':>3} {'wire ms':>9} {'probe ms':>9} {'diff ms':>8} {'n wire':>7}")
    worst = 0.0
    for ttl in sorted(probe_medians):
        w = statistics.median(wire.get(ttl, [float("nan")]))
        p = statistics.mean(probe_medians[ttl])
        worst = max(worst, abs(p - w))
        print(f"{ttl:>3} {w:>9.3f} {p:>9.3f} {p - w:>+8.3f} {len(wire.get(ttl, [])):>7}")
    print(
        f"worst |diff| {worst:.3f} ms; probe time per run: median"
        f" {statistics.median(elapsed):.2f} s, max {max(elapsed):.2f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
