"""`promptpath mcp` driven by the MCP SDK's own client over stdio (a subprocess, as an
assistant starts it), against the reference endpoint on loopback.

Facts checked by hand first (`promptpath mcp --config lab.toml` with the SDK's Client):
tools/list answers the three tools with the schemas tools.py makes; a trace of the
reference endpoint answers the verdict line and the promptpath.run/1 document; the cost
notice arrives as a notifications/message before the tools/call result; the SDK's server
does not check arguments against the input schema itself (tools.checked does).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest

from promptpath.plan.flags import BY_DEST
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

KEY = "sk-mcp-never-returned-0123456789abcdef"
SCHEMA = json.loads(
    (Path(__file__).resolve().parents[2] / "promptpath/report/schema.json").read_text()
)


def _config(
    path: Path, server: RefServer, *, budget: int = 2000, max_tokens: int = 16, ttft_ms: int = 30
) -> Path:
    assert server.ca is not None
    path.write_text(
        f"""
[mcp]
connection_token_budget = {budget}

[modules.chat]
provider = "openai"
model = "gpt-4o-mini"
api_key_env = "PP_MCP_TEST_KEY"
max_tokens = {max_tokens}
timeout = 20
http = "2"
headers = {{ "x-promptpath-ttft-ms" = "{ttft_ms}", "x-promptpath-tokens" = "5" }}

[targets.ref]
url = "{server.path("/v1/chat/completions")}"
cacert = "{server.ca}"
"""
    )
    return path


class Connected:
    """What one client connection saw: the results of its calls, the log notices and the
    progress notifications."""

    def __init__(self) -> None:
        self.notices: list[str] = []
        self.progress: list[str] = []
        self.texts: list[str] = []

    async def progressed(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append(str(message))


async def _session(config: Path, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, ...]:
    seen = Connected()

    async def logged(params: Any) -> None:
        seen.notices.append(str(params.data))

    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "promptpath", "mcp", "--config", str(config)],
        env={"PP_MCP_TEST_KEY": KEY},
    )
    with anyio.fail_after(60):
        return await _calls(server, logged, seen, calls)


async def _calls(
    server: StdioServerParameters, logged: Any, seen: Connected, calls: list[Any]
) -> tuple[Any, ...]:
    results = []
    async with Client(server, logging_callback=logged, log_level="info") as client:
        tools = await client.list_tools()
        for name, arguments in calls:
            result = await client.call_tool(name, arguments, progress_callback=seen.progressed)
            results.append((result, len(seen.notices)))
            seen.texts += [block.text for block in result.content]
            seen.texts.append(json.dumps(result.structured_content))
    return tools, results, seen


def _call(config: Path, *calls: tuple[str, dict[str, Any]]) -> tuple[Any, ...]:
    result: tuple[Any, ...] = anyio.run(_session, config, list(calls))
    return result


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory, refserver_tls: RefServer) -> Iterator[Any]:
    """One client connection (one server process: its start-up, the SDK's imports, is most
    of each one's cost) making every call the allow-list, trace, probes and diff tests
    read, with a listening loopback socket that the refused URL names."""
    tmp = tmp_path_factory.mktemp("mcp")
    config = _config(tmp / "mcp.toml", refserver_tls)
    assert refserver_tls.ca is not None
    saved = []
    for name in ("before.json", "after.json"):
        result = run_cli(
            *("run", refserver_tls.path("/v1/chat/completions"), "--cacert", refserver_tls.ca),
            *("--json", "--http", "2", "-H", "x-promptpath-tokens: 5"),
            environ={"OPENAI_API_KEY": KEY},
        )
        assert result.exit_code == 0, result.stderr
        (tmp / name).write_text(result.stdout)
        saved.append(str(tmp / name))
    (tmp / "not-ours.json").write_text('{"hello": 1}')
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        port = listener.getsockname()[1]
        tools, results, seen = _call(
            config,
            ("trace", {"target": "ref"}),
            ("trace", {"target": f"https://127.0.0.1:{port}/v1/chat/completions"}),
            ("run_probes", {"target": "not-configured", "probe": ["tls"]}),
            ("trace", {"target": "ref", "api_key_env": "HOME"}),
            ("run_probes", {"target": "ref", "probe": ["tls"], "tls_warn_days": 3}),
            ("diff_reports", {"before": saved[0], "after": saved[1]}),
            ("diff_reports", {"before": str(tmp / "not-ours.json"), "after": saved[1]}),
        )
        # Observed by hand: a connect to a listening socket waits in its accept queue
        # even when nobody accepts. None does.
        with pytest.raises(BlockingIOError):
            listener.accept()
        # The check can fail: a connection that was made is there to accept.
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            time.sleep(0.05)
            accepted, _ = listener.accept()
            accepted.close()
    yield tools, results, seen


def test_the_tools_and_their_schemas_come_from_the_option_table(session: Any) -> None:
    tools, _, _ = session
    by_name = {t.name: t for t in tools.tools}
    assert set(by_name) == {"list_profiles", "trace", "run_probes", "diff_reports"}
    trace = by_name["trace"].input_schema
    assert trace["required"] == ["target"] and trace["additionalProperties"] is False
    assert trace["properties"]["max_tokens"]["description"] == (
        f"--max-tokens: {BY_DEST['max_tokens'].help}"
    )
    assert trace["properties"]["http"]["enum"] == BY_DEST["http"].metavar.split("|")
    # Nothing that chooses a key or where packets go is a tool argument.
    for name in ("api_key_env", "header", "resolve", "connect_to", "proxy", "otlp_endpoint"):
        assert name not in trace["properties"]
    probes = by_name["run_probes"].input_schema["properties"]["probe"]
    assert "buffering" in probes["items"]["enum"] and "all" in probes["items"]["enum"]
    diff = by_name["diff_reports"].input_schema["properties"]
    assert diff["protocol"]["enum"] == ["2", "3"]


def test_a_trace_of_the_reference_endpoint_is_the_run_document_and_its_verdict(
    session: Any,
) -> None:
    _, [(result, notices), *_], seen = session
    assert result.is_error is False, result.content[0].text
    report = result.structured_content
    verdict, document, cost_line = (block.text for block in result.content)
    assert json.loads(document) == report
    assert report["schema"] == "promptpath.run/1" and report["ok"] is True
    assert verdict == report["headline"] and verdict.startswith("OK")
    assert report["tokens"]["count"] == 5
    jsonschema.validate(report, SCHEMA)
    # The cost was stated before the run: its notice came before the result; the result
    # carries it beside the document, never in it.
    assert notices == 1 and seen.notices[0].startswith("cost of ref: ≤16 tokens")
    assert cost_line == seen.notices[0] and "cost" not in report
    assert result.meta["promptpath/cost"]["tokens"] == 16


def test_a_target_outside_the_allow_list_is_refused_without_a_connection(session: Any) -> None:
    _, results, _ = session
    (url_refused, _), (name_refused, _), (argument_refused, _) = results[1:4]
    for result in (url_refused, name_refused):
        assert result.is_error is True
        assert result.structured_content["error"]["kind"] == "not_allowed"
        assert result.structured_content["exit_code"] == 2
        assert "allow-list" in result.content[0].text
    assert argument_refused.is_error is True
    assert "takes no argument 'api_key_env'" in argument_refused.content[0].text
    # (the socket the URL names saw no connection: the session fixture checked it)


def test_probes_state_their_cost_first_and_diff_reads_two_saved_reports(session: Any) -> None:
    _, results, seen = session
    (probed, notices), (diffed, _), (refused, _) = results[4:7]
    assert probed.is_error is False
    assert notices == 2 and "tls (" in seen.notices[1]  # the probe's cost, stated first
    # and as progress, which each call here asked for (progress_callback)
    assert seen.progress == seen.notices
    assert [f["probe"] for f in probed.structured_content["findings"]] == ["tls"]
    assert probed.meta["promptpath/cost"]["probes"][0]["probe"] == "tls"
    assert diffed.is_error is False
    assert diffed.structured_content["schema"] == "promptpath.diff/1"
    assert diffed.content[0].text.split(":", 1)[0] in ("SAME", "CHANGED", "REGRESSED")
    assert diffed.content[0].text.endswith(diffed.structured_content["headline"])
    assert refused.is_error is True and "not a promptpath document" in refused.content[0].text


def test_no_result_or_notice_carries_the_key(session: Any) -> None:
    _, _, seen = session
    # Two text blocks and the structured content per call, and a run's cost line.
    assert len(seen.texts) == 7 * 3 + 2
    assert all(KEY not in text for text in seen.texts + seen.notices + seen.progress)


def test_the_spend_limit_refuses_the_run_that_would_go_over(
    tmp_path: Path, refserver_tls: RefServer
) -> None:
    config = _config(tmp_path / "tight.toml", refserver_tls, budget=40, max_tokens=16)
    _, results, _ = _call(
        config,
        ("trace", {"target": "ref"}),
        ("trace", {"target": "ref", "dry_run": True}),
        ("trace", {"target": "ref"}),
        ("trace", {"target": "ref"}),
        ("list_profiles", {}),
    )
    (first, _), (dry, _), (second, _), (third, _), (profiles, _) = results
    assert first.is_error is False and second.is_error is False
    assert dry.structured_content["allowed"] is True and dry.structured_content["tokens"] == 16
    assert third.is_error is True
    error = third.structured_content["error"]
    assert error["kind"] == "over_budget"
    assert "8 of its 40 left" in error["message"]
    assert profiles.structured_content["spent"] == 32 and profiles.structured_content["left"] == 8


def _rpc(process: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert process.stdin is not None
    process.stdin.write((json.dumps(message) + "\n").encode())
    process.stdin.flush()


def _read(process: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert process.stdout is not None
    line = process.stdout.readline()
    assert line, "the server closed stdout"
    message: dict[str, Any] = json.loads(line)
    return message


def _trace(process: subprocess.Popen[bytes], call: int, **arguments: object) -> None:
    params = {"name": "trace", "arguments": {"target": "ref", **arguments}}
    _rpc(process, {"jsonrpc": "2.0", "id": call, "method": "tools/call", "params": params})


@pytest.fixture(scope="module")
def slow(tmp_path_factory: pytest.TempPathFactory, refserver_tls: RefServer) -> dict[str, Any]:
    """A server whose target answers its first token after 5 s: one call with a 0.5 s
    timeout, then one cut by SIGTERM. The SDK's client hides the server's process, so
    the handshake is spoken by hand (initialize, initialized, tools/call)."""
    config = _config(tmp_path_factory.mktemp("slow") / "slow.toml", refserver_tls, ttft_ms=5000)
    process = subprocess.Popen(
        [sys.executable, "-m", "promptpath", "mcp", "--config", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={"PP_MCP_TEST_KEY": KEY, "PATH": os.environ.get("PATH", "")},
    )
    try:
        _rpc(process, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        }})  # fmt: skip
        assert _read(process)["result"]["serverInfo"]["name"] == "promptpath"
        _rpc(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _trace(process, 2, timeout=0.5)
        assert _read(process)["method"] == "notifications/message"
        timed_out = _read(process)["result"]
        _trace(process, 3)
        assert _read(process)["method"] == "notifications/message"  # the cost, first
        time.sleep(0.3)  # the request is out; its first token is 5 s away
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        cut = _read(process)["result"]
        code = process.wait(timeout=10)
        took = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return {"timed_out": timed_out, "cut": cut, "code": code, "took": took}


def test_the_calls_timeout_ends_the_run_as_a_run_times_out(slow: dict[str, Any]) -> None:
    answer = slow["timed_out"]
    report = answer["structuredContent"]
    assert answer["isError"] is False  # a run that failed is a report, not a refusal
    assert report["ok"] is False and report["exit_code"] == 8
    assert report["error"]["kind"] == "timeout"
    assert answer["content"][0]["text"] == report["headline"]


def test_sigterm_cuts_the_run_in_flight_answers_it_and_exits_143(slow: dict[str, Any]) -> None:
    report = slow["cut"]["structuredContent"]
    assert report["exit_code"] == 143 and report["error"]["kind"] == "interrupted"
    assert "SIGTERM" in slow["cut"]["content"][0]["text"]
    assert slow["code"] == 143
    # Measured: 0.23 s idle (the cut, the answer's write, then the exit); 20 runs at load
    # 5-11 (the other helpers' tests): 0.246-0.289 s, all passed. The bound is the
    # server's grace for the cut runs (2 s) plus the write's 0.2 s and a margin: far under
    # the 5 s the run would have taken.
    assert slow["took"] < 4.0
