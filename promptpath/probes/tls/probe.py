"""The ``tls`` probe: certificate expiry, protocol version, chain and host name.

Expiry, name and version come from the trace's own TLS details (TCP or QUIC; a refused
certificate is kept by the trace's second handshake). What the trace cannot show, one
looking-only handshake (``net.tlspeek``: no request, no key) adds: the highest version the
server agrees to when TLS 1.0 and 1.1 are allowed too, and the chain exactly as sent,
checked against the same trust store the trace used (--cacert, else the system's).
Through a forward proxy that handshake is not made (the path to the origin is the
proxy's): the chain is then not checked, and the finding says so.
"""

from __future__ import annotations

import functools
import ssl

import anyio

from promptpath.core.errors import PromptpathError
from promptpath.core.findings import Finding, Verdict
from promptpath.core.timeline import CertInfo
from promptpath.net import dns
from promptpath.net.tlsinfo import cert_info
from promptpath.net.tlspeek import Peek, peek_tls
from promptpath.probes.base import Cost, Probe, ProbeContext, register
from promptpath.probes.settings import ProbeSettings
from promptpath.probes.tls.verdict import (
    PROBE,
    Facts,
    judge,
)

#: The looking-only handshake, name resolution included.
PEEK_TIMEOUT_S = 5.0


def thresholds(settings: ProbeSettings) -> tuple[int, int]:
    """(warn, fail) days before expiry: --tls-warn-days, --tls-fail-days."""
    return settings.tls.warn_days, settings.tls.fail_days


def trusted_subjects(cacert: str | None) -> frozenset[str]:
    """RFC 4514 subjects of the roots the trace trusted (--cacert, else the system store).

    Roots only (self-issued): an intermediate that happens to be in the file (a
    fullchain bundle given as --cacert) would complete a chain the server sent short, and
    the clients that meet that server do not hold the file. The chain is judged as sent."""
    from cryptography import x509

    context = ssl.create_default_context(cafile=cacert)
    subjects = set()
    for der in context.get_ca_certs(binary_form=True):
        try:
            cert = x509.load_der_x509_certificate(der)
        except ValueError:
            continue
        if cert.subject == cert.issuer:
            subjects.add(cert.subject.rfc4514_string())
    return frozenset(subjects)


async def _address(ctx: ProbeContext) -> tuple[str, int] | None:
    """Where the trace connected (or tried to), else the host resolved afresh."""
    opts = ctx.options
    host, port = opts.target.host, opts.target.port
    tl = ctx.result.timeline if ctx.result is not None else None
    if tl is not None and tl.address is not None:
        return tl.address
    rule = opts.connect_to_for(host, port)
    dial_host, dial_port = (host, port) if rule is None else rule.destination(host, port)
    if tl is not None and tl.attempts:
        return tl.attempts[-1].ip, dial_port
    try:
        answer = await dns.resolve(
            dial_host,
            dial_port,
            family=opts.family,
            override=opts.resolve_override(dial_host, dial_port),
            resolver=opts.resolver,
            timeout=PEEK_TIMEOUT_S,
        )
    except PromptpathError:
        return None
    return (answer.addresses[0][0], dial_port) if answer.addresses else None


@register
class TLSProbe(Probe):
    name = PROBE
    description = "certificate expiry, TLS version, chain and name (one handshake, no request)"

    def cost(self, ctx: ProbeContext) -> Cost:
        return Cost(seconds=PEEK_TIMEOUT_S)

    async def run(self, ctx: ProbeContext) -> Finding:
        opts = ctx.options
        if opts.target.scheme != "https":
            return Finding(
                probe=PROBE, verdict=Verdict.SKIP, summary="plain http:// target: no TLS to judge"
            )
        warn_days, fail_days = thresholds(ctx.settings)
        tls = ctx.result.timeline.tls if ctx.result is not None else None
        peek, note = Peek(), None
        if opts.proxy is not None:
            note = f"not checked: the origin is reached through the proxy {opts.proxy.url}"
        else:
            address = await _address(ctx)
            if address is None:
                note = f"not checked: no address for {opts.target.host}"
            else:
                ctx.progress(f"tls: one handshake with {address[0]}:{address[1]}, no request")
                look = functools.partial(
                    peek_tls, address[0], address[1], opts.target.host, timeout=PEEK_TIMEOUT_S
                )
                peek = await anyio.to_thread.run_sync(look)
                note = None if peek.error is None else f"not checked: {peek.error}"
        chain = [c for c in map(cert_info, peek.chain) if c is not None]
        trusted = await anyio.to_thread.run_sync(trusted_subjects, opts.cacert)
        cert: CertInfo | None = tls.cert if tls is not None and tls.cert is not None else None
        if cert is None and chain:
            cert = chain[0]
        from_trace = tls is not None and tls.version is not None
        facts = Facts(
            host=opts.target.host,
            version=tls.version if from_trace and tls is not None else peek.version,
            version_source="trace" if from_trace else "handshake",
            cert=cert,
            verified=None if tls is None else tls.verified,
            verify_error=None if tls is None else tls.verify_error,
            chain=chain or None,
            trusted_subjects=trusted,
            chain_note=note,
        )
        return judge(facts, warn_days=warn_days, fail_days=fail_days)
