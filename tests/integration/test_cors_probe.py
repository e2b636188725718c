"""The cors probe against the reference endpoint: a preflight it refuses (405, no CORS
headers) and a wildcard it adds to every answer. nginx configurations: tests/lab."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.helpers.cli import run_cli
from tests.integration.conftest import StartRefServer

pytestmark = pytest.mark.integration

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
KEY = {"OPENAI_API_KEY": "sk-test-0123456789abcdef"}


def cors(url: str, environ: dict[str, str]) -> dict[str, Any]:
    res = run_cli(
        "run", url, "--probe", "cors", "--json", "--timeout", "10",
        "-H", "x-promptpath-rate: 0", "-H", "x-promptpath-ttft-ms: 0", environ=environ,
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    (found,) = [f for f in body["findings"] if f["probe"] == "cors"]
    return found


def test_no_cors_headers_pass(start_refserver: StartRefServer) -> None:
    srv = start_refserver(tls=False)
    found = cors(srv.path("/v1/chat/completions"), KEY)
    assert found["verdict"] == "pass"
    assert found["summary"].startswith("no CORS headers")
    # Checked by hand: the endpoint answers OPTIONS with 405 and a JSON error.
    assert found["evidence"]["preflight"]["status"] == 405


def test_a_wildcard_on_an_endpoint_that_took_our_key_warns(
    start_refserver: StartRefServer,
) -> None:
    srv = start_refserver(
        tls=False, extra_args=["--response-header", "Access-Control-Allow-Origin: *"]
    )
    found = cors(srv.path("/v1/chat/completions"), KEY)
    assert found["verdict"] == "warn", found
    assert found["evidence"]["takes_key"] is True
    assert found["evidence"]["response_headers"] == {"access-control-allow-origin": "*"}


def test_the_same_wildcard_without_a_key_passes(start_refserver: StartRefServer) -> None:
    srv = start_refserver(
        tls=False, extra_args=["--response-header", "Access-Control-Allow-Origin: *"]
    )
    found = cors(srv.path("/v1/chat/completions"), {})
    assert found["verdict"] == "pass" and "takes no key" in found["summary"]
