"""`promptpath demo`: the reference endpoint in-process on loopback, traced end to end.

No network and no API key: a fresh self-signed CA in a temp dir, HTTP/2 (or 1.1/3), a
realistic first-token delay and cadence, then the full report.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field

from promptpath.cli.commands import execute, usage_failure
from promptpath.dialects.plugins import dialects
from promptpath.dialects.registry import DEMO
from promptpath.environment import Environment
from promptpath.outputs.formats import formats_of
from promptpath.plan.resolve import values_for


def demo_paths() -> dict[str, str]:
    """The dialects the demo offers, and the path of each on the reference endpoint (their
    plug-ins' ``demo_path``)."""
    return {d.name: d.demo_path for d in dialects() if d.demo_path is not None}


#: What the demo endpoint does: a plausible hosted model on a good day.
DEMO_TTFT_MS = 350.0
DEMO_RATE = 40.0
DEMO_TOKENS = 48


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoArgs:
    http: str = "2"
    provider: str = DEMO
    warm: bool = False
    hop: str | None = None  # a misbehaving hop between client and endpoint (demo_hops.py)
    #: The output formats' values (--json, --html, --svg: outputs/formats.py's rows for
    #: `demo`), passed to the run as they are.
    outputs: Mapping[str, object] = field(default_factory=dict)

    @classmethod
    def of(cls, values: Mapping[str, object]) -> DemoArgs:
        """The demo's options as the command line parsed them."""
        return cls(
            http=str(values["http"]),
            provider=str(values["provider"]),
            warm=bool(values["warm"]),
            hop=None if values["hop"] is None else str(values["hop"]),
            outputs={fmt.dest: values[fmt.dest] for fmt in formats_of("demo")},
        )

    @property
    def json_out(self) -> bool:
        return bool(self.outputs.get("json_out", False))


def run_demo(args: DemoArgs, *, env: Environment) -> int:
    from promptpath.core.errors import UsageError

    paths = demo_paths()
    if args.provider not in paths:
        return usage_failure(
            UsageError(f"--provider must be one of {', '.join(paths)}, got {args.provider!r}"),
            args.json_out,
            env,
        )
    if args.hop is not None:
        from promptpath.server.hops import HOPS

        if args.hop not in HOPS:
            message = f"--hop must be one of {', '.join(HOPS)}, got {args.hop!r}"
            return usage_failure(UsageError(message, kind="bad_option"), args.json_out, env)
        return _through_hop(args, env)
    return _direct(args, env)


def _outputs(args: DemoArgs) -> dict[str, object]:
    return dict(args.outputs)


def _direct(args: DemoArgs, env: Environment) -> int:
    """The clean path: TLS and HTTP/2 (or --http) straight to the endpoint."""
    from promptpath.server.behaviour import Behaviour
    from promptpath.server.hosting import ServerConfig, start_in_thread

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
                f"https://localhost:{server.port}{demo_paths()[args.provider]}",
                provider=args.provider,
                model="promptpath-demo",
                max_tokens=DEMO_TOKENS,
                http=args.http,
                cacert=str(server.ca_path),
                ipv4=True,
                timeout=30.0,
                warm=args.warm,
                **_outputs(args),
            )
            return execute(values, env=env)


def _through_hop(args: DemoArgs, env: Environment) -> int:
    """The endpoint behind a demo hop (server/hops.py), traced with the canary on and the
    probe that finds that hop: plain HTTP/1.1 on loopback, as a hop in front of an origin."""
    from promptpath.cli.demo_hops import HOP_PROBES, IDLE_MAX_S
    from promptpath.server.behaviour import Behaviour
    from promptpath.server.hops import running
    from promptpath.server.hosting import ServerConfig, start_in_thread

    kind = args.hop
    assert kind in HOP_PROBES
    config = ServerConfig(
        host="127.0.0.1",
        port=0,
        http3=False,
        behaviour=Behaviour(ttft_ms=DEMO_TTFT_MS, rate=DEMO_RATE, tokens=DEMO_TOKENS),
    )
    with start_in_thread(config) as server, running(kind, server.port) as hop:
        values = values_for(
            f"http://127.0.0.1:{hop.port}{demo_paths()[args.provider]}",
            provider=args.provider,
            model="promptpath-demo",
            max_tokens=DEMO_TOKENS,
            http="1.1",
            timeout=30.0,
            canary=True,
            probe=list(HOP_PROBES[kind]),
            idle_max=IDLE_MAX_S,
            **_outputs(args),
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
