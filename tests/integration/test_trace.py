"""The traced request over real TCP and TLS on loopback, against the reference endpoint.

Timing assertions hold on a noisy 2-core machine: the lower bound is what the server
cannot beat (the injected delay), the upper bound leaves room for scheduling noise.
"""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptpath.cli.commands import RunArgs, build_options
from promptpath.core.analysis import compute
from promptpath.core.errors import (
    ConnectError,
    HTTPStatusError,
    StreamError,
    TLSError,
    TraceTimeout,
)
from promptpath.core.exitcodes import ExitCode
from promptpath.core.timeline import MILESTONES
from promptpath.options import RunOptions
from promptpath.tracer.orchestrator import trace
from tests.helpers.refserver import RefServer, reference_server

PATHS = {
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "ollama": "/api/chat",
}


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def opts(
    server: RefServer, provider: str = "openai", *, host: str = "localhost", **kw: object
) -> RunOptions:
    headers = kw.pop("headers", [])
    args = RunArgs(
        target=f"https://{host}:{server.port}{PATHS[provider]}",
        cacert=server.ca,
        family=kw.pop("family", socket.AF_INET),  # type: ignore[arg-type]
        timeout=kw.pop("timeout", 20.0),  # type: ignore[arg-type]
        headers=[f"{k}: {v}" for k, v in headers],  # type: ignore[attr-defined]
        **kw,  # type: ignore[arg-type]
    )
    return build_options(args, environ={})


@pytest.mark.parametrize("http", ["1.1", "2"])
async def test_ttft_follows_injected_first_token_delay(ref: RefServer, http: str) -> None:
    result = await trace(opts(ref, http=http, headers=[("x-promptpath-ttft-ms", "300")]))
    assert result.exc is None
    m = compute(result.timeline)
    assert m.ttft_from_request_ms is not None
    assert 295 <= m.ttft_from_request_ms <= 450, m.ttft_from_request_ms
    # TTFT from t0 adds the setup stages, which were measured separately.
    assert m.milestones_ms["ttft"] > m.ttft_from_request_ms
    assert m.milestones_ms["first_event"] < 150  # the role chunk goes out at once


@pytest.mark.parametrize("http", ["1.1", "2"])
async def test_median_gap_follows_injected_cadence(ref: RefServer, http: str) -> None:
    result = await trace(
        opts(
            ref,
            http=http,
            max_tokens=30,
            headers=[("x-promptpath-rate", "20"), ("x-promptpath-tokens", "30")],
        )
    )
    assert result.exc is None
    tok = compute(result.timeline).tokens
    assert tok.events == 30 and tok.count == 30 and tok.count_source == "usage"
    assert tok.gap_summary is not None
    assert 42 <= tok.gap_summary.p50 <= 62, tok.gap_summary
    assert tok.per_second is not None and 15 <= tok.per_second <= 22


async def test_pause_after_token_k_is_one_long_gap(ref: RefServer) -> None:
    result = await trace(
        opts(
            ref,
            max_tokens=12,
            headers=[
                ("x-promptpath-rate", "50"),
                ("x-promptpath-tokens", "12"),
                ("x-promptpath-pause-after", "5"),
                ("x-promptpath-pause-s", "1"),
            ],
        )
    )
    assert result.exc is None
    gaps = compute(result.timeline).tokens.gaps
    long = [g for g in gaps if g > 500]
    assert len(long) == 1 and 980 <= long[0] <= 1300, gaps
    assert gaps.index(long[0]) == 4  # between token 5 and token 6
    assert max(g for g in gaps if g is not long[0]) < 300


@pytest.mark.parametrize(
    ("http", "alpn", "version"), [("1.1", "http/1.1", "HTTP/1.1"), ("2", "h2", "HTTP/2")]
)
async def test_http_version_and_alpn_negotiated_as_asked(
    ref: RefServer, http: str, alpn: str, version: str
) -> None:
    result = await trace(opts(ref, http=http))
    tl = result.timeline
    assert result.exc is None
    assert tl.http_version == version
    assert tl.tls is not None and tl.tls.alpn == alpn
    assert tl.tls.alpn_offered == (("http/1.1", "h2") if http == "2" else ("http/1.1",))
    assert tl.tls.sni == "localhost" and tl.tls.verified is True
    assert tl.tls.version == "TLSv1.3"
    assert tl.tls.cert is not None and tl.tls.cert.days_left in (89, 90)
    assert "localhost" in tl.tls.cert.sans
    names = [s.name for s in tl.stages]
    assert names[:3] == ["dns", "connect", "tls"]
    assert all(s.end_ns is not None and s.end_ns >= s.start_ns for s in tl.stages)
    order = list(MILESTONES)
    stamps = [tl.milestones[n] for n in order]
    assert stamps == sorted(stamps)


async def test_ip_literal_sends_no_sni(ref: RefServer) -> None:
    result = await trace(opts(ref, host="127.0.0.1"))
    assert result.exc is None
    assert result.timeline.tls is not None and result.timeline.tls.sni is None
    assert result.timeline.stage("dns") is not None
    assert result.timeline.dns is not None and result.timeline.dns.resolver == "literal"


async def test_resolve_override_is_honoured_and_keeps_sni(ref: RefServer) -> None:
    o = opts(
        ref,
        host="api.promptpath.test",
        resolve=[f"api.promptpath.test:{ref.port}:127.0.0.1"],
        insecure=True,
    )
    result = await trace(o)
    assert result.exc is None, result.exc
    tl = result.timeline
    assert tl.address == ("127.0.0.1", ref.port)
    assert tl.dns is not None and tl.dns.resolver == "--resolve"
    assert tl.tls is not None and tl.tls.sni == "api.promptpath.test" and tl.tls.verified is None


async def test_warm_request_reuses_the_connection(ref: RefServer) -> None:
    result = await trace(opts(ref, warm=True, headers=[("x-promptpath-ttft-ms", "100")]))
    assert result.ok and result.warm is not None
    cold, warm = compute(result.timeline), compute(result.warm.timeline)
    assert result.warm.timeline.reused_connection
    assert not {"dns", "connect", "tls"} & set(warm.stages_ms)
    assert {"dns", "connect", "tls"} <= set(cold.stages_ms)
    # The warm request starts sending at once: no setup before it.
    assert warm.milestones_ms["request_sent"] < 20
    assert warm.ttft_from_request_ms is not None and 95 <= warm.ttft_from_request_ms <= 250


@pytest.mark.parametrize("provider", sorted(PATHS))
@pytest.mark.parametrize("http", ["1.1", "2"])
async def test_every_dialect_reports_tokens_and_end_marker(
    ref: RefServer, provider: str, http: str
) -> None:
    result = await trace(
        opts(ref, provider, http=http, max_tokens=10, headers=[("x-promptpath-rate", "200")])
    )
    assert result.exc is None, result.exc
    tl = result.timeline
    m = compute(tl)
    assert tl.stream_end == "marker"
    assert m.tokens.events == 10
    assert m.tokens.count == 10
    assert "ttft" in m.milestones_ms and "end" in m.milestones_ms
    # Every JSON event carried the server's send time (OpenAI's bare [DONE] cannot).
    sent = [e.server_sent_unix_ns for e in tl.events if e.kind == "content"]
    assert len(sent) == 10 and all(s is not None for s in sent)
    assert sent == sorted(sent)


async def test_openai_role_chunk_is_an_event_but_not_a_token(ref: RefServer) -> None:
    result = await trace(opts(ref, headers=[("x-promptpath-ttft-ms", "200")]))
    m = compute(result.timeline).milestones_ms
    assert m["ttft"] - m["first_event"] >= 150


# -- failures: each names its stage and maps to its exit code ----------------------------


async def test_truncated_stream_is_reported_as_truncated(ref: RefServer) -> None:
    for http in ("1.1", "2"):
        result = await trace(opts(ref, http=http, headers=[("x-promptpath-truncate-after", "3")]))
        assert isinstance(result.exc, StreamError), (http, result.exc)
        assert result.exc.kind == "truncated" and result.exc.exit_code == ExitCode.STREAM
        assert result.timeline.stream_end == "truncated"
        assert compute(result.timeline).tokens.events == 3


async def test_error_event_inside_a_200_stream(ref: RefServer) -> None:
    for provider in ("openai", "anthropic"):
        result = await trace(opts(ref, provider, headers=[("x-promptpath-error-after", "2")]))
        assert isinstance(result.exc, StreamError) and result.exc.kind == "error_event"
        assert result.timeline.status == 200 and result.timeline.stream_end == "error"
        assert result.exc.stage == "stream"


async def test_malformed_json_in_an_event(ref: RefServer) -> None:
    result = await trace(opts(ref, headers=[("x-promptpath-malformed-after", "2")]))
    assert isinstance(result.exc, StreamError) and result.exc.kind == "malformed_event"
    assert result.exc.exit_code == ExitCode.STREAM


@pytest.mark.parametrize("body", ["html", "json"])
async def test_200_without_an_event_stream(ref: RefServer, body: str) -> None:
    result = await trace(opts(ref, headers=[("x-promptpath-body", body)]))
    assert isinstance(result.exc, StreamError) and result.exc.kind == "not_event_stream"
    assert result.exc.stage == "response"


@pytest.mark.parametrize("status", [401, 429, 500, 503])
async def test_http_error_status(ref: RefServer, status: int) -> None:
    result = await trace(opts(ref, headers=[("x-promptpath-status", str(status))]))
    assert isinstance(result.exc, HTTPStatusError)
    assert result.exc.exit_code == ExitCode.HTTP_STATUS and result.exc.kind == f"http_{status}"
    assert result.exc.message.startswith(f"HTTP {status}")
    if status == 429:
        assert "Retry-After" in result.exc.message
    assert "ttfb" in result.timeline.milestones  # the partial timeline is kept


async def test_connection_refused(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connect is refused
        o = build_options(
            RunArgs(target=f"https://127.0.0.1:{port}/v1/messages", timeout=5), environ={}
        )
        result = await trace(o)
    assert isinstance(result.exc, ConnectError) and result.exc.kind == "refused"
    assert result.exc.exit_code == ExitCode.CONNECT
    assert result.timeline.attempts and result.timeline.attempts[0].error


async def test_unknown_ca(ref: RefServer) -> None:
    result = await trace(dataclasses.replace(opts(ref), cacert=None))
    assert isinstance(result.exc, TLSError) and result.exc.kind == "unknown_ca"
    assert "connected" in result.timeline.milestones


async def test_wrong_host(ref: RefServer) -> None:
    o = opts(
        ref, host="wrong.promptpath.test", resolve=[f"wrong.promptpath.test:{ref.port}:127.0.0.1"]
    )
    result = await trace(o)
    assert isinstance(result.exc, TLSError) and result.exc.kind == "hostname_mismatch"
    assert result.exc.exit_code == ExitCode.TLS


async def test_expired_certificate(tmp_path: Path) -> None:
    with reference_server(tls=True, tmp_path=tmp_path, extra_args=["--cert-days", "-1"]) as srv:
        result = await trace(opts(srv))
    assert isinstance(result.exc, TLSError) and result.exc.kind == "cert_expired"


async def test_timeout_names_the_stage_it_expired_in(ref: RefServer) -> None:
    result = await trace(opts(ref, timeout=1.0, headers=[("x-promptpath-ttft-ms", "5000")]))
    assert isinstance(result.exc, TraceTimeout)
    assert result.exc.stage == "first_token" and result.exc.exit_code == ExitCode.TIMEOUT


async def test_tls_handshake_with_a_plain_http_server(tmp_path: Path) -> None:
    with reference_server(tls=False, tmp_path=tmp_path) as srv:
        o = build_options(
            RunArgs(target=f"https://127.0.0.1:{srv.port}/v1/messages", timeout=5), environ={}
        )
        result = await trace(o)
        assert isinstance(result.exc, TLSError), result.exc
        plain = await trace(
            build_options(
                RunArgs(target=f"http://127.0.0.1:{srv.port}/v1/messages", timeout=5), environ={}
            )
        )
    assert plain.exc is None and plain.timeline.http_version == "HTTP/1.1"
    assert plain.timeline.tls is None and "tls" not in compute(plain.timeline).stages_ms


async def test_ipv6_only_connects_over_ipv6(tmp_path: Path) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 on this host")
    args = ["--host", "::1"]
    with reference_server(tls=True, tmp_path=tmp_path, extra_args=args) as srv:
        o = build_options(
            RunArgs(
                target=f"https://localhost:{srv.port}/v1/messages",
                cacert=srv.ca,
                # This host's /etc/hosts may lack "::1 localhost": pin it, curl-style.
                resolve=[f"localhost:{srv.port}:[::1]"],
                family=socket.AF_INET6,
                timeout=10,
            ),
            environ={},
        )
        result = await trace(o)
    assert result.exc is None, result.exc
    assert result.timeline.family == "ipv6" and result.timeline.address == ("::1", srv.port)


async def test_how_the_peer_closed_is_recorded_at_the_socket(ref: RefServer) -> None:
    result = await trace(opts(ref, http="1.1", headers=[("x-promptpath-truncate-after", "2")]))
    assert isinstance(result.exc, StreamError) and result.exc.kind == "truncated"
    # hypercorn ends TLS with close_notify before its FIN; FIN and RST: test_stream_endings.
    assert result.timeline.close is not None and result.timeline.close.kind == "tls_close_notify"


async def test_family_flags_apply_to_literals_and_pins(ref: RefServer) -> None:
    pinned = opts(ref, resolve=[f"localhost:{ref.port}:127.0.0.1"], family=socket.AF_INET6)
    result = await trace(pinned)
    assert result.exc is not None and result.exc.exit_code == ExitCode.DNS
    assert result.exc.kind == "no_address" and result.timeline.address is None
    literal = opts(ref, host="[::1]", family=socket.AF_INET)
    result = await trace(literal)
    assert result.exc is not None and result.exc.kind == "no_address"


async def test_ipv6_only_asked_of_a_name_with_only_ipv4_says_so(ref: RefServer) -> None:
    # /etc/hosts names localhost 127.0.0.1 only here (no ::1 line), and glibc's getaddrinfo
    # with AF_INET6 then answers EAI_NONAME: checked by hand.
    if any(f == socket.AF_INET6 for f, *_ in socket.getaddrinfo("localhost", 80)):
        pytest.skip("localhost has an IPv6 address on this machine")
    result = await trace(opts(ref, host="localhost", family=socket.AF_INET6))
    assert result.exc is not None and result.exc.kind == "no_address"
    assert "no IPv6 address for localhost" in str(result.exc)


@pytest.mark.parametrize("http", ["1.1", "2"])
async def test_a_request_leaves_in_one_write(
    ref: RefServer, monkeypatch: pytest.MonkeyPatch, http: str
) -> None:
    # HTTP/2: the preface, SETTINGS, HEADERS and DATA of the first request, the HEADERS
    # and DATA of a warm one (net/http2.py); HTTP/1.1: head, body and end of message
    # (net/http.py). One write each, as curl does, not one per frame or event.
    import time

    from promptpath.net.backend import TracedNetworkStream

    writes: list[tuple[int, int]] = []
    real = TracedNetworkStream.write

    async def counted(
        self: TracedNetworkStream, buffer: bytes, timeout: float | None = None
    ) -> None:
        writes.append((time.perf_counter_ns(), len(buffer)))
        await real(self, buffer, timeout)

    monkeypatch.setattr(TracedNetworkStream, "write", counted)
    result = await trace(opts(ref, http=http, warm=True))
    assert result.ok and result.warm is not None
    for tl in (result.timeline, result.warm.timeline):
        assert tl.http_version == f"HTTP/{http}"
        sent = tl.milestones["request_sent"]
        begun = tl.milestones.get("tls_done", tl.t0_ns)
        assert len([t for t, _ in writes if begun <= t <= sent]) == 1
