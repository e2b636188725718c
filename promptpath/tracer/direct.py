"""Through a proxy: is the certificate we were shown the one the origin shows everyone?

After a proxied trace over https, one TLS handshake goes straight to the origin (its
name resolved as for a direct run; no request, no key, no prompt; certificate not
verified, only read) and its issuer is compared with the one seen through the proxy
(``net.interception.judge``). Where the network allows no direct connection, nothing is
concluded from the silence. Bounded by DIRECT_TIMEOUT_S, and off the trace's clock.
"""

from __future__ import annotations

import ssl

import anyio

from promptpath.core.errors import PromptpathError
from promptpath.core.timeline import CertInfo
from promptpath.net import dns
from promptpath.net.http import TCPTransport
from promptpath.net.interception import judge
from promptpath.net.tlsinfo import cert_info
from promptpath.net.transport import ConnectSpec, Recorder
from promptpath.options import RunOptions
from promptpath.result import TraceResult
from promptpath.tracer.orchestrator import new_timeline

#: Longest the direct handshake may take (it only adds evidence).
DIRECT_TIMEOUT_S = 3.0


async def direct_certificate(options: RunOptions) -> CertInfo | None:
    """The origin's certificate from a direct TLS handshake, or None when none completes."""
    host, port = options.target.host, options.target.port
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # read the certificate, whoever issued it
    recorder = Recorder(new_timeline())
    try:
        with anyio.fail_after(DIRECT_TIMEOUT_S):
            answer = await dns.resolve(
                host,
                port,
                family=options.family,
                override=options.resolve_override(host, port),
                resolver=options.resolver,
                timeout=DIRECT_TIMEOUT_S,
            )
            spec = ConnectSpec(
                host=host,
                port=port,
                scheme="https",
                addresses=answer.addresses,
                alpn=("http/1.1",),
                ssl_context=context,
            )
            stream = await TCPTransport().open_stream(spec, recorder)
            await stream.aclose()
    except (PromptpathError, TimeoutError, OSError):
        return None
    tls = recorder.timeline.tls
    return None if tls is None or tls.cert_der is None else cert_info(tls.cert_der)


async def compare_with_direct(result: TraceResult) -> None:
    """Judge interception again with a direct handshake's certificate, after a proxied
    https trace that got as far as a certificate."""
    options = result.options
    tls = result.timeline.tls
    if options.proxy is None or tls is None or tls.cert is None:
        return
    direct = await direct_certificate(options)
    if direct is not None:
        tls.intercepted = judge(tls.cert, direct=direct)
