"""The WebSocket probes against serve directly: the upgrade check (a pass with its pong, a
refusal by the status control, an http:// target skipped), buffering over WebSocket in
canary mode (one request, no identity comparison) and a quiet socket that serve keeps open."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer
from tests.integration.test_websocket import SCHEMA, ws_url

pytestmark = pytest.mark.integration


def probe(server: RefServer, path: str, *args: str) -> dict[str, Any]:
    result = run_cli("probe", ws_url(server, path), *args, "--json", "--timeout", "20")
    report: dict[str, Any] = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    return report


def finding(report: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(f for f in report["findings"] if f["probe"] == name)
    return found


def test_upgrade_check_passes_with_a_pong_and_sends_no_message(refserver_plain: RefServer) -> None:
    report = probe(
        refserver_plain, "/v1/realtime?model=m", "upgrade", "-H", "x-promptpath-tokens: 3"
    )
    up = finding(report, "upgrade")
    assert up["verdict"] == "pass", up
    ev = up["evidence"]
    assert ev["status"] == 101 and ev["pings"] == 1 and ev["pong_ms"] is not None
    # Realtime greets with session.created unasked; nothing we sent was answered.
    assert ev["messages_unasked"] == 1 and ev["plain_get"] is None


def test_upgrade_check_names_a_refusal_with_its_status_and_server(
    refserver_plain: RefServer,
) -> None:
    report = probe(refserver_plain, "/v1/responses", "upgrade", "-H", "x-promptpath-status: 429")
    up = finding(report, "upgrade")
    assert up["verdict"] == "fail" and up["evidence"]["failure"] == "refused", up
    assert "refused with 429 (Server: hypercorn-h11)" in up["summary"]
    # A plain GET there gets 405: not the same answer, so not a plain request forwarded.
    assert up["evidence"]["plain_get"]["status"] == 405


def test_upgrade_check_skips_an_http_target(refserver_plain: RefServer) -> None:
    result = run_cli(
        "probe",
        refserver_plain.url + "/v1/responses",
        "upgrade",
        "--json",
        "-H",
        "x-promptpath-tokens: 3",
    )
    up = finding(json.loads(result.stdout), "upgrade")
    assert up["verdict"] == "skip"


def test_buffering_over_websocket_judges_messages_by_their_send_stamps(
    refserver_plain: RefServer,
) -> None:
    report = probe(
        refserver_plain, "/v1/responses", "buffering", "--canary", "-H", "x-promptpath-tokens: 3"
    )
    buf = finding(report, "buffering")
    assert buf["verdict"] == "pass", buf
    request = buf["evidence"]["request"]
    assert request["status"] == 101 and request["accept_encoding"] is None
    assert request["websocket"]["messages"] >= 60
    assert "identity_check" not in buf["evidence"] or buf["evidence"]["identity_check"] is None


def test_idle_timeout_over_websocket_sees_serve_keep_a_quiet_socket_open(
    refserver_plain: RefServer,
) -> None:
    report = probe(
        refserver_plain,
        "/v1/responses",
        "idle-timeout",
        "--idle-max",
        "1.5",
        "-H",
        "x-promptpath-tokens: 3",
    )
    idle = finding(report, "idle-timeout")
    assert idle["verdict"] == "pass", idle
    assert idle["evidence"]["transport"] == "websocket"
    assert idle["evidence"]["quiet"]["close"] is None and idle["evidence"]["pinged"] is None
