"""Stage durations against a packet capture on loopback: promptpath and curl, same run.

    .venv/bin/python benchmarks/bench_capture.py [--runs 30]

Needs root (or CAP_NET_RAW) for dumpcap, plus tshark and curl. Starts the reference
endpoint twice (plain HTTP and TLS, `python -m promptpath.server` on 127.0.0.1), captures
`lo` filtered on their two ports, and sends `--runs` requests per scheme from each tool,
interleaved so both see the same noise: promptpath's `trace()` in this process, curl as a
process per request. Every request is its own connection, matched to its TCP flow by the
client's port (promptpath records it on the connect attempt; curl's `%{local_port}`).

For each stage, error = the tool's duration - the capture's duration (never absolute
offsets, the clocks differ):
- connect: client SYN -> server SYN/ACK;
- tls: ClientHello -> client Finished (TLS 1.3 encrypts it: both tools write their keys to
  SSLKEYLOGFILE and tshark decrypts with `-o tls.keylog_file:`);
- request (TLS): the client's Finished -> the last frame carrying the request (HTTP/2:
  its HEADERS and DATA frames, not SETTINGS); curl has no such figure, but the capture
  shows each tool's own time for it;
- wait: last frame carrying the request -> first frame of the response headers.
`--http 2` runs the TLS server's requests over HTTP/2 (both tools; plain stays HTTP/1.1).
curl's durations: connect = time_connect - time_namelookup, tls = time_appconnect -
time_connect, wait = time_starttransfer - time_pretransfer.

    .venv/bin/python benchmarks/bench_capture.py --dns [--runs 30]

measures the `dns` stage instead (system resolver and --resolver, beside curl) against a
loopback dnsmasq's captured queries: see dns_capture.py.

    .venv/bin/python benchmarks/bench_capture.py --proxy squid [--runs 30] [--http 2]

measures the proxy stages instead: a real squid on loopback in front of both servers, an
https target through CONNECT (proxy_connect, tunnel, then tls, request and wait inside the
tunnel) and a plain-http one in absolute form (proxy_connect, wait), against the capture
of the client <-> proxy flows: see proxy_capture.py.

    .venv/bin/python benchmarks/bench_capture.py --rtt-ms 40

runs the same over a real round trip: the impairer lab (tests/helpers/impairer.py, as a
process of its own) adds half of it each way between two network namespaces; the servers
listen in the server namespace, this process and curl move into the client namespace, and
dumpcap captures that namespace's TUN device.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptpath.cli.commands import RunArgs, build_options  # noqa: E402
from promptpath.core.stats import percentile  # noqa: E402
from promptpath.tracer.orchestrator import trace  # noqa: E402

if TYPE_CHECKING:
    from tests.helpers.proxylab import Proxy

STAGES = ("connect", "tls", "request", "wait")
#: Through a proxy (proxy_capture.py says what each is on the wire), per target scheme.
PROXY_STAGES = {
    "http": ("proxy_connect", "wait"),
    "https": ("proxy_connect", "tunnel", "tls", "setup", "request", "wait"),
}
#: --http for the TLS server (plain HTTP stays HTTP/1.1); main() sets it.
HTTP = ["1.1"]
TOOLS = ("promptpath", "curl")
TARGET_MEDIAN_MS = 0.2
TARGET_P99_MS = 0.5  # connect and tls
# Small and immediate: the body is not what is measured here.
SERVER_HEADERS = ("x-promptpath-ttft-ms: 0", "x-promptpath-tokens: 3", "x-promptpath-rate: 0")
BODY = {
    "model": "bench",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
    "max_tokens": 3,
}
CURL_FORMAT = (
    "%{local_port} %{time_namelookup} %{time_connect} %{time_appconnect}"
    " %{time_pretransfer} %{time_starttransfer}"
)
_PROXY_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
#: Through the lab's proxy curl must neither pick another one nor bypass it.
_NO_PROXY_ENV = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@dataclass(frozen=True, slots=True)
class Site:
    """Where the servers listen and the capture runs: loopback, or the impairer lab."""

    address: str = "127.0.0.1"
    interface: str = "lo"
    server_prefix: tuple[str, ...] = ()  # `ip netns exec NS` for the lab's server side


LOOPBACK = Site()


@dataclass(frozen=True, slots=True)
class Server:
    port: int
    address: str
    ca: str | None
    process: subprocess.Popen[str]

    @property
    def scheme(self) -> str:
        return "http" if self.ca is None else "https"

    def url(self) -> str:
        return f"{self.scheme}://localhost:{self.port}/v1/chat/completions"


@dataclass(frozen=True, slots=True)
class Measured:
    """One request as a tool saw it: durations in ms, keyed by stage."""

    tool: str
    scheme: str
    flow: tuple[int, int]  # (client port, server port)
    ms: dict[str, float]


@dataclass(slots=True)
class Flow:
    """One TCP connection in the capture: times (s, capture clock) of the frames we need."""

    syn: float | None = None
    synack: float | None = None
    hello: float | None = None
    client_finished: float | None = None
    response: float | None = None
    client_payload: list[float] = field(default_factory=list)
    request_frames: list[float] = field(default_factory=list)  # frames carrying the request
    syns: int = 0

    def ms(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.syn is not None and self.synack is not None:
            out["connect"] = (self.synack - self.syn) * 1e3
        if self.hello is not None and self.client_finished is not None:
            out["tls"] = (self.client_finished - self.hello) * 1e3
        if self.response is not None:
            response = self.response
            sent = [t for t in self.request_frames or self.client_payload if t < response]
            if sent:
                out["wait"] = (response - sent[-1]) * 1e3
            if self.client_finished is not None:
                # Connection ready (the client's Finished) -> the request's last frame:
                # the tool's own time to write its request, on the wire.
                ready = self.client_finished
                req = [t for t in self.request_frames if ready < t < response]
                if req:
                    out["request"] = (req[-1] - ready) * 1e3
        return out


@contextlib.contextmanager
def reference_server(
    tmp: Path, *, tls: bool, cpu: int | None = None, site: Site = LOOPBACK
) -> Iterator[Server]:
    args = [*site.server_prefix, sys.executable, "-m", "promptpath.server"]
    args += ["--host", site.address, "--port", "0"]
    if tls:
        args += ["--self-signed", str(tmp / "certs")]
    args.append("--no-http3")
    proc = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        preexec_fn=None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu})),
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        yield Server(port=int(info["port"]), address=site.address, ca=info.get("ca"), process=proc)
    finally:
        proc.terminate()
        proc.wait(5)


@contextlib.contextmanager
def capture(
    path: Path,
    ports: list[int],
    interface: str = "lo",
    bpf: str | None = None,
    buffer_mib: int | None = None,
    idle: bool = False,
) -> Iterator[list[str]]:
    """dumpcap on ``interface``, filtered on the servers' ports (or ``bpf``), from before
    the first request (in this thread's network namespace, which dumpcap inherits). The
    list it yields gets dumpcap's last words once it has stopped (the packets it received
    and dropped); ``buffer_mib`` sets its kernel buffer (dumpcap's default is 2 MiB).
    ``idle``: dumpcap runs only on a core nothing else wants (SCHED_IDLE), so that its
    wake-ups do not delay the processes measured, its buffer holding the packets."""
    bpf = bpf or " or ".join(f"tcp port {p}" for p in ports)
    buffer = [] if buffer_mib is None else ["-B", str(buffer_mib)]
    policy = ["chrt", "--idle", "0"] if idle else []
    proc = subprocess.Popen(
        [*policy, "dumpcap", "-q", "-i", interface, *buffer, "-f", bpf, "-w", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    # dumpcap names its output file once the interface is capturing.
    for line in proc.stderr:
        if line.startswith("File:"):
            break
    else:
        raise RuntimeError(f"dumpcap exited with status {proc.wait()}")
    summary: list[str] = []
    try:
        yield summary
    finally:
        # libpcap hands packets over in blocks that retire on a timeout (dumpcap's is
        # 250 ms), and SIGINT drops a block still in the kernel: let the last one retire.
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)  # flushes and closes the file
        proc.wait(10)
        summary += [line.strip() for line in proc.stderr if line.strip()]


def run_promptpath(server: Server, proxy: Proxy | None = None) -> Measured:
    """One trace in this process; through ``proxy`` (its URL as ``--proxy``) if given: the
    origin's name is then the proxy's to resolve, and the flow is the one to the proxy."""
    via = {"proxy": proxy.url} if proxy is not None else {}
    args = RunArgs(
        target=server.url(),
        cacert=server.ca,
        http=HTTP[0] if server.ca is not None else "1.1",
        resolve=[f"localhost:{server.port}:{server.address}"] if proxy is None else [],
        family=socket.AF_INET,
        max_tokens=3,
        headers=list(SERVER_HEADERS),
        **via,
    )
    result = anyio.run(trace, build_options(args, environ={}))
    assert result.exc is None, result.exc
    tl = result.timeline
    ms: dict[str, float] = {}
    for name in ("connect", "tls", "proxy_connect", "tunnel"):
        stage = tl.stage(name)
        if stage is not None and stage.duration_ns is not None:
            ms[name] = stage.duration_ns / 1e6
    m = tl.milestones
    ms["wait"] = (m["ttfb"] - m["request_sent"]) / 1e6
    if "tls_done" in m:
        ms["request"] = (m["request_sent"] - m["tls_done"]) / 1e6
    hop = tl.stage("proxy_connect")
    if "tls_done" in m and hop is not None:
        ms["setup"] = (m["tls_done"] - hop.start_ns) / 1e6  # proxy_connect + tunnel + tls
    local_port = tl.attempts[-1].local_port
    assert local_port is not None
    peer = server.port if proxy is None else proxy.port
    return Measured("promptpath", server.scheme, (local_port, peer), ms)


def run_curl(server: Server, env: dict[str, str], proxy: Proxy | None = None) -> Measured:
    """One curl process. Through ``proxy`` (``-x``), curl 7.88's ``time_connect`` is the TCP
    connect to the proxy and ``time_appconnect`` the end of the origin's TLS inside the
    tunnel: it prints no CONNECT time of its own (``-w '%{json}'`` has none either), so
    its only figure there is the three stages together (``setup``)."""
    route = ["--resolve", f"localhost:{server.port}:{server.address}"]
    if proxy is not None:
        route = ["-x", proxy.url]
    cmd = [
        "curl",
        "-sS",
        "-o",
        "/dev/null",
        "--http2" if server.ca is not None and HTTP[0] == "2" else "--http1.1",
        *route,
        "-H",
        "content-type: application/json",
        "--data",
        json.dumps(BODY),
        "-w",
        CURL_FORMAT,
    ]
    for header in SERVER_HEADERS:
        cmd += ["-H", header]
    if server.ca is not None:
        cmd += ["--cacert", server.ca]
    out = subprocess.run([*cmd, server.url()], capture_output=True, text=True, check=True, env=env)
    port, namelookup, connect, appconnect, pretransfer, starttransfer = out.stdout.split()
    connect_ms = (float(connect) - float(namelookup)) * 1e3
    ms = {
        "connect" if proxy is None else "proxy_connect": connect_ms,
        "wait": (float(starttransfer) - float(pretransfer)) * 1e3,
    }
    if server.ca is not None:
        if proxy is None:
            ms["tls"] = (float(appconnect) - float(connect)) * 1e3
        else:
            ms["setup"] = (float(appconnect) - float(namelookup)) * 1e3
    peer = server.port if proxy is None else proxy.port
    return Measured("curl", server.scheme, (int(port), peer), ms)


def read_flows(pcap: Path, keylog: Path, server_ports: set[int]) -> dict[tuple[int, int], Flow]:
    fields = [
        "frame.time_relative",
        "tcp.srcport",
        "tcp.dstport",
        "tcp.flags.syn",
        "tcp.flags.ack",
        "tcp.len",
        "tls.handshake.type",
        "http.response",
        "http2.type",
    ]
    cmd = [
        "tshark",
        "-r",
        str(pcap),
        "-o",
        f"tls.keylog_file:{keylog}",
        # The response's frame is the one with its headers, not the end of the stream.
        "-o",
        "http.desegment_body:FALSE",
        "-T",
        "fields",
        "-E",
        "separator=\t",
    ]
    for name in fields:
        cmd += ["-e", name]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    flows: dict[tuple[int, int], Flow] = {}
    for line in out.splitlines():
        t_s, src, dst, syn, ack, length, hs_types, response, h2_types = line.split("\t")
        frames = set(h2_types.split(",")) if h2_types else set()
        t = float(t_s)
        from_client = int(dst) in server_ports
        key = (int(src), int(dst)) if from_client else (int(dst), int(src))
        flow = flows.setdefault(key, Flow())
        types = set(hs_types.split(",")) if hs_types else set()
        is_syn = syn in ("1", "True")
        is_ack = ack in ("1", "True")
        if from_client:
            if is_syn and not is_ack:
                flow.syns += 1
                flow.syn = flow.syn if flow.syn is not None else t
            if "1" in types and flow.hello is None:
                flow.hello = t
            if "20" in types and flow.client_finished is None:
                flow.client_finished = t
            if int(length or 0) > 0:
                flow.client_payload.append(t)
                # HTTP/2: HEADERS (1) or DATA (0) frames, not SETTINGS or their ACKs;
                # HTTP/1.1 over TLS: any record after the client's Finished.
                after_hs = flow.client_finished is not None and t > flow.client_finished
                if frames & {"0", "1"} or (not frames and not types and after_hs):
                    flow.request_frames.append(t)
        else:
            if is_syn and is_ack and flow.synack is None:
                flow.synack = t
            if (response or "1" in frames) and flow.response is None:
                flow.response = t
    return flows


def line(name: str, values: list[float]) -> str:
    return (
        f"{name:<24} median {statistics.median(values):+7.3f} ms"
        f"   p99 {percentile(values, 99):+7.3f} ms   n={len(values)}"
    )


class CapturedFlow(Protocol):
    syns: int

    def ms(self) -> dict[str, float]: ...


def report(
    measured: list[Measured],
    flows: Mapping[tuple[int, int], CapturedFlow],
    stages_of: Mapping[str, tuple[str, ...]] | None = None,
    via: str = "",
) -> None:
    """Per scheme and stage: the capture's median and each tool's error, with the verdict.
    ``stages_of``: the stages per scheme (default: direct); ``via`` goes in each label."""
    stages_of = stages_of or {"http": ("connect", "wait"), "https": STAGES}
    unmatched = [m for m in measured if m.flow not in flows or flows[m.flow].syns != 1]
    if unmatched:
        print(f"{len(unmatched)} requests without exactly one matching flow: left out")
    for scheme, stages in stages_of.items():
        label = f"{scheme}{via}"
        for stage in stages:
            errors: dict[str, list[float]] = {}
            capture_ms: list[float] = []
            wire: dict[str, list[float]] = {}  # each tool's own flows
            for tool in TOOLS:
                errors[tool], wire[tool] = [], []
                for m in measured:
                    if m.tool != tool or m.scheme != scheme or m in unmatched:
                        continue
                    truth = flows[m.flow].ms().get(stage)
                    if truth is None:
                        continue
                    wire[tool].append(truth)
                    if stage not in m.ms:
                        continue
                    errors[tool].append(m.ms[stage] - truth)
                    capture_ms.append(truth)
            if stage == "request":
                report_request(label, wire, errors["promptpath"])
                continue
            if not capture_ms:
                print(f"{label} {stage}: not in the capture")
                continue
            print(f"{label} {stage}: capture median {statistics.median(capture_ms):.3f} ms")
            for tool in TOOLS:
                if not errors[tool]:
                    print(f"  {tool + ' error':<24} (no figure of its own)")
                    continue
                print("  " + line(f"{tool} error", errors[tool]) + verdict(stage, tool, errors))


def report_request(scheme: str, wire: dict[str, list[float]], errors: list[float]) -> None:
    """The request stage: curl reports none, but the capture shows each tool's own time
    from its Finished to its request's last frame. Targets: promptpath's within curl's +
    0.3 ms (median), and its stage within 0.2 ms median / 0.5 ms p99 of its capture."""
    own = {tool: statistics.median(v) for tool, v in wire.items() if v}
    print(
        f"{scheme} request (Finished -> last request frame, on the wire): "
        + ", ".join(f"{tool} {ms:.3f} ms" for tool, ms in own.items())
    )
    if "promptpath" in own and "curl" in own:
        ok = own["promptpath"] <= own["curl"] + 0.3
        print(
            f"  promptpath - curl {own['promptpath'] - own['curl']:+.3f} ms"
            + ("   target met" if ok else "   TARGET MISSED")
        )
    if errors:
        median, p99 = abs(statistics.median(errors)), percentile([abs(v) for v in errors], 99)
        ok = median <= TARGET_MEDIAN_MS and p99 <= TARGET_P99_MS
        mark = "   target met" if ok else "   TARGET MISSED"
        print(
            f"  {'promptpath stage error':<24} median {statistics.median(errors):+7.3f} ms"
            f"   p99 |err| {p99:7.3f} ms   n={len(errors)}{mark}"
        )


def verdict(stage: str, tool: str, errors: dict[str, list[float]]) -> str:
    """Targets: |median| within 0.2 ms; for every stage but wait also p99 |error| within
    0.5 ms, and neither worse than curl's in the same run where curl has the figure."""
    if tool != "promptpath":
        return ""

    def spread(values: list[float]) -> tuple[float, float]:
        return abs(statistics.median(values)), percentile([abs(v) for v in values], 99)

    median, p99 = spread(errors["promptpath"])
    ok = median <= TARGET_MEDIAN_MS
    if stage != "wait":
        ok = ok and p99 <= TARGET_P99_MS
        if errors.get("curl"):
            curl_median, curl_p99 = spread(errors["curl"])
            ok = ok and median <= curl_median and p99 <= curl_p99
    return "   target met" if ok else "   TARGET MISSED"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--keep", type=Path, help="copy the capture and key log here")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="servers on CPU 1, the clients (this process, curl) on CPU 0: the server a"
        " handshake wakes then cannot run on the client's core before connect() returns",
    )
    parser.add_argument(
        "--rtt-ms",
        type=float,
        default=0.0,
        help="measure across the impairer lab with this round trip (root; 0 = loopback)",
    )
    parser.add_argument(
        "--dns",
        action="store_true",
        help="the dns stage instead: system resolver and --resolver against a loopback"
        " dnsmasq's captured queries, beside curl (root: unshare -m, port 53)",
    )
    parser.add_argument(
        "--proxy",
        choices=("squid",),
        help="the proxy stages instead: both targets through a real squid on loopback"
        " (https through CONNECT, plain http in absolute form), beside curl -x",
    )
    parser.add_argument(
        "--http", default="1.1", choices=("1.1", "2"), help="over TLS (plain stays HTTP/1.1)"
    )
    ns = parser.parse_args()
    HTTP[0] = ns.http
    if ns.dns:
        measure_dns(ns.runs)
        return
    if ns.proxy:
        if ns.rtt_ms > 0:
            parser.error("--proxy runs on loopback only (no --rtt-ms)")
        measure_proxy(ns)
        return
    with contextlib.ExitStack() as stack:
        site = LOOPBACK
        if ns.rtt_ms > 0:
            from tests.helpers.impairer import enter_namespace, impairer_process

            lab = stack.enter_context(impairer_process("--delay-ms", str(ns.rtt_ms / 2)))
            site = Site(
                address=lab["server_addr"],
                interface=lab["device"],
                server_prefix=("ip", "netns", "exec", lab["server_ns"]),
            )
            # From here on this thread, and curl and dumpcap started from it, are clients.
            enter_namespace(lab["client_ns"])
        measure(ns, site)


@dataclass(frozen=True, slots=True)
class Workdir:
    """Where one measuring run keeps its capture and key log, and the CPU its servers get."""

    tmp: Path
    pcap: Path
    keylog: Path
    server_cpu: int | None


@contextlib.contextmanager
def workdir(ns: argparse.Namespace) -> Iterator[Workdir]:
    """A temp dir for the capture and key log (SSLKEYLOGFILE set for both tools); with
    --pin, this process (and the curl it starts) on CPU 0, the servers on CPU 1. Copies
    the two files to --keep at the end."""
    server_cpu = None
    if ns.pin:
        os.sched_setaffinity(0, {0})  # curl, started from here, inherits it
        server_cpu = 1
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o755)  # dumpcap may drop to another user to write the file
        work = Workdir(tmp, tmp / "lo.pcapng", tmp / "keys.log", server_cpu)
        # ssl.create_default_context() reads it, as curl does.
        os.environ["SSLKEYLOGFILE"] = str(work.keylog)
        yield work
        if ns.keep is not None:
            ns.keep.mkdir(parents=True, exist_ok=True)
            for path in (work.pcap, work.keylog):
                shutil.copy(path, ns.keep / path.name)


def measure(ns: argparse.Namespace, site: Site) -> None:
    with workdir(ns) as work:
        tmp, pcap, keylog, server_cpu = work.tmp, work.pcap, work.keylog, work.server_cpu
        curl_env = {k: v for k, v in os.environ.items() if k not in _PROXY_ENV}
        measured: list[Measured] = []
        with (
            reference_server(tmp / "plain", tls=False, cpu=server_cpu, site=site) as plain,
            reference_server(tmp / "tls", tls=True, cpu=server_cpu, site=site) as secure,
        ):
            with capture(pcap, [plain.port, secure.port], site.interface):
                for server in (plain, secure):
                    # First use loads code and warms caches in both tools: not measured.
                    run_promptpath(server)
                    run_curl(server, curl_env)
                    for _ in range(ns.runs):
                        measured.append(run_promptpath(server))
                        measured.append(run_curl(server, curl_env))
            flows = read_flows(pcap, keylog, {plain.port, secure.port})
    report(measured, flows)


def measure_proxy(ns: argparse.Namespace) -> None:
    """Both servers through one squid: the capture holds the client <-> proxy flows (read)
    and the proxy <-> origin ones (kept for --keep, not read)."""
    from proxy_capture import read_proxy_flows

    from tests.helpers.fwdproxy import squid

    with workdir(ns) as work:
        tmp, pcap, keylog, server_cpu = work.tmp, work.pcap, work.keylog, work.server_cpu
        curl_env = {k: v for k, v in os.environ.items() if k.lower() not in _NO_PROXY_ENV}
        measured: list[Measured] = []
        load_before = loadavg()
        with (
            reference_server(tmp / "plain", tls=False, cpu=server_cpu) as plain,
            reference_server(tmp / "tls", tls=True, cpu=server_cpu) as secure,
            squid() as proxy,
        ):
            if server_cpu is not None and proxy.process is not None:
                # squid -N is one process (no workers, no helpers in this config).
                os.sched_setaffinity(proxy.process.pid, {server_cpu})
            with capture(pcap, [proxy.port, plain.port, secure.port]):
                for server in (plain, secure):
                    run_promptpath(server, proxy)  # warm-up, as in measure()
                    run_curl(server, curl_env, proxy)
                    for _ in range(ns.runs):
                        measured.append(run_promptpath(server, proxy))
                        measured.append(run_curl(server, curl_env, proxy))
            flows = read_proxy_flows(pcap, keylog, proxy.port)
    print(
        f"through squid, {ns.runs} requests per tool and target, HTTP/{ns.http} over TLS,"
        f"{' pinned,' if ns.pin else ''} load average {load_before} -> {loadavg()}"
    )
    report(measured, flows, PROXY_STAGES, via=" via squid")


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def measure_dns(runs: int) -> None:
    import dns_capture

    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o755)  # dumpcap may drop to another user to write the file
        pcap = tmp / "dns.pcapng"
        with reference_server(tmp / "plain", tls=False) as plain:
            bpf = f"udp port 53 and host {dns_capture.RESOLVER}"
            dns_capture.measure(runs, tmp, plain.port, capture(pcap, [], bpf=bpf))


if __name__ == "__main__":
    main()
