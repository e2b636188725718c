"""The ``path`` probe: the network path below HTTP, hop by hop, toward the address and port
the trace connected to (``net.pathtrace``: TCP SYNs with rising TTL, and for an HTTP/3
trace a 1200-byte UDP datagram per TTL as well), read by ``path.verdict``.

It sends no request and no key: a few SYNs (each destination answer is closed with a
reset) and datagrams QUIC servers answer with version negotiation. No capability is
needed on Linux; elsewhere it skips and says why. With --path-names, and only then, it
looks up the responders' reverse names (``net.ptr``) the way the trace resolved its own.
"""

from __future__ import annotations

import dataclasses
import functools
import socket
import time

import anyio

from promptpath.core.findings import Finding, Verdict
from promptpath.options import RunOptions
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.mtu.probe import MTUProbe, mtu_finding
from promptpath.probes.path.hops import Sample, samples_of
from promptpath.probes.path.verdict import PROBE, Listening, judge, skipped

ROUNDS = 3  # probes per hop, as mtr's and tcptraceroute's defaults
MAX_TTL = 15
PROBE_TIMEOUT_S = 1.0
#: --path-names: every reverse lookup within this, for at most this many addresses.
NAMES_BUDGET_S = 2.0
MAX_NAMES = 32


@register
class PathProbe(Probe):
    name = PROBE
    description = "the network path below HTTP, hop by hop (TCP, and UDP for HTTP/3)"

    def cost(self, ctx: ProbeContext) -> Cost:
        # Each round waits at most one probe timeout past its last send; two protocols.
        seconds = 2 * ROUNDS * (PROBE_TIMEOUT_S + MAX_TTL * 0.005) + 1
        if _tls_stalled(ctx):
            seconds += MTUProbe().cost(ctx).seconds
        if not ctx.settings.path.names:
            return Cost(seconds=seconds)
        from promptpath.net.ptr import QUERIES_PER_NAME

        return Cost(seconds=seconds + NAMES_BUDGET_S, dns_queries=QUERIES_PER_NAME * MAX_NAMES)

    async def run(self, ctx: ProbeContext) -> Finding:
        from promptpath.net.pathtrace import PathUnsupported, trace_path

        result = ctx.result
        timeline = None if result is None else result.timeline
        if timeline is None:
            return skipped("no trace ran, so there is no address to trace toward")
        if ctx.options.proxy is not None:
            return skipped("the trace went through a forward proxy: its path ends at the proxy")
        # The address the trace used, or, when it never connected, the one it tried last:
        # a handshake that never completes is when the path matters most.
        if timeline.address is not None:
            ip, port = timeline.address[0], timeline.address[1]
        elif timeline.attempts:
            ip, port = timeline.attempts[-1].ip, timeline.attempts[-1].port
        else:
            return skipped("the trace never reached an address (name resolution failed?)")
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        h3 = timeline.http_version == "HTTP/3" or timeline.stage("quic_handshake") is not None
        ctx.progress(
            f"path: {ROUNDS} TCP SYNs per hop toward {ip} port {port}"
            + (" (and 1200-byte UDP datagrams, for HTTP/3)" if h3 else "")
        )
        start = time.perf_counter()
        run = functools.partial(
            trace_path,
            (ip, port),
            family,
            rounds=ROUNDS,
            max_ttl=MAX_TTL,
            timeout_s=PROBE_TIMEOUT_S,
        )
        try:
            tcp = await anyio.to_thread.run_sync(functools.partial(run, protocol="tcp"))
            udp = (
                await anyio.to_thread.run_sync(functools.partial(run, protocol="udp"))
                if h3
                else None
            )
        except PathUnsupported as exc:
            return skipped(str(exc))
        connect = next(
            (s for s in timeline.stages if s.name == "connect" and s.end_ns is not None), None
        )
        connect_ms = (
            None
            if connect is None or connect.end_ns is None
            else round((connect.end_ns - connect.start_ns) / 1e6, 3)
        )
        tcp_samples = samples_of(tcp.replies)
        udp_samples = None if udp is None else samples_of(udp.replies)
        looked_up = None
        if ctx.settings.path.names:
            looked_up = await _names(ctx, [*tcp_samples, *(udp_samples or [])])
        finding = judge(
            destination=ip,
            port=port,
            tcp=tcp_samples,
            udp=udp_samples,
            connect_ms=connect_ms,
            elapsed_s=time.perf_counter() - start,
            names=None if looked_up is None else looked_up.names,
            listening=Listening(
                reason=tcp.raw_reason,
                heard=sum(r.raw for r in [*tcp.replies, *(udp.replies if udp else [])]),
                out_of_window=tcp.out_of_window,
            ),
        )
        if looked_up is not None:
            finding = dataclasses.replace(
                finding, evidence=dict(finding.evidence, names=looked_up.evidence)
            )
        if _tls_stalled(ctx):
            return with_mtu(finding, await mtu_finding(ctx))
        return finding


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Names:
    names: dict[str, str | None]  # address -> reverse name
    evidence: dict[str, object]


def pins_of(options: RunOptions) -> dict[str, str]:
    """Address -> name, from the --resolve pins (the first pin of an address wins)."""
    pins: dict[str, str] = {}
    for host, _port, address in options.resolve:
        pins.setdefault(address.strip("[]"), host)
    return pins


async def _names(ctx: ProbeContext, samples: list[Sample]) -> _Names:
    """The responders' reverse names, by the trace's own resolver rules, within the budget."""
    from promptpath.net.ptr import reverse_names

    addresses = list(dict.fromkeys(s.responder for s in samples if s.responder))[:MAX_NAMES]
    resolver = ctx.options.resolver
    ctx.progress(
        f"path: reverse names of {len(addresses)} address(es)"
        f" ({'resolver ' + resolver if resolver else 'the system resolver'})"
    )
    start = time.perf_counter()
    answers = await reverse_names(
        addresses, pins=pins_of(ctx.options), resolver=resolver, budget_s=NAMES_BUDGET_S
    )
    return _Names(
        names={a.address: a.name for a in answers},
        evidence={
            "elapsed_ms": round((time.perf_counter() - start) * 1000, 3),
            "answers": [
                {"address": a.address, "name": a.name, "source": a.source, "error": a.error}
                for a in answers
            ],
        },
    )


def _tls_stalled(ctx: ProbeContext) -> bool:
    """The trace timed out in TLS: after our small ClientHello the server's flight never
    came, which is how a path-MTU black hole looks from here."""
    error = None if ctx.result is None else ctx.result.timeline.error
    return error is not None and error.stage == "tls" and "timeout" in error.kind


def with_mtu(path: Finding, mtu: Finding) -> Finding:
    """The path finding with the MTU check's result in it; a black hole fails it."""
    evidence = dict(path.evidence, mtu={"verdict": mtu.verdict.value, **mtu.evidence})
    verdict = Verdict.FAIL if mtu.verdict is Verdict.FAIL else path.verdict
    return dataclasses.replace(
        path,
        verdict=verdict,
        summary=f"{path.summary}; {mtu.summary}",
        evidence=evidence,
        advice=[*path.advice, *mtu.advice],
    )
