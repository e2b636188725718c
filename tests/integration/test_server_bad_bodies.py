"""The reference endpoint never prints a traceback: a hostile request body is a clean 400
with a reason, and serve keeps serving (issue 24, item 5)."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from tests.helpers.refserver import reference_server

CHAT = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'

#: (case, path, body, what the 400's message says). Observed before the fix, on
#: hypercorn 0.18: not UTF-8 -> 500 and a UnicodeDecodeError traceback on stderr;
#: nesting -> RecursionError; a lone surrogate in the model -> 200 and the stream cut by
#: a UnicodeEncodeError when the first event was framed.
CASES = [
    ("not_utf8", "/v1/chat/completions", b'{"model":"m\xc3(","messages":[]}', "UTF-8"),
    ("latin1_prompt", "/v1/messages", b'{"model":"m","max_tokens":5,"system":"caf\xe9"}', "UTF-8"),
    ("utf16", "/v1/chat/completions", '{"model":"m"}'.encode("utf-16"), "UTF-8"),
    ("nested_list", "/v1/chat/completions", b"[" * 100_000 + b"]" * 100_000, "nested"),
    ("nested_obj", "/v1/responses", b'{"input":' * 50_000 + b"1" + b"}" * 50_000, "nested"),
    # json.loads takes 900 levels (its limit is ~1000); the recursive walks after it did
    # not always: refused at MAX_DEPTH (64) now.
    (
        "deep_but_parsable",
        "/v1/chat/completions",
        b'{"a":' + b"[" * 900 + b"]" * 900 + b"}",
        "nested",
    ),
    ("surrogate_model", "/v1/chat/completions", b'{"model":"\\ud800","stream":true}', "surrogate"),
    ("surrogate_prompt", "/api/chat", b'{"messages":[{"content":"\\udfff"}]}', "surrogate"),
    ("surrogate_key", "/v1/messages", b'{"max_tokens":5,"\\ud83d":1}', "surrogate"),
    ("surrogate_control", "/v1/chat/completions", b'{"promptpath":{"\\ud800":"1"}}', "surrogate"),
]


def _post_raw(port: int, path: str, body: bytes) -> tuple[int, bytes]:
    """One HTTP/1.1 POST with exactly ``body`` on a raw socket; (status, response body)."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


@pytest.fixture(scope="module")
def plain_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with reference_server(
        tls=False, tmp_path=tmp_path_factory.mktemp("bad-bodies"), extra_args=["--rate", "0"]
    ) as server:
        yield server


@pytest.mark.parametrize(("case", "path", "body", "reason"), CASES, ids=[c[0] for c in CASES])
def test_a_hostile_body_is_a_clean_400_and_serve_keeps_serving(
    plain_server,
    case: str,
    path: str,
    body: bytes,
    reason: str,  # type: ignore[no-untyped-def]
) -> None:
    status, answer = _post_raw(plain_server.port, path, body)
    assert status == 400, (status, answer[:300])
    assert reason in answer.decode("utf-8"), answer[:300]
    answer.decode("utf-8")  # the error itself is valid UTF-8 (it may quote the body)
    with httpx.Client(timeout=10) as client:
        after = client.post(plain_server.path("/v1/chat/completions"), content=CHAT)
    assert after.status_code == 200 and "[DONE]" in after.text
    stderr = Path(plain_server.stderr).read_text(errors="replace")
    assert "Traceback" not in stderr and "Error" not in stderr, stderr[-2000:]
