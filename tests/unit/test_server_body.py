"""The reference endpoint's body check (pure parsing), and its last line of defence: an
error nobody foresaw is one line on stderr and a 500, never a traceback."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from promptpath.server import app as app_module
from promptpath.server.app import ReferenceApp
from promptpath.server.body import MAX_DEPTH, parse_body
from promptpath.server.dialect import RequestError


def test_a_body_within_the_bounds_parses() -> None:
    nested = b'{"a":' + b"[" * (MAX_DEPTH - 1) + b"]" * (MAX_DEPTH - 1) + b"}"
    assert isinstance(parse_body(nested), dict)
    assert parse_body(b"") == {}
    # A surrogate pair escape is one real character, not a lone surrogate.
    assert parse_body(b'{"model":"\\ud83d\\ude00"}') == {"model": "\U0001f600"}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b'{"model":"\xff"}', "not UTF-8: byte 0xff at offset 10"),
        (b"\xef\xbb\xbf{}", "not JSON"),  # a BOM: RFC 8259 says do not send one
        (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "nested too deeply"),
        (b"[" * 200_000, "nested too deeply"),  # json.loads' own RecursionError
        (b'["ok", {"k": ["\\udc80"]}]', "lone surrogate escape (\\udc80)"),
        (b'{"\\ud800": 1}', "lone surrogate"),
        # json.loads takes NaN, Infinity and 1e400 (inf), which then reached the controls'
        # float parsing; past 4,300 digits it raises a ValueError no handler expected.
        (b'{"promptpath": {"pause-s": NaN}}', "NaN is not a JSON number"),
        (b'{"a": -Infinity}', "-Infinity is not a JSON number"),
        (b'{"promptpath": {"pause-s": 1e400}}', "number out of range (1e400)"),
        (b'{"max_tokens": ' + b"9" * 5000 + b"}", "integer of 5000 digits"),
    ],
)
def test_a_hostile_body_is_a_request_error(raw: bytes, reason: str) -> None:
    with pytest.raises(RequestError) as caught:
        parse_body(raw)
    assert reason in caught.value.message


def test_an_unforeseen_error_is_one_line_and_a_500(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(path: str) -> None:
        raise ValueError("boom \x1b[31m")

    monkeypatch.setattr(app_module, "dialect_for_path", broken)
    sent: list[dict[str, Any]] = []
    inbox = [{"type": "http.request", "body": b"{}", "more_body": False}]

    async def receive() -> dict[str, Any]:
        return inbox.pop(0) if inbox else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/v1/chat/completions", "method": "POST", "headers": []}
    asyncio.run(ReferenceApp()(scope, receive, send))  # type: ignore[arg-type]
    assert sent[0]["status"] == 500
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ValueError" in err and "\x1b" not in err
