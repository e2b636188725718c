"""--connect-to over real sockets: the URL's host for SNI, Host and the certificate check,
another host and port for DNS and the connection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
#: A port nothing on loopback serves the reference API on: only the rule can reach it.
URL_PORT = 1


def run_json(*args: str) -> tuple[int, dict[str, Any], str]:
    res = run_cli("run", *args, "--json")
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    return res.exit_code, body, res.stderr


@pytest.mark.parametrize("http", ["2", "3"])
@pytest.mark.parametrize(
    "rule",
    ["localhost:{url_port}:127.0.0.1:{port}", ":{url_port}:localhost:{port}", "::127.0.0.1:{port}"],
    ids=["exact", "any-host-by-name", "any-host-any-port"],
)
def test_connect_to_dials_the_other_address_while_sni_and_host_stay(
    refserver_tls: RefServer, http: str, rule: str
) -> None:
    spec = rule.format(url_port=URL_PORT, port=refserver_tls.port)
    code, body, stderr = run_json(
        f"https://localhost:{URL_PORT}/v1/chat/completions",
        "--connect-to",
        spec,
        "--cacert",
        str(refserver_tls.ca),
        "--http",
        http,
        "-4",
    )
    assert code == 0, body["error"]
    assert body["target"]["connect_to"]["rule"] == spec
    assert body["target"]["connect_to"]["port"] == refserver_tls.port
    assert body["address"] == {"ip": "127.0.0.1", "port": refserver_tls.port, "family": "ipv4"}
    assert body["tls"]["sni"] == "localhost" and body["tls"]["verified"] is True
    assert f"--connect-to {body['target']['connect_to']['host']}:{refserver_tls.port}" in stderr


def test_a_rule_for_another_host_does_not_apply(refserver_tls: RefServer) -> None:
    code, body, _ = run_json(
        f"https://localhost:{refserver_tls.port}/v1/chat/completions",
        "--connect-to",
        f"elsewhere.example:{refserver_tls.port}:127.0.0.1:{URL_PORT}",
        "--cacert",
        str(refserver_tls.ca),
    )
    assert code == 0 and body["target"]["connect_to"] is None
    assert body["address"]["port"] == refserver_tls.port


def test_resolve_pins_the_connect_to_destination_as_in_curl(refserver_tls: RefServer) -> None:
    code, body, _ = run_json(
        f"https://localhost:{URL_PORT}/v1/chat/completions",
        "--connect-to",
        f"localhost:{URL_PORT}:backend.invalid:{refserver_tls.port}",
        "--resolve",
        f"backend.invalid:{refserver_tls.port}:127.0.0.1",
        "--cacert",
        str(refserver_tls.ca),
    )
    assert code == 0, body["error"]
    assert body["dns"]["resolver"] == "--resolve"
    assert body["tls"]["sni"] == "localhost"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("localhost:443:127.0.0.1", "4 fields"),
        ("a:1:b:2:c", "4 fields"),
        ("localhost:443:127.0.0.1:http", "not a port"),
        ("localhost:99999:127.0.0.1:443", "not a port"),
    ],
)
def test_bad_connect_to_is_one_line_exit_2(spec: str, words: str) -> None:
    res = run_cli("run", "https://localhost/v1/chat/completions", "--connect-to", spec)
    assert res.exit_code == ExitCode.USAGE
    assert res.stdout == "" and res.stderr.count("\n") == 1
    assert res.stderr.startswith("promptpath: --connect-to") and words in res.stderr
