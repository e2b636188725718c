"""A hostile Bedrock origin echoes every request header back: no AWS secret leaves.

SigV4 puts three secrets in play: the secret access key (never sent: only the signature
derived from it), the session token (sent in X-Amz-Security-Token) and the signature
(sent in Authorization, made per request, so nothing knows it in advance to search for);
a Bedrock API key is a fourth (a bearer token). The origin (tests/helpers/hostile.py, a
real socket on loopback) copies every request header into its response headers and into
the text it controls: a 403 body, and an exception message inside a 200 event stream. The
real CLI runs with --json -v, a HAR file and a terminal report; every channel is searched
for each secret, its base64 and every 12-character piece of it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from promptpath.streams.eventstream import encode_message
from tests.helpers.cli import run_cli
from tests.helpers.hostile import Request, forbidden, hostile_origin, response

SECRET = "hostile-aws-secret-Kq7Wm2Xz9Lp4Rt6Vb8Nc1Dh3"
TOKEN = "hostile-session-token-Fg5Jk8Mn2Qs4Uw6Yz9Ab1Cd3Ef"
BEARER = "ABSKhostile-bedrock-key-Hj7Kl9Mn1Op3Qr5St7Uv"
PATH = "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream"
SIGNED = {
    "AWS_ACCESS_KEY_ID": "AKIDHOSTILE",
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "AWS_SESSION_TOKEN": TOKEN,
    "AWS_REGION": "us-east-1",
}

#: the Authorization values the origin was sent (the signatures to look for afterwards)
SEEN: list[str] = []


def _echo(request: Request) -> list[tuple[str, str]]:
    SEEN.append(request.header("authorization"))
    auth = request.header("authorization")
    out = [("x-amzn-requestid", auth), ("via", f"1.1 {auth}")]
    return out + [(f"x-echo-{i}", f"{k}={v}") for i, (k, v) in enumerate(request.headers)]


def refused(request: Request) -> bytes:
    body = json.dumps({"message": "x" * 100 + request.every_header()}).encode()
    headers = [("content-type", "application/json"), *_echo(request)]
    return response("403 Forbidden", headers, body)


def exception_in_stream(request: Request) -> bytes:
    token = encode_message(
        [(":event-type", "contentBlockDelta"), (":message-type", "event")],
        b'{"contentBlockIndex":0,"delta":{"text":"hi"}}',
    )
    failure = encode_message(
        [(":exception-type", "validationException"), (":message-type", "exception")],
        json.dumps({"message": request.every_header()}).encode(),
    )
    headers = [("content-type", "application/vnd.amazon.eventstream"), *_echo(request)]
    return response("200 OK", headers, token + failure)


@pytest.mark.parametrize(
    ("respond", "code"), [(refused, 6), (exception_in_stream, 7)], ids=["403", "exception"]
)
@pytest.mark.parametrize("auth", ["sigv4", "bearer"])
def test_no_aws_secret_reaches_any_output(
    respond: object, code: int, auth: str, tmp_path: Path
) -> None:
    env = SIGNED if auth == "sigv4" else {"AWS_BEARER_TOKEN_BEDROCK": BEARER}
    SEEN.clear()
    with hostile_origin(respond) as port:  # type: ignore[arg-type]
        url = f"http://127.0.0.1:{port}{PATH}"
        har = tmp_path / "run.har"
        json_run = run_cli("run", url, "-v", "--json", "--har", str(har), environ=env)
        tty_run = run_cli("run", url, "-v", environ=env, stdout_isatty=True)
    assert json_run.exit_code == tty_run.exit_code == code, json_run.stderr
    secrets = [SECRET, TOKEN] if auth == "sigv4" else [BEARER]
    signatures = [a.rsplit("Signature=", 1)[1] for a in SEEN if "Signature=" in a]
    assert len(signatures) == (2 if auth == "sigv4" else 0)
    secrets += signatures
    channels = {
        "json stdout": json_run.stdout,
        "json stderr": json_run.stderr,
        "tty stdout": tty_run.stdout,
        "tty stderr": tty_run.stderr,
        "har": har.read_text(),
    }
    # The echo did arrive (so the search below can fail): the marker stands in for it.
    assert "[redacted]" in channels["json stdout"]
    for where, text in channels.items():
        for secret in secrets:
            leaked = [piece for piece in forbidden(secret) if piece in text]
            assert not leaked, f"{where} holds {leaked[:3]}"
