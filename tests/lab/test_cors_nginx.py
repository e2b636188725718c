"""The cors probe through real nginx configurations that add CORS headers.

Checked by hand with nginx 1.22.1 in front of the reference endpoint (preflight: OPTIONS,
Origin https://promptpath-cors-check.invalid, Access-Control-Request-Method POST,
Access-Control-Request-Headers "authorization, content-type"):
- wildcard with an auth-checking location: OPTIONS → 204 with Allow-Origin *, Allow-Methods,
  Allow-Headers "authorization, content-type"; POST without Authorization → 401 and with it
  → 200, both with Allow-Origin *;
- reflected origin: OPTIONS → 204 echoing the Origin, Allow-Credentials true; a POST
  without Origin gets Allow-Credentials true and no Allow-Origin (nginx skips an
  add_header whose value is empty);
- fixed list (a map from $http_origin): our unrelated Origin gets no Allow-Origin, only
  Allow-Headers; https://app.example.com gets itself back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from tests.helpers import proxylab
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
KEY = "sk-test-0123456789abcdef"

WILDCARD = """
            if ($request_method = OPTIONS) {
                add_header Access-Control-Allow-Origin * always;
                add_header Access-Control-Allow-Methods "POST, OPTIONS" always;
                add_header Access-Control-Allow-Headers "authorization, content-type" always;
                return 204;
            }
            if ($http_authorization = "") { return 401; }
            add_header Access-Control-Allow-Origin * always;"""
REFLECTED = """
            if ($request_method = OPTIONS) {
                add_header Access-Control-Allow-Origin $http_origin always;
                add_header Access-Control-Allow-Credentials true always;
                add_header Access-Control-Allow-Headers "authorization, content-type" always;
                return 204;
            }
            add_header Access-Control-Allow-Origin $http_origin always;
            add_header Access-Control-Allow-Credentials true always;"""
FIXED_HTTP = 'map $http_origin $cors_origin { default ""; "https://app.example.com" $http_origin; }'
FIXED = """
            if ($request_method = OPTIONS) {
                add_header Access-Control-Allow-Origin $cors_origin always;
                add_header Access-Control-Allow-Headers "authorization, content-type" always;
                add_header Vary Origin always;
                return 204;
            }
            add_header Access-Control-Allow-Origin $cors_origin always;
            add_header Vary Origin always;"""


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def cors(url: str) -> dict[str, Any]:
    res = run_cli(
        "run", url, "--probe", "cors", "--json", "--timeout", "10",
        "-H", "x-promptpath-rate: 0", "-H", "x-promptpath-ttft-ms: 0",
        environ={"OPENAI_API_KEY": KEY},
    )  # fmt: skip
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    (found,) = [f for f in body["findings"] if f["probe"] == "cors"]
    return found


def test_wildcard_on_an_auth_checking_location_fails(ref: RefServer, tmp_path: Path) -> None:
    log = tmp_path / "requests.log"
    http = "log_format seen '$request_method auth=[$http_authorization] origin=[$http_origin]';"
    location = f"{WILDCARD}\n            access_log {log} seen;"
    with proxylab.nginx(ref.port, tmp_path, http=http, location=location) as ng:
        found = cors(ng.path("/v1/chat/completions"))
    assert found["verdict"] == "fail", found
    assert found["summary"].startswith("allows Access-Control-Allow-Origin: * with Authorization")
    assert found["evidence"]["preflight"]["headers"]["access-control-allow-origin"] == "*"
    lines = log.read_text().splitlines()
    # nginx saw the preflight without a key (it logs an empty variable as "-"), from our
    # unrelated origin.
    preflight = [line for line in lines if line.startswith("OPTIONS")]
    assert preflight == ["OPTIONS auth=[-] origin=[https://promptpath-cors-check.invalid]"]
    assert any(line.startswith(f"POST auth=[Bearer {KEY}]") for line in lines)


def test_reflected_origin_with_credentials_fails(ref: RefServer, tmp_path: Path) -> None:
    with proxylab.nginx(ref.port, tmp_path, location=REFLECTED) as ng:
        found = cors(ng.path("/v1/chat/completions"))
    assert found["verdict"] == "fail", found
    assert found["summary"].startswith("reflects any origin with credentials allowed")
    headers = found["evidence"]["preflight"]["headers"]
    assert headers["access-control-allow-credentials"] == "true"


def test_a_fixed_list_passes(ref: RefServer, tmp_path: Path) -> None:
    with proxylab.nginx(ref.port, tmp_path, http=FIXED_HTTP, location=FIXED) as ng:
        found = cors(ng.path("/v1/chat/completions"))
    assert found["verdict"] == "pass", found
    assert "access-control-allow-origin" not in found["evidence"]["preflight"]["headers"]
