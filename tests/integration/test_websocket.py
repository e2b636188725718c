"""WebSocket runs against the reference endpoint: the real CLI and the official SDK.

Facts checked by hand first (openai 3.57.0, websockets 17.4, hypercorn 0.18, loopback):
the SDK's ``responses.connect()`` dials ``ws://HOST/v1/responses`` and
``realtime.connect(model=M)`` ``/v1/realtime?model=M``, both with Authorization, Accept
and Content-Type application/json and its User-Agent, no subprotocol, no extension
offered, no OpenAI-Beta header; it sends ``{"type": "response.create", "model", "input",
...}`` with no ``stream`` field and can send a second one on the same socket. hypercorn
accepts permessage-deflate whenever it is offered, answers the upgrade with ``Upgrade:
WebSocket``, and closes with 1011 when the app returns without closing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from promptpath.core.exitcodes import ExitCode
from promptpath.server.tokens import answer_tokens
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer

ROOT = Path(__file__).parents[2]
SCHEMA = json.loads((ROOT / "promptpath/report/schema.json").read_text())


def ws_url(server: RefServer, path: str) -> str:
    scheme = "wss" if server.url.startswith("https") else "ws"
    return f"{scheme}://{server.host}:{server.port}{path}"


def run_json(server: RefServer, path: str, *args: str) -> tuple[int, dict[str, Any]]:
    extra = ["--cacert", server.ca] if server.ca else []
    result = run_cli("run", ws_url(server, path), "--json", *extra, *args)
    report = json.loads(result.stdout)
    jsonschema.validate(report, SCHEMA)
    return result.exit_code, report


def test_responses_over_ws_has_the_upgrade_stage_tokens_and_the_websocket_object(
    refserver_plain: RefServer,
) -> None:
    code, report = run_json(
        refserver_plain,
        "/v1/responses",
        "-H",
        "x-promptpath-tokens: 6",
        "-H",
        "x-promptpath-ttft-ms: 150",
    )
    assert code == ExitCode.OK, report["error"]
    assert report["http_version"] == "HTTP/1.1" and report["status"] == 101
    assert {"connect", "upgrade", "request", "wait", "first_token"} <= set(report["stages_ms"])
    m = report["milestones_ms"]
    assert m["connected"] <= m["request_sent"] <= m["ttfb"] <= m["first_event"] <= m["ttft"]
    # The first-token delay counts from the server's receipt of response.create: it lands
    # between the 101 and the first token, never in the upgrade.
    assert report["stages_ms"]["first_token"] >= 150
    assert report["stages_ms"]["upgrade"] < 150
    assert report["tokens"]["count"] == 6 and report["tokens"]["count_source"] == "usage"
    assert report["stream"]["end"] == "marker"
    ws = report["websocket"]
    assert ws["messages_sent"] == 1 and ws["messages"] >= 6 + 2
    assert ws["extensions"] == [] and ws["subprotocol"] is None
    assert ws["close"]["by"] == "client" and ws["close"]["code"] == 1000
    assert report["request"]["method"] == "GET"
    # The endpoint's send stamps ride on every message, as on its SSE events.
    assert report["tokens"]["arrivals"]["server_sent_ms"] is not None


def test_wss_negotiates_http11_by_alpn_and_deflate_when_the_client_offers_it(
    refserver_tls: RefServer,
) -> None:
    code, report = run_json(
        refserver_tls, "/v1/responses", "-H", "x-promptpath-tokens: 4", "--as", "browser"
    )
    assert code == ExitCode.OK, report["error"]
    assert report["tls"]["alpn_offered"] == ["http/1.1"] and report["tls"]["alpn"] == "http/1.1"
    assert "tls" in report["stages_ms"] and "upgrade" in report["stages_ms"]
    ws = report["websocket"]
    assert ws["extensions_offered"] and ws["extensions"][0].startswith("permessage-deflate")
    assert report["tokens"]["count"] == 4


def test_realtime_text_session_over_ws(refserver_plain: RefServer) -> None:
    code, report = run_json(
        refserver_plain, "/v1/realtime?model=gpt-realtime", "-H", "x-promptpath-tokens: 5"
    )
    assert code == ExitCode.OK, report["error"]
    assert report["target"]["provider"] == "realtime"
    assert report["tokens"]["count"] == 5
    assert report["websocket"]["messages_sent"] == 2  # the user's turn, then response.create


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/realtime?model=m"])
def test_an_in_band_error_exits_7_with_the_tokens_before_it(
    refserver_plain: RefServer, path: str
) -> None:
    code, report = run_json(refserver_plain, path, "-H", "x-promptpath-error-after: 3")
    assert code == ExitCode.STREAM
    assert report["error"]["kind"] == "error_event" and report["error"]["stage"] == "stream"
    assert report["tokens"]["events"] == 3


def test_a_close_mid_stream_is_truncation_with_its_code(refserver_plain: RefServer) -> None:
    code, report = run_json(
        refserver_plain,
        "/v1/responses",
        "-H",
        "x-promptpath-truncate-after: 2",
        "-H",
        "x-promptpath-close-code: 1012",
    )
    assert code == ExitCode.STREAM
    assert report["error"]["kind"] == "truncated"
    assert "1012 service restart" in report["error"]["message"]
    assert report["stream"]["end"] == "truncated" and report["tokens"]["events"] == 2
    close = report["websocket"]["close"]
    assert (close["by"], close["code"], close["reason"]) == ("server", 1012, "truncate-after")


def test_an_answer_other_than_101_is_an_upgrade_error(refserver_plain: RefServer) -> None:
    code, report = run_json(
        refserver_plain,
        "/v1/responses",
        "-H",
        "x-promptpath-status: 429",
        "-H",
        "authorization: Bearer sk-do-not-print-0123456789abcdef",
    )
    assert code == ExitCode.HTTP_STATUS
    assert report["error"]["stage"] == "upgrade" and report["error"]["kind"] == "http_429"
    assert report["status"] == 429 and "Rate limit" in report["error"]["message"]
    assert "sk-do-not-print" not in json.dumps(report)


def test_pings_go_out_during_a_quiet_wait_and_their_pongs_are_timed(
    refserver_plain: RefServer,
) -> None:
    code, report = run_json(
        refserver_plain,
        "/v1/responses",
        "-H",
        "x-promptpath-ttft-ms: 300",
        "-H",
        "x-promptpath-tokens: 2",
        "--ws-ping-ms",
        "40",
        "--ws-ping-count",
        "3",
    )
    assert code == ExitCode.OK, report["error"]
    pings = report["websocket"]["pings"]
    # 300 ms of silence holds three 40 ms intervals with room to spare on a loaded machine.
    assert pings["sent"] == 3 and pings["answered"] == 3
    assert all(0 < rtt < 300 for rtt in pings["rtt_ms"])
    assert pings["tcp_connect_ms"] is not None


def test_the_terminal_report_names_the_websocket(refserver_plain: RefServer) -> None:
    result = run_cli(
        "run",
        ws_url(refserver_plain, "/v1/responses"),
        "-H",
        "x-promptpath-truncate-after: 1",
        "-H",
        "x-promptpath-close-code: 4001",
    )
    assert result.exit_code == ExitCode.STREAM
    # The report goes to stderr when stdout is not a terminal and no --json is asked for.
    report = result.stdout + result.stderr
    assert "closed by server: 4001 application-defined 'truncate-after'" in report
    assert "FAILED in stream: stream truncated after 1 tokens" in report


# -- the official SDK reads the endpoint's emulation -------------------------------------
def test_the_openai_sdk_streams_both_websocket_dialects_from_serve(
    refserver_plain: RefServer,
) -> None:
    base = f"http://{refserver_plain.host}:{refserver_plain.port}/v1"

    async def main() -> tuple[str, str, str]:
        client = openai.AsyncOpenAI(api_key="sk-test", base_url=base)
        async with client.responses.connect() as conn:
            texts = []
            for cap in (5, 3):  # two responses on one socket, as the SDK allows
                await conn.response.create(model="gpt-5", input="hi", max_output_tokens=cap)
                parts = []
                async for event in conn:
                    if event.type == "response.output_text.delta":
                        parts.append(event.delta)
                    if event.type in ("response.completed", "response.incomplete"):
                        break
                texts.append("".join(parts))
        async with client.realtime.connect(model="gpt-realtime") as rt:
            await rt.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "hi"}],
                }
            )
            await rt.response.create(
                response={"output_modalities": ["text"], "max_output_tokens": 4}
            )
            parts = []
            async for event in rt:
                if event.type == "response.output_text.delta":
                    parts.append(event.delta)
                if event.type == "response.done":
                    assert event.response.usage is not None
                    assert event.response.usage.output_tokens == 4
                    break
        return texts[0], texts[1], "".join(parts)

    first, second, realtime = asyncio.run(asyncio.wait_for(main(), 20))
    assert first == "".join(answer_tokens(5))
    assert second == "".join(answer_tokens(3))
    assert realtime == "".join(answer_tokens(4))
