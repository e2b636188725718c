"""The proxy stages against a capture of the client <-> proxy flows (`bench_capture.py --proxy`).

Only the flows with the proxy's port at one end are read: each is one request of one tool,
found by its client port. What each stage is on the wire (capture clock, s):

- proxy_connect: the client's SYN -> the proxy's SYN/ACK;
- tunnel: the frame carrying ``CONNECT host:port`` -> the frame of the proxy's answer;
- tls: the origin's ClientHello (inside the tunnel) -> the client's Finished;
- setup: the client's SYN -> its Finished, the three stages in one, which is what curl 7.88
  has a figure for (``time_appconnect - time_namelookup``): it prints no CONNECT time of its
  own, and its ``time_appconnect - time_connect`` would start from the end of the TCP
  connect, which both tools stamp late by the ``connect()`` syscall's own return;
- request: the client's Finished -> the last frame carrying the request;
- wait: the last frame carrying the request -> the first frame of the response's head.

A plain-http target goes in absolute form (``POST http://host:port/path``): there are only
proxy_connect and wait.

tshark decodes the tunnel when told the proxy's port speaks HTTP (``-d tcp.port==P,http``;
checked by hand with tshark 4.0.17 and squid 5.7: the CONNECT, squid's ``200 Connection
established``, then the TLS records inside, decrypted with the key log as without a proxy,
and the inner HTTP/1.1 request and response).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: The tshark fields read, in this order.
FIELDS = (
    "frame.time_relative",
    "tcp.srcport",
    "tcp.dstport",
    "tcp.flags.syn",
    "tcp.flags.ack",
    "tcp.len",
    "http.request.method",
    "http.response",
    "tls.handshake.type",
    "http2.type",
)


@dataclass(slots=True)
class ProxyFlow:
    """One client <-> proxy connection: times (s, capture clock) of the frames we need."""

    syn: float | None = None
    synack: float | None = None
    connect_sent: float | None = None  # the CONNECT request's frame
    connect_answered: float | None = None  # the proxy's answer to it
    hello: float | None = None
    client_finished: float | None = None
    response: float | None = None
    request_frames: list[float] = field(default_factory=list)
    syns: int = 0

    def ms(self) -> dict[str, float]:
        out: dict[str, float] = {}
        if self.syn is not None and self.synack is not None:
            out["proxy_connect"] = (self.synack - self.syn) * 1e3
        if self.connect_sent is not None and self.connect_answered is not None:
            out["tunnel"] = (self.connect_answered - self.connect_sent) * 1e3
        finished = self.client_finished
        if self.hello is not None and finished is not None:
            out["tls"] = (finished - self.hello) * 1e3
            if self.syn is not None:
                out["setup"] = (finished - self.syn) * 1e3
        if self.response is not None:
            response = self.response
            sent = [t for t in self.request_frames if t < response]
            if sent:
                out["wait"] = (response - sent[-1]) * 1e3
                if finished is not None:
                    out["request"] = (sent[-1] - finished) * 1e3
        return out


def _flag(value: str) -> bool:
    return value in ("1", "True")


def flows_from_rows(rows: Iterable[list[str]], proxy_port: int) -> dict[tuple[int, int], ProxyFlow]:
    """Rows of ``FIELDS`` (tshark's text) -> the flows to ``proxy_port``, keyed (client port,
    proxy port) as the tools' own records are."""
    flows: dict[tuple[int, int], ProxyFlow] = {}
    for row in rows:
        t_s, src, dst, syn, ack, length, method, response, hs_types, h2_types = row
        if proxy_port not in (int(src), int(dst)):
            continue  # the proxy's own connections to the origins
        t = float(t_s)
        from_client = int(dst) == proxy_port
        flow = flows.setdefault((int(src if from_client else dst), proxy_port), ProxyFlow())
        handshake = set(hs_types.split(",")) if hs_types else set()
        frames = set(h2_types.split(",")) if h2_types else set()
        if from_client:
            payload = int(length or 0) > 0
            _client_frame(flow, t, _flag(syn), _flag(ack), payload, method, handshake, frames)
        elif _flag(syn) and _flag(ack):
            flow.synack = flow.synack if flow.synack is not None else t
        elif response or "1" in frames:
            if flow.connect_sent is not None and flow.connect_answered is None:
                flow.connect_answered = t  # the tunnel's answer comes before any TLS
            elif flow.response is None and (flow.connect_sent is None or flow.client_finished):
                flow.response = t
    return flows


def _client_frame(
    flow: ProxyFlow,
    t: float,
    syn: bool,
    ack: bool,
    payload: bool,
    method: str,
    handshake: set[str],
    frames: set[str],
) -> None:
    if syn and not ack:
        flow.syns += 1
        flow.syn = flow.syn if flow.syn is not None else t
        return
    if not payload:
        return
    if method == "CONNECT":
        flow.connect_sent = flow.connect_sent if flow.connect_sent is not None else t
        return
    if "1" in handshake and flow.hello is None:
        flow.hello = t
    if "20" in handshake and flow.client_finished is None:
        flow.client_finished = t
    if flow.connect_sent is None:
        flow.request_frames.append(t)  # absolute form: every client byte is the request
        return
    # Inside the tunnel: HTTP/2 HEADERS (1) or DATA (0), not SETTINGS or their ACKs;
    # HTTP/1.1, any record after the client's Finished that is not handshake.
    after_handshake = flow.client_finished is not None and t > flow.client_finished
    if after_handshake and (frames & {"0", "1"} or (not frames and not handshake)):
        flow.request_frames.append(t)


def read_proxy_flows(pcap: Path, keylog: Path, proxy_port: int) -> dict[tuple[int, int], ProxyFlow]:
    cmd = ["tshark", "-r", str(pcap), "-o", f"tls.keylog_file:{keylog}"]
    # The proxy's port speaks HTTP (CONNECT, then TLS inside the tunnel); the response's
    # frame is the one with its head, not the end of its body.
    cmd += ["-d", f"tcp.port=={proxy_port},http", "-o", "http.desegment_body:FALSE"]
    cmd += ["-T", "fields", "-E", "separator=\t"]
    for name in FIELDS:
        cmd += ["-e", name]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return flows_from_rows((line.split("\t") for line in out.splitlines()), proxy_port)


__all__ = ["FIELDS", "ProxyFlow", "flows_from_rows", "read_proxy_flows"]
