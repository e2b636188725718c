"""promptpath against the reference endpoint's Bedrock paths, over HTTP/1.1 and HTTP/2.

The endpoint checks every request's SigV4 signature against its test key (and takes a
bearer token as a Bedrock API key), so a 200 proves the request promptpath sent is the
request it signed: body, path, Host or :authority and headers as they went on the wire.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from promptpath.dialects.bedrock.emulation import CONVERSE_EXCEPTIONS, INVOKE_EXCEPTIONS
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
AKID = "AKIDPROMPTPATHTRACE"
SECRET = "pp-trace-secret-DO-NOT-LEAK-7a41c2"
TOKEN = "pp-session-token-DO-NOT-LEAK-99f0e1b2"
BEARER = "ABSK-bedrock-api-key-DO-NOT-LEAK-3b8d"
MODEL = "anthropic.claude-3-haiku-20240307-v1%3A0"
PATHS = {
    "bedrock": f"/model/{MODEL}/converse-stream",
    "bedrock-invoke": f"/model/{MODEL}/invoke-with-response-stream",
}
KEYS = {
    "AWS_ACCESS_KEY_ID": AKID,
    "AWS_SECRET_ACCESS_KEY": SECRET,
    "AWS_SESSION_TOKEN": TOKEN,
    "AWS_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("bedrock-trace"),
        extra_args=[
            "--aws-test-credentials",
            f"{AKID}:{SECRET}:{TOKEN}",
            "--api-key-env",
            "PP_TEST_BEDROCK_KEY",
            "--rate",
            "0",
        ],
        env={"PP_TEST_BEDROCK_KEY": BEARER},
    ) as server:
        yield server


def run(
    server: RefServer,
    provider: str,
    http: str,
    *headers: str,
    env: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any], str]:
    args = ["run", f"https://localhost:{server.port}{PATHS[provider]}", "--cacert", str(server.ca)]
    args += ["--http", http, "--json"]
    for header in headers:
        args += ["-H", header]
    res = run_cli(*args, environ=KEYS if env is None else env)
    assert "Traceback" not in res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    for secret in (SECRET, TOKEN, BEARER):
        assert secret not in res.stdout and secret not in res.stderr
    return res.exit_code, body, res.stderr


@pytest.mark.parametrize("http", ["1.1", "2"])
@pytest.mark.parametrize("provider", sorted(PATHS))
def test_a_signed_stream_traces_with_stages_tokens_usage_and_the_servers_time(
    signed: RefServer, provider: str, http: str
) -> None:
    code, body, stderr = run(signed, provider, http, "x-promptpath-tokens: 7")
    assert code == ExitCode.OK, stderr
    assert body["target"]["provider"] == provider
    assert body["target"]["model"] == "anthropic.claude-3-haiku-20240307-v1:0"
    assert body["http_version"] == ("HTTP/2" if http == "2" else "HTTP/1.1")
    for stage in ("dns", "connect", "tls"):
        assert stage in body["stages_ms"]
    assert body["stream"]["end"] == "marker"
    assert body["tokens"]["count"] == 7 and body["tokens"]["count_source"] == "usage"
    assert body["tokens"]["events"] == 7
    said = body["server"]["stream_time"]
    assert said["source"].endswith(("latencyMs", "invocationLatency"))
    # The server's clock starts when the request has arrived and stops before its last
    # write: inside the span measured here from request sent to the end marker.
    assert said["outside_ms"] is not None and said["outside_ms"] >= 0


def test_the_servers_time_follows_its_first_token_delay(signed: RefServer) -> None:
    code, body, stderr = run(signed, "bedrock", "1.1", "x-promptpath-ttft-ms: 300")
    assert code == ExitCode.OK, stderr
    said = body["server"]["stream_time"]
    assert said["ms"] >= 300  # the server's floor; a loaded machine only adds
    assert said["measured_ms"] >= said["ms"]


def test_the_terminal_shows_the_servers_time_on_the_server_line(signed: RefServer) -> None:
    args = ["run", f"https://localhost:{signed.port}{PATHS['bedrock']}", "--cacert", str(signed.ca)]
    res = run_cli(*args, environ=KEYS)
    assert res.exit_code == ExitCode.OK, res.stderr
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("SERVER"))
    assert "metadata.metrics.latencyMs" in line and "the server says the request took" in line


@pytest.mark.parametrize(
    ("provider", "name", "http"),
    [("bedrock", n, "1.1" if i % 2 else "2") for i, n in enumerate(CONVERSE_EXCEPTIONS)]
    + [("bedrock-invoke", n, "2" if i % 2 else "1.1") for i, n in enumerate(INVOKE_EXCEPTIONS)],
)
def test_each_exception_exits_7_with_the_tokens_that_came(
    signed: RefServer, provider: str, name: str, http: str
) -> None:
    code, body, _ = run(
        signed, provider, http, "x-promptpath-error-after: 3", f"x-promptpath-error-type: {name}"
    )
    assert code == ExitCode.STREAM
    assert body["ok"] is False
    assert (body["error"]["stage"], body["error"]["kind"]) == ("stream", "error_event")
    assert body["stream"]["end"] == "error"
    assert body["tokens"]["events"] == 3
    assert body["stream"]["error"].startswith(f"{name}: ")


@pytest.mark.parametrize("http", ["1.1", "2"])
@pytest.mark.parametrize("provider", sorted(PATHS))
def test_a_stream_cut_before_its_end_is_truncated(
    signed: RefServer, provider: str, http: str
) -> None:
    code, body, _ = run(signed, provider, http, "x-promptpath-truncate-after: 4")
    assert code == ExitCode.STREAM
    assert body["error"]["kind"] == "truncated"
    assert body["stream"]["end"] == "truncated"
    assert body["tokens"]["events"] == 4


def test_a_malformed_payload_is_a_malformed_event(signed: RefServer) -> None:
    code, body, _ = run(signed, "bedrock", "1.1", "x-promptpath-malformed-after: 2")
    assert code == ExitCode.STREAM
    assert body["error"]["kind"] == "malformed_event"


def test_a_bedrock_api_key_goes_as_a_bearer_token(signed: RefServer) -> None:
    code, body, stderr = run(
        signed, "bedrock", "2", env={"AWS_BEARER_TOKEN_BEDROCK": BEARER, "AWS_REGION": "x"}
    )
    # The endpoint takes no unsigned request but a bearer token equal to its API key.
    assert code == ExitCode.OK, stderr
    assert body["request"]["key_sent"] is True


def test_a_wrong_secret_is_awss_403_naming_the_signature(signed: RefServer) -> None:
    wrong = {**KEYS, "AWS_SECRET_ACCESS_KEY": SECRET + "x"}
    code, body, _ = run(signed, "bedrock", "1.1", env=wrong)
    assert code == ExitCode.HTTP_STATUS
    assert body["error"]["kind"] == "http_403"
    assert "signature we calculated does not match" in body["error"]["message"]


def test_a_header_changed_after_signing_would_fail_but_h_headers_are_signed(
    signed: RefServer,
) -> None:
    # -H headers are part of the request before it is signed: the check passes with one.
    code, _, stderr = run(signed, "bedrock", "1.1", "x-team: network")
    assert code == ExitCode.OK, stderr


def test_no_credentials_at_all_sends_the_request_unsigned(signed: RefServer) -> None:
    code, body, _ = run(signed, "bedrock", "1.1", env={})
    assert code == ExitCode.HTTP_STATUS
    assert body["error"]["kind"] == "http_403"
    assert "Missing Authentication Token" in body["error"]["message"]


@pytest.mark.parametrize(
    ("damage", "words"),
    [("crc", "message CRC32 mismatch"), ("length", "exceeds the 25296912-byte limit")],
)
def test_a_corrupt_frame_on_the_wire_is_bad_frame_naming_its_offset(
    damage: str, words: str
) -> None:
    from promptpath.streams.eventstream import encode_message
    from tests.helpers.rawserver import raw_server

    first = encode_message(
        [(":event-type", "contentBlockDelta"), (":message-type", "event")],
        b'{"contentBlockIndex":0,"delta":{"text":"hi"}}',
    )
    second = bytearray(encode_message([(":event-type", "messageStop")], b'{"stopReason":"x"}'))
    if damage == "crc":
        second[-6] ^= 0x01
    else:  # a prelude announcing 100 MB, its own CRC right: refused before buffering
        import struct
        import zlib

        prelude = struct.pack(">II", 100 << 20, 0)
        second = bytearray(prelude + struct.pack(">I", zlib.crc32(prelude)))
    body = first + bytes(second)
    raw = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/vnd.amazon.eventstream\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    with raw_server(raw, ending="fin") as port:
        res = run_cli("run", f"http://127.0.0.1:{port}{PATHS['bedrock']}", "--json", environ={})
    body_json = json.loads(res.stdout)
    jsonschema.validate(body_json, SCHEMA)
    assert res.exit_code == ExitCode.STREAM
    error = body_json["error"]
    assert (error["stage"], error["kind"]) == ("stream", "bad_frame")
    assert f"at byte {len(first)} of the body" in error["message"]
    assert words in error["message"]
    assert body_json["tokens"]["events"] == 1  # the message before it was whole
