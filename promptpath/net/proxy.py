"""Through a forward proxy: ``CONNECT host:port``, timed from request to the proxy's answer.

The ``tunnel`` stage runs from the start of the send that carries the CONNECT (building
it in httpcore's HTTP/1.1 code is not the proxy's time: 0.1 ms of a 0.14 ms tunnel through
a loopback squid, against a capture, before it was left out) to the kernel's receive stamp
of the read that completed the proxy's answer.

The CONNECT exchange runs on httpcore's own HTTP/1.1 connection class over our stamped
stream (public API: a 2xx answer to CONNECT hands the stream back as the response's
``network_stream``), so the origin's TLS then starts inside the tunnel on the same
stamped socket. The proxy's answer is kept on ``Timeline.proxy``; a refusal is an error
that names the proxy, never the origin. The ``Proxy-Authorization`` value is sent to the
proxy only and kept nowhere.
"""

from __future__ import annotations

import time

import httpcore

from promptpath.core.errors import ConnectError, HTTPStatusError, http_status_kind
from promptpath.core.timeline import Stage
from promptpath.net.backend import TracedNetworkStream
from promptpath.net.transport import ConnectSpec, ProxyHop, Recorder

#: Response headers of the proxy worth keeping (they name the product and its hops).
KEPT_HEADERS = ("via", "proxy-agent", "server", "x-cache", "x-squid-error", "proxy-status")


async def open_tunnel(
    stream: TracedNetworkStream, spec: ConnectSpec, hop: ProxyHop, recorder: Recorder
) -> None:
    """The ``tunnel`` stage: CONNECT to the origin through ``hop``; raises on refusal."""
    timeline = recorder.timeline
    target = spec.host_port
    headers = [("Host", target)]
    if hop.authorization is not None:
        headers.append(("Proxy-Authorization", hop.authorization))
    request = httpcore.Request(
        b"CONNECT",
        httpcore.URL(
            scheme=hop.scheme.encode(), host=hop.host.encode(), port=hop.port, target=target
        ),
        headers=headers,
    )
    origin = httpcore.Origin(hop.scheme.encode(), hop.host.encode(), hop.port)
    conn = httpcore.AsyncHTTP11Connection(origin=origin, stream=stream)
    stage = timeline.begin("tunnel", time.perf_counter_ns(), target=target)
    stream.raw.expect_send()
    try:
        response = await conn.handle_async_request(request)
    except (httpcore.ProtocolError, httpcore.NetworkError, OSError) as exc:
        timeline.end("tunnel", time.perf_counter_ns(), ok=False)
        await stream.aclose()
        raise ConnectError(
            f"the proxy {hop.url} closed the connection instead of answering CONNECT {target}"
            f" ({exc or type(exc).__name__})",
            stage="tunnel",
            kind="proxy_closed",
            proxy=hop.url,
        ) from exc
    finally:  # answered, refused, closed, or cut by the run's deadline
        _start_at_send(stage, stream)
    # The answer's stamp is the read that completed its head, not this moment.
    answered = recorder.last_read_ns or time.perf_counter_ns()
    reason = response.extensions.get("reason_phrase", b"")
    info = timeline.proxy
    if info is not None:
        info.tunnel = True
        info.status = response.status
        info.reason = reason.decode("latin-1") if isinstance(reason, bytes) else str(reason)
        info.headers = [
            (k.decode("latin-1").lower(), v.decode("latin-1"))
            for k, v in response.headers
            if k.decode("latin-1").lower() in KEPT_HEADERS
        ]
    if 200 <= response.status < 300:
        timeline.end("tunnel", answered)
        timeline.mark("connected", answered)
        return
    timeline.end("tunnel", answered, ok=False)
    await response.aclose()
    await stream.aclose()  # no tunnel: nothing else will use (or close) this connection
    raise _refusal(response.status, hop, target)


def _start_at_send(stage: Stage, stream: TracedNetworkStream) -> None:
    """The stage starts where the CONNECT's send began (a stage cut before anything was
    sent keeps its own start)."""
    sent = stream.raw.first_send_ns
    if sent is not None:
        stage.start_ns = sent


def _refusal(status: int, hop: ProxyHop, target: str) -> HTTPStatusError:
    if status == 407:
        how = (
            "the credentials were refused"
            if hop.authorization is not None
            else "give credentials in the proxy URL (http://USER:PASS@host:port) or --proxy-user"
        )
        return HTTPStatusError(
            f"the proxy {hop.url} requires authentication (407): {how}",
            stage="tunnel",
            kind="proxy_auth_required",
            status=status,
            proxy=hop.url,
        )
    if status == 403:
        return HTTPStatusError(
            f"the proxy {hop.url} refused CONNECT {target} (403): its access rules deny this"
            " destination or port",
            stage="tunnel",
            kind="proxy_denied",
            status=status,
            proxy=hop.url,
        )
    return HTTPStatusError(
        f"the proxy {hop.url} answered CONNECT {target} with {status}: no tunnel",
        stage="tunnel",
        kind="proxy_denied" if 400 <= status < 500 else http_status_kind(status),
        status=status,
        proxy=hop.url,
    )


__all__ = ["KEPT_HEADERS", "open_tunnel"]
