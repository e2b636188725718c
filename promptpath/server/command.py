"""``promptpath serve``: the reference endpoint's command-line face.

The CLI registers ``serve`` with ``app.command("serve")(serve)``; ``python -m
promptpath.server`` runs the same function. Importing this module stays cheap: hypercorn
and cryptography load only when the server starts.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any, Final

import typer

from promptpath.core.exitcodes import ExitCode
from promptpath.environment import Environment
from promptpath.plan.flags import Flag, declare
from promptpath.server.behaviour import (
    CONTROLS,
    Behaviour,
    BehaviourError,
    parse_control,
    parse_response_header,
)
from promptpath.server.controls import RESPONSE_HEADER, TABLE, Control
from promptpath.server.limits import CERT_DAYS_MAX, PORT_MAX
from promptpath.server.routing import DIALECTS, WEBSOCKET_ONLY
from promptpath.server.sigv4_check import parse_test_credentials

_B = "Behaviour (per request: header x-promptpath-<name>, or body field promptpath.<name>)"
_L = "Listening and TLS"
_SERVE: Final = frozenset({"serve"})

#: How the server listens and whom it lets in: rows in plan/flags.py's style.
LISTENING: Final[tuple[Flag, ...]] = (
    Flag(
        dest="host",
        decls=("--host",),
        type=str,
        default="127.0.0.1",
        metavar="ADDR",
        help="Address to listen on.",
        panel=_L,
        commands=_SERVE,
    ),
    Flag(
        dest="port",
        decls=("--port",),
        type=int | None,
        default=None,
        metavar="PORT",
        help="Port (default 8443 with TLS, 8080 without; 0 = any free port).",
        panel=_L,
        commands=_SERVE,
        extra={"min": 0, "max": PORT_MAX},
    ),
    Flag(
        dest="certfile",
        decls=("--certfile",),
        type=str | None,
        default=None,
        metavar="FILE",
        help="PEM certificate (chain) to serve.",
        panel=_L,
        commands=_SERVE,
    ),
    Flag(
        dest="keyfile",
        decls=("--keyfile",),
        type=str | None,
        default=None,
        metavar="FILE",
        help="PEM private key.",
        panel=_L,
        commands=_SERVE,
    ),
    Flag(
        dest="self_signed",
        decls=("--self-signed",),
        type=str | None,
        default=None,
        metavar="DIR",
        help="Generate a CA and a localhost certificate in DIR (ca.pem, cert.pem, key.pem).",
        panel=_L,
        commands=_SERVE,
    ),
    Flag(
        dest="cert_days",
        decls=("--cert-days",),
        type=int,
        default=90,
        metavar="DAYS",
        help="Validity of the generated leaf, in days (negative: already expired).",
        panel=_L,
        commands=_SERVE,
        extra={"min": -CERT_DAYS_MAX, "max": CERT_DAYS_MAX},
    ),
    Flag(
        dest="client_ca",
        decls=("--client-ca",),
        type=str | None,
        default=None,
        metavar="FILE",
        help="Require a client certificate signed by these PEM CAs (mTLS; turns HTTP/3 off).",
        panel=_L,
        commands=_SERVE,
    ),
    Flag(
        dest="http3",
        decls=("--http3/--no-http3",),
        type=bool | None,
        default=None,
        help="Serve HTTP/3 on the same UDP port (default: on with TLS).",
        panel=_L,
        commands=_SERVE,
    ),
    Flag(
        dest="api_key_env",
        decls=("--api-key-env",),
        type=str | None,
        default=None,
        metavar="NAME",
        help="Require this env var's value as Bearer / x-api-key.",
        panel=_L,
        commands=_SERVE,
    ),
    Flag(
        dest="aws_test_credentials",
        decls=("--aws-test-credentials",),
        type=str | None,
        default=None,
        metavar="AKID:SECRET[:TOKEN]",
        help="Verify Bedrock requests' SigV4 signatures against this test key (403 as"
        " AWS answers a bad one).",
        panel=_L,
        commands=_SERVE,
        extra={"envvar": "PROMPTPATH_SERVE_AWS_CREDENTIALS", "show_envvar": True},
    ),
    Flag(
        dest="verbose",
        decls=("--verbose", "-v"),
        type=bool,
        default=False,
        help="Access logs on stderr.",
        panel="Options",  # the panel of --help itself
        commands=_SERVE,
    ),
)


def _dest(control: Control) -> str:
    return control.name.replace("-", "_")


def _control_flag(control: Control) -> Flag:
    """A behaviour control's flag: a server-wide default for its header."""
    kind = control.flag_type
    assert kind is not None
    switch = kind is bool  # given: "yes"; not given: the control's own default
    return Flag(
        dest=_dest(control),
        decls=(f"--{control.name}",),
        type=bool if switch else (list[kind] if control.repeatable else kind) | None,  # type: ignore[valid-type]
        default=False if switch else None,
        metavar=control.metavar,
        help=control.help,
        panel=_B,
        commands=_SERVE,
    )


#: Every option of ``serve``, in --help's order: the listening rows, then one flag per
#: behaviour control that has one (server/controls.py).
SERVE_FLAGS: Final[tuple[Flag, ...]] = (
    *LISTENING,
    *(_control_flag(c) for c in TABLE if c.flag_type is not None),
)


def build_behaviour(flags: Mapping[str, object]) -> Behaviour:
    """Server-wide defaults from flag values by control name (``None`` or ``False`` = not
    given), validated exactly as the matching ``x-promptpath-*`` header would be."""
    changes: dict[str, object] = {}
    for control, value in flags.items():
        if value is None or value is False:
            continue
        if control == RESPONSE_HEADER:
            raws = value if isinstance(value, list) else [value]
            changes["response_headers"] = tuple(
                parse_response_header(f"--{control}", str(raw)) for raw in raws
            )
            continue
        text = "yes" if value is True else str(value)
        changes[CONTROLS[control].field] = parse_control(control, text)
    return Behaviour(**changes)  # type: ignore[arg-type]


_CTX = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)


@declare("serve", _CTX, table=SERVE_FLAGS)
def serve(ctx: typer.Context, **values: Any) -> None:
    from promptpath.server.hosting import ServerConfig, ServerSetupError, serve_forever

    env = Environment.of(ctx.obj)
    try:
        behaviour = build_behaviour(
            {c.name: values[_dest(c)] for c in TABLE if c.flag_type is not None}
        )
    except BehaviourError as exc:
        raise typer.BadParameter(exc.message, param_hint=exc.header) from None

    api_key = None
    api_key_env = values["api_key_env"]
    if api_key_env is not None:
        api_key = env.environ.get(api_key_env)
        if not api_key:
            raise typer.BadParameter(
                f"environment variable {api_key_env} is not set", param_hint="--api-key-env"
            )

    aws = None
    if values["aws_test_credentials"] is not None:
        try:
            aws = parse_test_credentials(values["aws_test_credentials"])
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--aws-test-credentials") from None

    config = ServerConfig(
        host=values["host"],
        port=values["port"],
        certfile=values["certfile"],
        keyfile=values["keyfile"],
        self_signed=values["self_signed"],
        cert_days=values["cert_days"],
        client_ca=values["client_ca"],
        http3=values["http3"],
        behaviour=behaviour,
        api_key=api_key,
        aws_credentials=aws,
        verbose=values["verbose"],
    )

    def announce(info: dict[str, object]) -> None:
        env.stdout.write(json.dumps(info) + "\n")
        env.stdout.flush()

    try:
        serve_forever(config, announce=announce)
    except ServerSetupError as exc:
        env.stderr.write(f"promptpath serve: {exc}\n")
        raise typer.Exit(int(ExitCode.USAGE)) from None
    except KeyboardInterrupt:
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None


#: The dialects serve speaks, from the server's registry (one line: the registry moves).
_DIALECTS = ", ".join([*DIALECTS, *(f"{name} (WebSocket)" for name in sorted(WEBSOCKET_ONLY))])
_FLAGGED = [c.flag for c in TABLE if c.flag is not None]

serve.__doc__ = f"""Run the reference endpoint (a streaming API you control).

It speaks {_DIALECTS}, each at its provider's paths.

Every behaviour option below ({_FLAGGED[0]} to {_FLAGGED[-1]}) is also a request header,
x-promptpath-<option>, that overrides it for that request alone, e.g.
'x-promptpath-pause-after: 3' and 'x-promptpath-pause-s: 30'; an unknown x-promptpath-*
header is refused rather than ignored. The same controls may ride in the request body's
"promptpath" object ({{"promptpath": {{"pause-after": 3, "pause-s": "30"}}}}) for gateways
that strip x- headers; a header wins over the body. The first event of each stream reports
the controls applied and where each came from.

GET /stats answers JSON counters (requests, completions, tokens_sent, tokens_generated,
client_disconnects and the recent requests); GET /metrics the same in Prometheus text with
TTFT and stream-duration histograms; GET /stats/requests/ID the request a probe tagged with
'x-promptpath-probe-id: ID'; GET /healthz answers 200. None of them counts as a request.
"""
