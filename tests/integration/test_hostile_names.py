"""Host names that are not plain ASCII DNS names (issue 30, item 5), through the real CLI.

Before: ``exämple.invalid`` pinned with --resolve ended the run with exit 70 (httpcore
refused the U-label in the Host header); a label over 63 characters in the target or in
--proxy raised UnicodeError from Python's idna codec inside getaddrinfo (exit 70), or,
pinned with --resolve over http://, went on the wire as a Host no DNS name can be.

Every name here is pinned with --resolve to 127.0.0.1: no test asks any resolver.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.hostile import Request, chunk, hostile_origin, response, sse
from tests.helpers.refserver import RefServer

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
IDN, ACE = "exämple.invalid", "xn--exmple-cua.invalid"
LONG = "a" * 64 + ".invalid"


def test_an_idn_target_sends_its_ascii_name_as_host() -> None:
    seen: list[Request] = []

    def respond(request: Request) -> bytes:
        seen.append(request)
        body = sse(chunk("a"), chunk("b"))
        return response("200 OK", [("content-type", "text/event-stream")], body)

    with hostile_origin(respond) as port:
        result = run_cli(
            "run", f"http://{IDN}:{port}/v1/chat/completions", "--json",
            "--resolve", f"{IDN}:{port}:127.0.0.1",
        )  # fmt: skip
    assert result.exit_code == ExitCode.OK, result.stderr[-2000:]
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    assert [r.header("host") for r in seen] == [f"{ACE}:{port}"]
    assert report["target"]["host"] == ACE


def test_an_idn_target_over_tls_sends_the_ascii_name_as_sni(refserver_tls: RefServer) -> None:
    # The reference endpoint's certificate names localhost: with -k the handshake goes on
    # and the report keeps the SNI sent, which must be the A-label Python's ssl accepts.
    result = run_cli(
        "run", f"https://{IDN}:{refserver_tls.port}/v1/chat/completions", "--json", "-k",
        "--resolve", f"{IDN}:{refserver_tls.port}:127.0.0.1",
        "-H", "x-promptpath-tokens: 3",
    )  # fmt: skip
    assert result.exit_code == ExitCode.OK, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["tls"]["sni"] == ACE


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ([f"http://{LONG}:9/v1/chat/completions", "--resolve", f"{LONG}:9:127.0.0.1"],
         "target host name has a label longer than 63 characters"),
        (["http://127.0.0.1:9/v1/chat/completions", "--proxy", f"http://u:pr0xypw@{LONG}:9",
          "--resolve", f"{LONG}:9:127.0.0.1"],
         "--proxy: the proxy host name has a label longer than 63 characters"),
    ],
)  # fmt: skip
def test_a_label_over_63_characters_is_exit_2_naming_where(args: list[str], said: str) -> None:
    result = run_cli("run", *args, "--json")
    assert result.exit_code == ExitCode.USAGE, result.stderr[-2000:]
    error = json.loads(result.stdout)["error"]
    assert error["stage"] == "config" and error["message"] == said
    assert said in result.stderr and "pr0xypw" not in result.stdout + result.stderr
