"""The ratelimit probe over real sockets: the reference endpoint sends each provider's
rate-limit headers (and a 429 with them); the probe reads them from the trace alone."""

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


def probe(server: RefServer, path: str, *controls: str) -> tuple[int, dict[str, Any], str]:
    args = ["run", server.path(path), "--probe", "ratelimit", "--json", "--timeout", "10"]
    args += ["-H", "x-promptpath-rate: 0", "-H", "x-promptpath-ttft-ms: 0"]
    for control in controls:
        args += ["-H", control]
    res = run_cli(*args)
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    return res.exit_code, body, res.stderr


def header(value: str) -> str:
    return f"x-promptpath-response-header: {value}"


def finding(body: dict[str, Any]) -> dict[str, Any]:
    (found,) = [f for f in body["findings"] if f["probe"] == "ratelimit"]
    return found


def test_openai_headers_low_on_tokens_warn(refserver_plain: RefServer) -> None:
    code, body, stderr = probe(
        refserver_plain,
        "/v1/chat/completions",
        header("x-ratelimit-limit-requests: 500"),
        header("x-ratelimit-remaining-requests: 499"),
        header("x-ratelimit-reset-requests: 120ms"),
        header("x-ratelimit-limit-tokens: 150000"),
        header("x-ratelimit-remaining-tokens: 1000"),
        header("x-ratelimit-reset-tokens: 6m0s"),
    )
    assert code == 0  # a warning is below the default --fail-on
    found = finding(body)
    assert found["verdict"] == "warn"
    assert "tokens 1,000/150,000 left (0.7 %), resets in 6 min" in found["summary"]
    assert [d["name"] for d in found["evidence"]["dimensions"]] == ["requests", "tokens"]
    assert "[WARN] ratelimit: close to the limit" in stderr


def test_anthropic_headers_within_limits_pass(refserver_plain: RefServer) -> None:
    controls = [
        header(f"anthropic-ratelimit-{dim}-{field}: {value}")
        for dim in ("requests", "tokens", "input-tokens", "output-tokens")
        for field, value in (("limit", "4000"), ("remaining", "3999"))
    ]
    code, body, _ = probe(refserver_plain, "/v1/messages", *controls)
    found = finding(body)
    assert code == 0 and found["verdict"] == "pass"
    names = [d["name"] for d in found["evidence"]["dimensions"]]
    assert names == ["requests", "tokens", "input-tokens", "output-tokens"]


def test_a_clean_endpoint_passes(refserver_plain: RefServer) -> None:
    code, body, _ = probe(refserver_plain, "/v1/chat/completions")
    assert code == 0 and finding(body)["verdict"] == "pass"


def test_a_429_with_the_applications_headers_names_the_application(
    refserver_plain: RefServer,
) -> None:
    code, body, stderr = probe(
        refserver_plain,
        "/v1/chat/completions",
        "x-promptpath-status: 429",
        header('RateLimit-Policy: "default";q=60;w=60'),
        header('RateLimit: "default";r=0;t=20'),
    )
    assert code == ExitCode.HTTP_STATUS and body["error"]["kind"] == "http_429"
    found = finding(body)
    assert found["verdict"] == "fail" and found["evidence"]["layer"] == "application"
    assert found["summary"].startswith("429 from the application")
    assert found["evidence"]["retry_after_s"] is not None  # the endpoint's 429 carries one
    assert "[FAIL] ratelimit: 429 from the application" in stderr
