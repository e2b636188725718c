"""An API key over plain http://: refused before any connection off loopback, sent with a
note on loopback. The refusal is proven without a packet leaving this machine: the dial
function is replaced by one that only records its call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer

pytestmark = pytest.mark.integration

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
KEY = {"OPENAI_API_KEY": "sk-test-0123456789abcdef"}
# TEST-NET-1 (RFC 5737): never routed; and the dial below never happens anyway.
REMOTE = "192.0.2.10"


@pytest.fixture
def dials(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Every TCP dial the transport attempts, recorded and refused without a syscall."""
    calls: list[tuple[str, ...]] = []

    async def no_dial(host: str, port: int, addresses: Any, *args: Any, **kw: Any) -> Any:
        calls.append(tuple(ip for ip, _ in addresses))
        raise ConnectionRefusedError(111, "dial replaced by the test")

    monkeypatch.setattr("promptpath.net.http.connect_tcp", no_dial)
    return calls


def run_json(*args: str, environ: dict[str, str]) -> tuple[int, dict[str, Any], str]:
    res = run_cli("run", *args, "--json", "--timeout", "5", environ=environ)
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    return res.exit_code, body, res.stderr


def test_a_key_to_a_remote_http_address_is_refused_before_connecting(
    dials: list[tuple[str, ...]],
) -> None:
    url = "http://llm.example:8080/v1/chat/completions"
    code, body, stderr = run_json(url, "--resolve", f"llm.example:8080:{REMOTE}", environ=KEY)
    assert code == ExitCode.USAGE == body["exit_code"] == 2
    assert body["error"]["stage"] == "config" and body["error"]["kind"] == "cleartext_key"
    assert REMOTE in body["error"]["message"] and "--allow-cleartext" in body["error"]["message"]
    assert dials == [] and body["connect_attempts"] == []
    assert "connect" not in body["stages_ms"]
    assert "sk-test" not in stderr + json.dumps(body)


def test_allow_cleartext_goes_on_to_connect(dials: list[tuple[str, ...]]) -> None:
    url = "http://llm.example:8080/v1/chat/completions"
    code, body, _ = run_json(
        url, "--resolve", f"llm.example:8080:{REMOTE}", "--allow-cleartext", environ=KEY
    )
    assert dials == [(REMOTE,)]  # reached the (replaced) dial: the gate let it through
    assert code == ExitCode.CONNECT and body["error"]["stage"] == "connect"


def test_without_a_key_nothing_is_refused(dials: list[tuple[str, ...]]) -> None:
    url = "http://llm.example:8080/v1/chat/completions"
    code, _, _ = run_json(url, "--resolve", f"llm.example:8080:{REMOTE}", environ={})
    assert dials == [(REMOTE,)] and code == ExitCode.CONNECT


def test_a_key_to_loopback_is_sent_with_a_note(refserver_plain: RefServer) -> None:
    url = refserver_plain.path("/v1/chat/completions")
    code, _, stderr = run_json(url, "-H", "x-promptpath-rate: 0", environ=KEY)
    assert code == 0, stderr
    assert "KEY    the API key went over plain http:// to loopback 127.0.0.1" in stderr
