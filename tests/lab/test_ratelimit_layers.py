"""Which layer answered a 429: nginx ``limit_req`` (the edge) or the endpoint behind it
(the application), through the same real nginx.

Checked by hand with nginx 1.22.1 (``limit_req_zone ... rate=1r/m; limit_req_status 429``):
its own 429 carries only Server (nginx/1.22.1), Date, Content-Type text/html,
Content-Length and Connection: no Retry-After, no rate-limit header. The endpoint's 429
through it arrives with nginx's Server header (nginx replaces the upstream's) but keeps
the upstream's Retry-After and x-ratelimit-* headers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers import proxylab
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
# One request a minute: the first passes, the next within the minute gets nginx's 429.
LIMIT_HTTP = "limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;\n    limit_req_status 429;"


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def ratelimit(url: str, *headers: str) -> tuple[int, dict[str, Any]]:
    args = ["run", url, "--probe", "ratelimit", "--json", "--timeout", "10"]
    args += ["-H", "x-promptpath-rate: 0", "-H", "x-promptpath-ttft-ms: 0"]
    for header in headers:
        args += ["-H", header]
    res = run_cli(*args)
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    (found,) = [f for f in body["findings"] if f["probe"] == "ratelimit"]
    return res.exit_code, found


def test_nginx_limit_req_is_the_edge(ref: RefServer, tmp_path: Path) -> None:
    with proxylab.nginx(ref.port, tmp_path, http=LIMIT_HTTP, location="limit_req zone=one;") as ng:
        url = ng.path("/v1/chat/completions")
        first_code, first = ratelimit(url)
        code, found = ratelimit(url)
    assert first_code == 0 and first["verdict"] == "pass"
    assert code == ExitCode.HTTP_STATUS
    assert found["verdict"] == "fail" and found["evidence"]["layer"] == "edge"
    assert found["evidence"]["edge"] == ["nginx"]
    assert found["summary"].startswith("429 from the edge (nginx)")


def test_the_endpoints_429_through_nginx_is_the_application(ref: RefServer, tmp_path: Path) -> None:
    with proxylab.nginx(ref.port, tmp_path) as ng:
        code, found = ratelimit(
            ng.path("/v1/chat/completions"),
            "x-promptpath-status: 429",
            "x-promptpath-response-header: x-ratelimit-limit-requests: 500",
            "x-promptpath-response-header: x-ratelimit-remaining-requests: 0",
        )
    assert code == ExitCode.HTTP_STATUS
    assert found["verdict"] == "fail" and found["evidence"]["layer"] == "application"
    assert found["evidence"]["headers"]["server"].startswith("nginx")
    assert "requests 0/500 left" in found["summary"]
