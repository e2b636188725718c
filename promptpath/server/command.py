"""``promptpath serve``: the reference endpoint's command-line face.

The CLI registers ``serve`` with ``app.command("serve")(serve)``; ``python -m
promptpath.server`` runs the same function. Importing this module stays cheap: hypercorn
and cryptography load only when the server starts.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated

import typer

from promptpath.core.exitcodes import ExitCode
from promptpath.environment import Environment
from promptpath.server.behaviour import (
    Behaviour,
    BehaviourError,
    parse_control,
    parse_response_header,
)
from promptpath.server.limits import CERT_DAYS_MAX, PORT_MAX
from promptpath.server.sigv4_check import parse_test_credentials

_B = "Behaviour (per request: header x-promptpath-<name>, or body field promptpath.<name>)"
_L = "Listening and TLS"


def build_behaviour(flags: dict[str, object]) -> Behaviour:
    """Server-wide defaults from flag values (``None`` = not given), validated exactly as
    the matching ``x-promptpath-*`` header would be."""
    changes: dict[str, object] = {}
    for control, value in flags.items():
        if value is None:
            continue
        field_name = control.replace("-", "_")
        changes[field_name] = parse_control(control, str(value))
    return Behaviour(**changes)  # type: ignore[arg-type]


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option(metavar="ADDR", help="Address to listen on.", rich_help_panel=_L)
    ] = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option(
            metavar="PORT",
            help="Port (default 8443 with TLS, 8080 without; 0 = any free port).",
            min=0,
            max=PORT_MAX,
            rich_help_panel=_L,
        ),
    ] = None,
    certfile: Annotated[
        str | None,
        typer.Option(metavar="FILE", help="PEM certificate (chain) to serve.", rich_help_panel=_L),
    ] = None,
    keyfile: Annotated[
        str | None, typer.Option(metavar="FILE", help="PEM private key.", rich_help_panel=_L)
    ] = None,
    self_signed: Annotated[
        str | None,
        typer.Option(
            "--self-signed",
            metavar="DIR",
            help="Generate a CA and a localhost certificate in DIR (ca.pem, cert.pem, key.pem).",
            rich_help_panel=_L,
        ),
    ] = None,
    cert_days: Annotated[
        int,
        typer.Option(
            metavar="DAYS",
            help="Validity of the generated leaf, in days (negative: already expired).",
            min=-CERT_DAYS_MAX,
            max=CERT_DAYS_MAX,
            rich_help_panel=_L,
        ),
    ] = 90,
    client_ca: Annotated[
        str | None,
        typer.Option(
            "--client-ca",
            metavar="FILE",
            help="Require a client certificate signed by these PEM CAs (mTLS; turns HTTP/3 off).",
            rich_help_panel=_L,
        ),
    ] = None,
    http3: Annotated[
        bool | None,
        typer.Option(
            "--http3/--no-http3",
            help="Serve HTTP/3 on the same UDP port (default: on with TLS).",
            rich_help_panel=_L,
        ),
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            metavar="NAME",
            help="Require this env var's value as Bearer / x-api-key.",
            rich_help_panel=_L,
        ),
    ] = None,
    aws_test_credentials: Annotated[
        str | None,
        typer.Option(
            "--aws-test-credentials",
            metavar="AKID:SECRET[:TOKEN]",
            envvar="PROMPTPATH_SERVE_AWS_CREDENTIALS",
            show_envvar=True,
            help="Verify Bedrock requests' SigV4 signatures against this test key (403 as"
            " AWS answers a bad one).",
            rich_help_panel=_L,
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Access logs on stderr.")
    ] = False,
    ttft_ms: Annotated[
        float | None,
        typer.Option(metavar="MS", help="First-token delay in ms [0].", rich_help_panel=_B),
    ] = None,
    tokens: Annotated[
        int | None, typer.Option(metavar="N", help="Tokens per answer [32].", rich_help_panel=_B)
    ] = None,
    reasoning: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Send the first N tokens as the model's reasoning, then the answer [0].",
            rich_help_panel=_B,
        ),
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(metavar="N", help="Tokens per second, 0 = flat out [50].", rich_help_panel=_B),
    ] = None,
    pause_after: Annotated[
        int | None,
        typer.Option(metavar="N", help="Pause after this many tokens.", rich_help_panel=_B),
    ] = None,
    pause_s: Annotated[
        float | None,
        typer.Option(metavar="SECONDS", help="Length of that pause in s.", rich_help_panel=_B),
    ] = None,
    keepalive_s: Annotated[
        float | None,
        typer.Option(
            metavar="SECONDS",
            help="SSE keepalive comment every SECONDS during longer waits (0 = off, min 0.01).",
            rich_help_panel=_B,
        ),
    ] = None,
    truncate_after: Annotated[
        int | None,
        typer.Option(
            metavar="N", help="Cut the connection after this many tokens.", rich_help_panel=_B
        ),
    ] = None,
    error_after: Annotated[
        int | None,
        typer.Option(
            metavar="N", help="Mid-stream error event after this many tokens.", rich_help_panel=_B
        ),
    ] = None,
    malformed_after: Annotated[
        int | None,
        typer.Option(
            metavar="N", help="One non-JSON event after this many tokens.", rich_help_panel=_B
        ),
    ] = None,
    status: Annotated[
        int | None,
        typer.Option(
            metavar="CODE",
            help="Answer with this HTTP status and an error body.",
            rich_help_panel=_B,
        ),
    ] = None,
    body: Annotated[
        str | None,
        typer.Option(
            metavar="html|json", help="Answer 200 with HTML or JSON, no stream.", rich_help_panel=_B
        ),
    ] = None,
    batch: Annotated[
        int | None,
        typer.Option(metavar="N", help="Events per transport write [1].", rich_help_panel=_B),
    ] = None,
    filter_batch: Annotated[
        int | None,
        typer.Option(
            metavar="N",
            help="Hold tokens and release them N at a time, as a content filter does (Azure:"
            " with its verdict chunk).",
            rich_help_panel=_B,
        ),
    ] = None,
    accel_buffering: Annotated[
        str | None,
        typer.Option(
            metavar="yes|no", help="Send X-Accel-Buffering with this value.", rich_help_panel=_B
        ),
    ] = None,
    ignore_disconnect: Annotated[
        bool,
        typer.Option(
            "--ignore-disconnect",
            help="Keep generating after the client left (play a ghosting upstream).",
            rich_help_panel=_B,
        ),
    ] = False,
    response_header: Annotated[
        list[str] | None,
        typer.Option(
            metavar="'NAME: VALUE'",
            help="Add this header to every answer (repeatable), e.g. a provider's rate-limit "
            "or Server-Timing header.",
            rich_help_panel=_B,
        ),
    ] = None,
) -> None:
    """Run the reference endpoint: a streaming AI API (OpenAI, Responses, Anthropic,
    Ollama, Gemini, Vertex AI, Azure OpenAI, Cohere) whose timing and failures you control."""
    from promptpath.server.hosting import ServerConfig, ServerSetupError, serve_forever

    env = Environment.of(ctx.obj)
    try:
        behaviour = build_behaviour(
            {
                "ttft-ms": ttft_ms,
                "tokens": tokens,
                "reasoning": reasoning,
                "rate": rate,
                "pause-after": pause_after,
                "pause-s": pause_s,
                "keepalive-s": keepalive_s,
                "truncate-after": truncate_after,
                "error-after": error_after,
                "malformed-after": malformed_after,
                "status": status,
                "body": body,
                "batch": batch,
                "filter-batch": filter_batch,
                "accel-buffering": accel_buffering,
                "ignore-disconnect": "yes" if ignore_disconnect else None,
            }
        )
        added = tuple(
            parse_response_header("--response-header", raw) for raw in response_header or ()
        )
        behaviour = dataclasses.replace(behaviour, response_headers=added)
    except BehaviourError as exc:
        raise typer.BadParameter(exc.message, param_hint=exc.header) from None

    api_key = None
    if api_key_env is not None:
        api_key = env.environ.get(api_key_env)
        if not api_key:
            raise typer.BadParameter(
                f"environment variable {api_key_env} is not set", param_hint="--api-key-env"
            )

    aws = None
    if aws_test_credentials is not None:
        try:
            aws = parse_test_credentials(aws_test_credentials)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--aws-test-credentials") from None

    config = ServerConfig(
        host=host,
        port=port,
        certfile=certfile,
        keyfile=keyfile,
        self_signed=self_signed,
        cert_days=cert_days,
        client_ca=client_ca,
        http3=http3,
        behaviour=behaviour,
        api_key=api_key,
        aws_credentials=aws,
        verbose=verbose,
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
