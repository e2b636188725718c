"""quic_handshake against a decrypted packet capture on loopback.

    .venv/bin/python benchmarks/bench_quic_capture.py [--runs 60] [--ttft-ms 0] [--keep DIR]

Needs root (or CAP_NET_RAW) for dumpcap, and tshark. Starts the reference endpoint with
HTTP/3 (`python -m promptpath.server --http3` on 127.0.0.1), captures `lo` filtered on its
UDP port, and traces `--runs` requests over HTTP/3 in this process, each on its own QUIC
connection, matched to its flow by the client's UDP port (the connect attempt keeps it).
promptpath writes its key log (SSLKEYLOGFILE, passed as the CLI's environment would) and
tshark decrypts the Handshake packets with it to find the client's Finished.

For each connection, error = promptpath's `quic_handshake` - the capture's span from the
client's first Initial to the datagram carrying the client's Finished (durations only: the
clocks differ). Also shown: the capture's span from the server's Finished to the client's
(the client's processing of the server's flight, inside the stage), `client_hello_ms`, the
span from the server's Finished to the request's first datagram, and in how many
connections that datagram is the one carrying the client's Finished (the request coalesced
into its 1-RTT packet, issue 25).

TTFB and TTFT from the request (issue 25): promptpath's `ttfb - request_sent` and
`ttft - request_sent` against the capture's request datagram (the first client datagram
with a frame on stream 0) -> the first server datagram carrying an HTTP/3 HEADERS frame,
and -> the server datagram whose DATA completed the first SSE event with content (the
reference endpoint's first chunk is a role chunk with `"content": ""`: not a token).
tshark 4.0 dissects HTTP/3 frames once QUIC is decrypted (`http3.frame_type`,
`http3.frame_length`, `http3.frame_payload`, the payload absent for an empty frame);
HEADERS (1) and DATA (0) frames travel only on request streams, and each connection
carries one request, so the server's frames of those two types are the response's.
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from promptpath.cli.commands import RunArgs, build_options  # noqa: E402
from promptpath.core.stats import percentile  # noqa: E402
from promptpath.tracer.orchestrator import trace  # noqa: E402

TARGET_MEDIAN_MS = 0.2
#: The reference endpoint's controls; the first token's delay is --ttft-ms.
SERVER_HEADERS = ["x-promptpath-tokens: 3", "x-promptpath-rate: 0"]
#: TLS handshake message types (RFC 8446 §4) and QUIC's long-header Initial type.
FINISHED = "20"
INITIAL = "0"


@dataclass(frozen=True, slots=True)
class Measured:
    client_port: int
    handshake_ms: float
    client_hello_ms: float
    server_flight_ms: float | None  # None before the figure existed (a "before" checkout)
    ttfb_ms: float  # ttfb - request_sent
    ttft_ms: float  # ttft - request_sent


@dataclass(slots=True)
class Flow:
    """One QUIC connection in the capture (times in s on the capture's clock)."""

    first_initial: float | None = None
    server_finished: float | None = None
    client_finished: float | None = None
    request: float | None = None  # the first datagram carrying the request
    #: The request's first frame rode in the datagram carrying the client's Finished.
    request_with_finished: bool = False
    headers: float | None = None  # the first server datagram carrying HTTP/3 HEADERS
    first_token: float | None = None  # the server datagram completing the first content event
    sse: bytes = b""  # the response's DATA so far, up to the first content event


#: HTTP/3 frame types (RFC 9114 section 7.2).
H3_DATA, H3_HEADERS = "0", "1"


def first_content_event(sse: bytes) -> bool:
    """Whether the SSE text ``sse`` holds a complete event whose chunk carries content
    (text, reasoning or a tool call), read here with json alone, not promptpath's decoder."""
    text = sse.replace(b"\r\n", b"\n").replace(b"\r", b"\n").decode("utf-8", "replace")
    for event in text.split("\n\n")[:-1]:  # the last piece is not complete yet
        for line in event.split("\n"):
            if not line.startswith("data:"):
                continue
            try:
                chunk = json.loads(line[5:])
            except ValueError:
                continue  # [DONE]
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                if (
                    delta.get("content")
                    or delta.get("reasoning_content")
                    or delta.get("tool_calls")
                ):
                    return True
    return False


def h3_frames(types: str, lengths: str, payloads: str) -> list[tuple[str, bytes]]:
    """A datagram's HTTP/3 frames as (type, payload) from tshark's fields: a payload is
    listed only for a frame whose length is not 0, so they are matched up by length."""
    if not types:
        return []
    pending = iter(payloads.split(",") if payloads else [])
    frames = []
    for ftype, length in zip(types.split(","), lengths.split(","), strict=True):
        payload = bytes.fromhex(next(pending).replace(":", "")) if int(length) else b""
        frames.append((ftype, payload))
    return frames


@contextlib.contextmanager
def h3_server(tmp: Path) -> Iterator[tuple[int, str]]:
    args = [sys.executable, "-m", "promptpath.server", "--host", "127.0.0.1", "--port", "0"]
    args += ["--self-signed", str(tmp / "certs"), "--http3"]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        yield int(info["port"]), str(info["ca"])
    finally:
        proc.terminate()
        proc.wait(5)


@contextlib.contextmanager
def capture(path: Path, port: int) -> Iterator[None]:
    """dumpcap on lo, UDP to and from ``port``, from before the first request."""
    proc = subprocess.Popen(
        ["dumpcap", "-q", "-i", "lo", "-f", f"udp port {port}", "-w", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # dumpcap names its file once the interface is capturing
        if line.startswith("File:"):
            break
    else:
        raise RuntimeError(f"dumpcap exited with status {proc.wait()}")
    try:
        yield
    finally:
        time.sleep(1.0)  # let libpcap's last block retire (see bench_capture.py)
        proc.send_signal(signal.SIGINT)
        proc.wait(10)


def run_promptpath(port: int, ca: str, keylog: Path, ttft_ms: float = 0.0) -> Measured:
    args = RunArgs(
        target=f"https://localhost:{port}/v1/chat/completions",
        cacert=ca,
        http="3",
        resolve=[f"localhost:{port}:127.0.0.1"],
        family=socket.AF_INET,
        max_tokens=3,
        headers=[*SERVER_HEADERS, f"x-promptpath-ttft-ms: {ttft_ms:g}"],
    )
    options = build_options(args, environ={"SSLKEYLOGFILE": str(keylog)})
    result = anyio.run(trace, options)
    assert result.exc is None, result.exc
    tl = result.timeline
    stage = tl.stage("quic_handshake")
    assert stage is not None and stage.duration_ns is not None
    local_port = tl.attempts[-1].local_port
    assert local_port is not None and tl.client_hello_ns is not None
    flight = getattr(tl, "server_flight_ns", None)
    ms = tl.milestones
    return Measured(
        client_port=local_port,
        handshake_ms=stage.duration_ns / 1e6,
        client_hello_ms=tl.client_hello_ns / 1e6,
        server_flight_ms=None if flight is None else flight / 1e6,
        ttfb_ms=(ms["ttfb"] - ms["request_sent"]) / 1e6,
        ttft_ms=(ms["ttft"] - ms["request_sent"]) / 1e6,
    )


def read_flows(pcap: Path, keylog: Path, server_port: int) -> dict[int, Flow]:
    fields = [
        "frame.time_relative",
        "udp.srcport",
        "udp.dstport",
        "quic.long.packet_type",
        "tls.handshake.type",
        "quic.stream.stream_id",
        "http3.frame_type",
        "http3.frame_length",
        "http3.frame_payload",
    ]
    cmd = ["tshark", "-r", str(pcap), "-o", f"tls.keylog_file:{keylog}", "-T", "fields"]
    cmd += ["-E", "separator=\t"]
    for name in fields:
        cmd += ["-e", name]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    flows: dict[int, Flow] = {}
    for line in out.splitlines():
        t_s, src, dst, packet_types, hs_types, stream_ids, *h3 = line.split("\t")
        t = float(t_s)
        from_client = int(dst) == server_port
        flow = flows.setdefault(int(src) if from_client else int(dst), Flow())
        hs = set(hs_types.split(",")) if hs_types else set()
        if from_client:
            if INITIAL in packet_types.split(",") and flow.first_initial is None:
                flow.first_initial = t
            finished_here = FINISHED in hs and flow.client_finished is None
            if finished_here:
                flow.client_finished = t
            # The request: the first client datagram with a frame on stream 0 (HTTP/3's
            # first request stream; the control and QPACK streams are unidirectional).
            if "0" in stream_ids.split(",") and flow.request is None:
                flow.request = t
                flow.request_with_finished = finished_here
        else:
            if FINISHED in hs and flow.server_finished is None:
                flow.server_finished = t
            server_datagram(flow, t, h3_frames(*h3))
    return flows


def server_datagram(flow: Flow, t: float, frames: list[tuple[str, bytes]]) -> None:
    """Note when the response's HEADERS and its first content event arrived."""
    for ftype, payload in frames:
        if ftype == H3_HEADERS and flow.headers is None:
            flow.headers = t
        elif ftype == H3_DATA and flow.first_token is None:
            flow.sse += payload
            if first_content_event(flow.sse):
                flow.first_token = t


#: The 1-minute load average when the traces began and when they ended, printed beside
#: every figure: the machine is shared and the figures move with it.
LOAD: list[float] = []


def stats(name: str, values: list[float]) -> str:
    load = "-".join(f"{x:.2f}" for x in LOAD)
    return (
        f"{name:<44} median {statistics.median(values):+7.3f} ms"
        f"   p99 {percentile(values, 99):+7.3f} ms   n={len(values)}   load {load}"
    )


def from_request(
    measured: list[Measured], flows: dict[int, Flow], what: str
) -> tuple[list[float], list[float]]:
    """The capture's request datagram -> ``what`` ("headers" or "first_token") of each
    connection, and promptpath's figure minus it (ms)."""
    wire, errors = [], []
    for m in measured:
        flow = flows.get(m.client_port)
        reply = None if flow is None else getattr(flow, what)
        if flow is None or flow.request is None or reply is None:
            continue
        span = (reply - flow.request) * 1e3
        wire.append(span)
        errors.append((m.ttfb_ms if what == "headers" else m.ttft_ms) - span)
    return wire, errors


def verdict(errors: list[float]) -> str:
    ok = abs(statistics.median(errors)) <= TARGET_MEDIAN_MS
    return "   target met" if ok else "   TARGET MISSED"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--keep", type=Path, help="copy the capture and key log here")
    parser.add_argument(
        "--ttft-ms", type=float, default=0.0, help="the endpoint's first-token delay (0)"
    )
    ns = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        os.chmod(tmp, 0o755)  # dumpcap may drop to another user to write the file
        keylog, pcap = tmp / "keys.log", tmp / "lo.pcapng"
        with h3_server(tmp) as (port, ca), capture(pcap, port):
            run_promptpath(port, ca, keylog)  # loads code, warms caches: not measured
            LOAD.append(os.getloadavg()[0])
            measured = [run_promptpath(port, ca, keylog, ns.ttft_ms) for _ in range(ns.runs)]
            LOAD.append(os.getloadavg()[0])
        flows = read_flows(pcap, keylog, port)
        if ns.keep is not None:
            ns.keep.mkdir(parents=True, exist_ok=True)
            for path in (pcap, keylog):
                shutil.copy(path, ns.keep / path.name)
    errors, wire, client_side = [], [], []
    for m in measured:
        flow = flows.get(m.client_port)
        if flow is None or flow.first_initial is None or flow.client_finished is None:
            continue
        span = (flow.client_finished - flow.first_initial) * 1e3
        wire.append(span)
        errors.append(m.handshake_ms - span)
        if flow.server_finished is not None:
            client_side.append((flow.client_finished - flow.server_finished) * 1e3)
    print(f"{len(measured) - len(errors)} connections without a decrypted flow: left out")
    print(stats("capture: first Initial -> client Finished", wire))
    print(stats("capture: server Finished -> client Finished", client_side))
    print(stats("client_hello_ms (outside the stage)", [m.client_hello_ms for m in measured]))
    flights = [m.server_flight_ms for m in measured if m.server_flight_ms is not None]
    if flights:
        print(stats("server_flight_ms (client CPU, in the stage)", flights))
    to_request = [
        (f.request - f.server_finished) * 1e3
        for f in (flows.get(m.client_port) for m in measured)
        if f is not None and f.request is not None and f.server_finished is not None
    ]
    if to_request:
        print(stats("capture: server Finished -> request datagram", to_request))
        coalesced = [
            f.request_with_finished
            for f in (flows.get(m.client_port) for m in measured)
            if f is not None and f.request is not None
        ]
        print(
            f"{'capture: request in the client Finished datagram':<44}"
            f" {sum(coalesced)} of {len(coalesced)} connections"
        )
    print(stats("quic_handshake error", errors) + verdict(errors))
    for what, name in (("headers", "ttfb"), ("first_token", "ttft")):
        wire, errs = from_request(measured, flows, what)
        if not errs:
            print(f"{name} from request: no connection with its datagrams in the capture")
            continue
        print(stats(f"capture: request datagram -> {name}", wire))
        print(stats(f"{name} from request error", errs) + verdict(errs))


if __name__ == "__main__":
    main()
