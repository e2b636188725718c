"""The server's own account over real sockets: the reference endpoint sends Server-Timing,
openai-processing-ms, a request id and an edge header; the report splits the wait."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer

pytestmark = pytest.mark.integration

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())


def run_json(server: RefServer, *headers: str) -> tuple[dict[str, Any], str]:
    args = ["run", server.path("/v1/chat/completions"), "--json", "--timeout", "10"]
    assert server.ca is not None
    args += ["--cacert", server.ca, "-H", "x-promptpath-rate: 0", "-H", "x-promptpath-ttft-ms: 0"]
    for header in headers:
        args += ["-H", f"x-promptpath-response-header: {header}"]
    res = run_cli(*args)
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    return body, res.stderr


def test_server_timing_total_splits_the_wait(refserver_tls: RefServer) -> None:
    # 0.01 ms: less than any wait a real socket shows, so the split always has a remainder.
    body, stderr = run_json(
        refserver_tls,
        'Server-Timing: db;dur=0.005, total;dur=0.01;desc="whole request"',
        "cf-ray: 8f1c2d3e4f5a6b7c-FRA",
    )
    server = body["server"]
    assert server["time"] == {"ms": 0.01, "header": "server-timing", "metric": "total"}
    assert server["wait_ms"] == body["stages_ms"]["wait"]
    assert server["network_ms"] == pytest.approx(server["wait_ms"] - 0.01, abs=0.002)
    assert [m["name"] for m in server["server_timing"]] == ["db", "total"]
    assert server["server_timing"][1]["desc"] == "whole request"
    assert server["request_id"]["header"] == "x-request-id" and server["request_id"]["value"]
    assert server["edge"] == [
        {"header": "cf-ray", "value": "8f1c2d3e4f5a6b7c-FRA", "location": "FRA"}
    ]
    assert "SERVER the server says it spent 0.0 ms (server-timing total); the other" in stderr
    assert server["edge_name"] == {
        "name": "FRA",
        "cdn": "cloudflare",
        "header": "cf-ray",
        "value": "8f1c2d3e4f5a6b7c-FRA",
    }
    assert "edge FRA (cloudflare: cf-ray 8f1c2d3e4f5a6b7c-FRA)" in stderr


def test_a_processing_time_longer_than_the_wait_is_not_split(refserver_tls: RefServer) -> None:
    body, stderr = run_json(refserver_tls, "openai-processing-ms: 60000")
    server = body["server"]
    assert server["time"] == {"ms": 60000.0, "header": "openai-processing-ms", "metric": None}
    assert server["network_ms"] is None
    assert "more than the" in stderr and "wait measured here" in stderr


def test_no_timing_headers_leaves_only_the_request_id(refserver_tls: RefServer) -> None:
    body, stderr = run_json(refserver_tls)
    server = body["server"]
    assert server["time"] is None and server["figures"] == [] and server["network_ms"] is None
    assert server["request_id"]["header"] == "x-request-id"
    assert "server says" not in stderr
