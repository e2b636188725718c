"""`promptpath demo`: the reference endpoint in-process on loopback, traced end to end.

No network and no API key: a fresh self-signed CA in a temp dir, HTTP/2 (or 1.1/3), a
realistic first-token delay and cadence, then the full report.
"""

from __future__ import annotations

import tempfile

from promptpath.commands import execute
from promptpath.environment import Environment
from promptpath.resolve import values_for

#: Paths per dialect on the reference endpoint.
DEMO_PATHS = {
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
    "ollama": "/api/chat",
}

#: What the demo endpoint does: a plausible hosted model on a good day.
DEMO_TTFT_MS = 350.0
DEMO_RATE = 40.0
DEMO_TOKENS = 48


def run_demo(*, http: str, provider: str, json_out: bool, warm: bool, env: Environment) -> int:
    from promptpath.server.behaviour import Behaviour
    from promptpath.server.hosting import ServerConfig, start_in_thread

    if provider not in DEMO_PATHS:
        from promptpath.commands import usage_failure
        from promptpath.core.errors import UsageError

        return usage_failure(
            UsageError(f"--provider must be one of {', '.join(DEMO_PATHS)}, got {provider!r}"),
            json_out,
            env,
        )
    with tempfile.TemporaryDirectory(prefix="promptpath-demo-") as tmp:
        config = ServerConfig(
            host="127.0.0.1",
            port=0,
            self_signed=tmp,
            http3=True,  # serve h3 too, so discovery has an Alt-Svc to find
            behaviour=Behaviour(ttft_ms=DEMO_TTFT_MS, rate=DEMO_RATE, tokens=DEMO_TOKENS),
        )
        with start_in_thread(config) as server:
            _warm_up(server.port, str(server.ca_path))
            values = values_for(
                f"https://localhost:{server.port}{DEMO_PATHS[provider]}",
                provider=provider,
                model="promptpath-demo",
                max_tokens=DEMO_TOKENS,
                http=http,
                cacert=str(server.ca_path),
                ipv4=True,
                timeout=30.0,
                warm=warm,
                json_out=json_out,
            )
            return execute(values, env=env)


def _warm_up(port: int, cafile: str) -> None:
    """One untimed h2 request first: the in-process server's first-connection work (lazy
    imports, TLS setup) would otherwise show up as tens of ms in the demo's TLS stage."""
    import ssl

    import httpx

    ctx = ssl.create_default_context(cafile=cafile)
    try:
        with httpx.Client(http2=True, verify=ctx, timeout=5) as client:
            client.get(f"https://localhost:{port}/healthz")
    except httpx.HTTPError:
        pass  # the trace will say what is wrong
