"""The real CLI in-process: options, exit codes, --json against the schema, secrets.

``main(argv, env=Environment(...))`` with StringIO streams and a dict environment; a few
tests at the end run the installed entry point in a subprocess.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from promptpath.core.timeline import MILESTONES
from tests.helpers.cli import CliResult, run_cli
from tests.helpers.refserver import RefServer, reference_server

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
SECRET = "sk-test-DO-NOT-LEAK-8f3a"


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    """A reference endpoint that demands the key (so a 200 proves we sent it)."""
    with reference_server(
        tls=True,
        tmp_path=tmp_path_factory.mktemp("keyed"),
        extra_args=["--api-key-env", "PP_TEST_SERVER_KEY"],
        env={"PP_TEST_SERVER_KEY": SECRET},
    ) as server:
        yield server


def invoke(*args: str, env: Mapping[str, str] | None = None) -> CliResult:
    return run_cli(*args, environ=env)


def url(server: RefServer, path: str = "/v1/chat/completions") -> str:
    return f"https://localhost:{server.port}{path}"


def run_json(*args: str, env: Mapping[str, str] | None = None) -> tuple[int, dict[str, Any], str]:
    res = invoke("run", *args, "--json", env=env)
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    return res.exit_code, body, res.stderr


def test_version_goes_to_the_environments_stdout() -> None:
    res = invoke("--version")
    assert res.exit_code == 0 and res.stdout.startswith("promptpath ") and res.stderr == ""


def test_help_goes_to_the_environments_stdout() -> None:
    res = invoke("run", "--help")
    assert res.exit_code == 0 and res.stderr == ""
    assert res.stdout.startswith("Usage: promptpath run ") and "--compare-http" in res.stdout


def test_json_output_validates_against_the_schema(ref: RefServer) -> None:
    code, body, stderr = run_json(
        url(ref), "--cacert", str(ref.ca), "-4", "-H", "x-promptpath-ttft-ms: 100"
    )
    assert code == 0 and body["ok"] is True and body["error"] is None
    assert body["target"]["provider"] == "openai" and body["target"]["port"] == ref.port
    assert body["address"] == {"ip": "127.0.0.1", "port": ref.port, "family": "ipv4"}
    # The default client is the provider's SDK: openai-python offers only http/1.1.
    assert body["client"]["as"] == "openai-python" and body["client"]["default_for_provider"]
    assert body["http_version"] == "HTTP/1.1" and body["tls"]["alpn_offered"] == ["http/1.1"]
    assert body["stream"]["end"] == "marker"
    assert body["tokens"]["count_source"] == "usage"
    for name in MILESTONES:
        assert name in body["milestones_ms"]
    assert body["ttft_ms"]["from_request"] >= 95
    # The terminal report went to stderr, with its verdict line.
    assert "OK: first token after" in stderr and "DNS" in stderr


def test_warm_json_has_both_requests(ref: RefServer) -> None:
    code, body, _ = run_json(url(ref), "--cacert", str(ref.ca), "--warm")
    assert code == 0
    assert body["warm"]["reused_connection"] is True
    assert "tls" not in body["warm"]["stages_ms"] and "tls" in body["stages_ms"]


@pytest.mark.parametrize(
    ("header", "code", "stage", "kind"),
    [
        ("x-promptpath-status: 401", ExitCode.HTTP_STATUS, "response", "http_401"),
        ("x-promptpath-status: 429", ExitCode.HTTP_STATUS, "response", "http_429"),
        ("x-promptpath-status: 503", ExitCode.HTTP_STATUS, "response", "http_503"),
        ("x-promptpath-body: html", ExitCode.STREAM, "response", "not_event_stream"),
        ("x-promptpath-truncate-after: 2", ExitCode.STREAM, "stream", "truncated"),
        ("x-promptpath-malformed-after: 1", ExitCode.STREAM, "stream", "malformed_event"),
        ("x-promptpath-error-after: 1", ExitCode.STREAM, "stream", "error_event"),
    ],
)
def test_failures_give_their_exit_code_and_stage_in_json_and_terminal(
    ref: RefServer, header: str, code: int, stage: str, kind: str
) -> None:
    got, body, stderr = run_json(url(ref), "--cacert", str(ref.ca), "-H", header)
    assert got == code == body["exit_code"]
    assert body["ok"] is False
    assert body["error"]["stage"] == stage and body["error"]["kind"] == kind
    assert f"FAILED in {stage}:" in stderr
    assert "Traceback" not in stderr


def test_tls_failure_exit_code(ref: RefServer) -> None:
    got, body, _ = run_json(url(ref))  # no --cacert: unknown CA
    assert got == ExitCode.TLS and body["error"]["kind"] == "unknown_ca"
    assert body["milestones_ms"]["connected"] > 0  # the partial timeline is kept


def test_refused_exit_code() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        got, body, _ = run_json(
            f"http://127.0.0.1:{s.getsockname()[1]}/v1/messages", "--timeout", "5"
        )
    assert got == ExitCode.CONNECT and body["error"]["stage"] == "connect"


def test_timeout_exit_code(ref: RefServer) -> None:
    got, body, _ = run_json(
        url(ref), "--cacert", str(ref.ca), "--timeout", "0.8", "-H", "x-promptpath-ttft-ms: 4000"
    )
    assert got == ExitCode.TIMEOUT and body["error"]["stage"] == "first_token"


@pytest.mark.parametrize(
    "args",
    [
        ["run", "ftp://x/y"],
        ["run", "https://h/v1/unknown"],
        ["run", "https://h/v1/messages", "--http", "4"],
        ["run", "https://h/v1/messages", "--resolve", "nonsense"],
        ["run", "https://h/v1/messages", "--fail-on", "maybe"],
        ["run", "https://h/v1/messages", "--probe", "no-such-probe"],
        ["run", "https://h/v1/messages", "--cacert", "/nonexistent/ca.pem"],
        ["run", "https://h/v1/messages", "--max-tokens", "notanumber"],
        ["run"],
    ],
)
def test_usage_errors_exit_2_without_traceback(args: list[str]) -> None:
    res = invoke(*args)
    assert res.exit_code == ExitCode.USAGE, res.stderr
    assert res.stdout == "" and "Traceback" not in res.stderr
    # One message on stderr: ours ("promptpath: ...") or click's ("Error: ...").
    assert "promptpath: " in res.stderr or "Error: " in res.stderr


def test_click_usage_error_with_json_gives_json_on_stdout() -> None:
    res = invoke("run", "https://h/v1/messages", "--json", "--bogus")
    assert res.exit_code == ExitCode.USAGE
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert body["exit_code"] == 2 and "--bogus" in body["error"]["message"]
    assert "--bogus" in res.stderr


def test_api_key_is_sent_to_the_target_but_never_shown(keyed: RefServer) -> None:
    # The key comes from the Environment's environ: the process has none (conftest).
    assert "OPENAI_API_KEY" not in os.environ
    env = {"OPENAI_API_KEY": SECRET}
    code, body, stderr = run_json(url(keyed), "--cacert", str(keyed.ca), "-v", env=env)
    assert code == 0, body["error"]  # the server demands the key: it was sent
    assert SECRET not in json.dumps(body) and SECRET not in stderr
    assert "> authorization: [redacted]" in stderr  # -v shows that it was sent, not what
    # Without the key the same endpoint refuses, and the message says which variable to set.
    code, body, stderr = run_json(url(keyed), "--cacert", str(keyed.ca), env={})
    assert code == ExitCode.HTTP_STATUS and "OPENAI_API_KEY" in body["error"]["message"]


def test_the_request_as_sent_is_recorded_once_for_json_and_the_terminal(keyed: RefServer) -> None:
    env = {"OPENAI_API_KEY": SECRET}
    code, body, stderr = run_json(url(keyed), "--cacert", str(keyed.ca), "-v", env=env)
    assert code == 0, body["error"]
    sent = body["request"]
    assert sent["method"] == "POST" and sent["path"] == "/v1/chat/completions"
    assert sent["key_sent"] is True and sent["body_bytes"] > len('{"model":')
    headers = [(h["name"], h["value"]) for h in sent["headers"]]
    assert ("authorization", "[redacted]") in headers
    # -v prints the same record, line for line, in the order sent.
    shown = [line[2:].split(": ", 1) for line in stderr.splitlines() if line.startswith("> ")]
    assert [tuple(pair) for pair in shown] == headers
    assert body["client"]["user_agent"] == dict(headers)["user-agent"]
    # Without a key the record says so, and carries no credential header at all.
    code, body, _ = run_json(url(keyed), "--cacert", str(keyed.ca), env={})
    assert body["request"]["key_sent"] is False
    assert "authorization" not in {h["name"] for h in body["request"]["headers"]}


def test_api_key_from_a_named_env_var_for_anthropic(keyed: RefServer) -> None:
    env = {"MY_ANTHROPIC": SECRET}
    code, body, stderr = run_json(
        url(keyed, "/v1/messages"),
        "--cacert",
        str(keyed.ca),
        "--api-key-env",
        "MY_ANTHROPIC",
        env=env,
    )
    assert code == 0 and SECRET not in json.dumps(body) + stderr


def test_a_key_of_true_and_a_sticky_header_keep_the_json_valid(ref: RefServer) -> None:
    # Redaction by substring once printed "ok": [redacted] here, and exited 0.
    res = invoke(
        "run",
        url(ref),
        "--cacert",
        str(ref.ca),
        "--json",
        "-v",
        "-H",
        "X-Session-Sticky: true",
        env={"OPENAI_API_KEY": "true"},
    )
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert body["ok"] is True and body["error"] is None
    assert "x-session-sticky: true" in res.stderr.lower()  # -v: not a credential, shown
    assert "> authorization: [redacted]" in res.stderr


def test_demo_runs_offline() -> None:
    res = invoke("demo", "--json")
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert body["http_version"] == "HTTP/2" and body["tls"]["verified"] is True
    assert 340 <= body["ttft_ms"]["from_request"] <= 600


def test_narrow_terminal_keeps_the_waterfall_inside_its_width(ref: RefServer) -> None:
    import io

    import anyio
    from rich.console import Console

    from promptpath.cli.commands import RunArgs, build_options
    from promptpath.report import terminal
    from promptpath.tracer.orchestrator import trace

    opts = build_options(RunArgs(target=url(ref), cacert=ref.ca), environ={})
    result = anyio.run(trace, opts)
    out = io.StringIO()
    terminal.render(Console(file=out, width=48, no_color=True), result)
    lines = out.getvalue().splitlines()
    assert any(line.startswith("TLS ") for line in lines)
    assert any(line.startswith("OK: first token") for line in lines)
    assert max(len(line) for line in lines) <= 48


@pytest.fixture(scope="module")
def ref_h3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, http3=True, tmp_path=tmp_path_factory.mktemp("h3")) as srv:
        yield srv


def test_tcp_run_reports_where_http3_is_advertised(ref_h3: RefServer) -> None:
    code, body, stderr = run_json(url(ref_h3), "--cacert", str(ref_h3.ca), "--as", "curl")
    assert code == 0 and body["http_version"] == "HTTP/2"  # curl offers h2 by ALPN
    assert body["h3"]["advertised_by"] == "alt-svc"
    assert body["h3"]["authority"] == f":{ref_h3.port}"
    assert "h3     HTTP/3 advertised by Alt-Svc" in stderr


def test_http3_run_records_quic_in_json(ref_h3: RefServer) -> None:
    code, body, _ = run_json(url(ref_h3), "--cacert", str(ref_h3.ca), "--http", "3")
    assert code == 0 and body["http_version"] == "HTTP/3"
    assert body["quic"]["version"] == "QUICv1" and body["quic"]["datagrams_in"] > 0
    assert "quic_handshake" in body["stages_ms"] and "tls" not in body["stages_ms"]


def test_compare_http_gives_two_results_and_differences(ref_h3: RefServer) -> None:
    res = invoke("run", url(ref_h3), "--cacert", str(ref_h3.ca), "--compare-http", "--json")
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    assert body["schema"] == "promptpath.compare/1"
    assert [r["http_version"] for r in body["results"]] == ["HTTP/2", "HTTP/3"]
    from referencing import Registry, Resource

    run_schema = Resource.from_contents(SCHEMA)
    compare_schema = json.loads(
        (Path(__file__).parents[2] / "promptpath/report/compare-schema.json").read_text()
    )
    jsonschema.Draft202012Validator(
        compare_schema, registry=Registry().with_resource(run_schema.id() or "", run_schema)
    ).validate(body)
    assert body["differences"]["setup_round_trips"]["measured"] is False
    assert body["differences"]["setup_round_trips"]["http2"] == 2
    assert body["differences"]["setup_round_trips"]["http3"] == 1
    assert "HTTP/2 vs HTTP/3" in res.stderr


def test_probe_command_runs_the_named_probe_and_reports_its_finding(ref: RefServer) -> None:
    res = invoke(
        "probe", url(ref), "buffering", "--cacert", str(ref.ca), "--max-tokens", "8", "--json"
    )
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    [finding] = body["findings"]
    assert finding["probe"] == "buffering" and finding["verdict"] == "skip"
    assert "cost:" in res.stderr  # the cost is stated before the probe runs


def test_usage_error_json_validates_too() -> None:
    res = invoke("run", "ftp://nowhere/x", "--json")
    assert res.exit_code == ExitCode.USAGE
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert body["error"]["stage"] == "config" and body["ok"] is False


@pytest.mark.parametrize("extra", [["--warm"], ["--probe", "buffering"], ["--http", "1.1"]])
def test_compare_http_refuses_options_it_would_ignore(extra: list[str]) -> None:
    res = invoke("run", "https://localhost:1/v1/messages", "--compare-http", *extra)
    assert res.exit_code == ExitCode.USAGE and "--compare-http" in res.stderr


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--compare-http", "--compare-runs", "0"], "at least 1"),
        (["--compare-runs", "3"], "goes with --compare-http"),
    ],
)
def test_compare_runs_is_checked(extra: list[str], says: str) -> None:
    res = invoke("run", "https://localhost:1/v1/messages", *extra)
    assert res.exit_code == ExitCode.USAGE and says in res.stderr, res.stderr


def test_probe_takes_the_same_trace_options_as_run(ref: RefServer) -> None:
    res = invoke(
        "probe",
        url(ref),
        "buffering",
        "--cacert",
        str(ref.ca),
        "--prompt",
        "hi",
        "--max-tokens",
        "8",
        "--warm",
        "--json",
    )
    assert res.exit_code == 0, res.stderr
    assert json.loads(res.stdout)["warm"]["reused_connection"] is True


@pytest.mark.parametrize(("width", "together"), [(140, True), (90, False)])
def test_warm_waterfalls_side_by_side_when_there_is_room(
    ref: RefServer, width: int, together: bool
) -> None:
    import io

    import anyio
    from rich.console import Console

    from promptpath.cli.commands import RunArgs, build_options
    from promptpath.report import terminal
    from promptpath.tracer.orchestrator import trace

    opts = build_options(RunArgs(target=url(ref), cacert=ref.ca, warm=True), environ={})
    result = anyio.run(trace, opts)
    out = io.StringIO()
    terminal.render(Console(file=out, width=width, no_color=True), result)
    lines = out.getvalue().splitlines()
    both = [line for line in lines if line.startswith("cold") and "warm" in line]
    assert bool(both) is together
    assert max(len(line) for line in lines if "█" in line) <= width
    assert any(line.startswith("setup tax:") for line in lines)


@pytest.mark.parametrize(("environ", "coloured"), [({}, True), ({"NO_COLOR": "1"}, False)])
def test_report_on_a_terminal_is_coloured_unless_no_color(
    ref: RefServer, environ: dict[str, str], coloured: bool
) -> None:
    res = run_cli("run", url(ref), "--cacert", str(ref.ca), environ=environ, stdout_isatty=True)
    assert res.exit_code == 0, res.stderr
    assert "OK: first token after" in res.stdout and res.stderr == ""
    assert ("\x1b[" in res.stdout) is coloured


def test_report_into_a_pipe_has_no_escape_codes(ref: RefServer) -> None:
    res = run_cli("run", url(ref), "--cacert", str(ref.ca))
    assert res.exit_code == 0 and res.stdout == ""
    assert "OK: first token after" in res.stderr and "\x1b" not in res.stderr


# -- the installed entry point, in a subprocess ---------------------------------------------
ENTRY_POINTS = {
    "module": [sys.executable, "-m", "promptpath"],
    "script": [str(Path(sys.executable).parent / "promptpath")],
}


@pytest.mark.parametrize("entry", ENTRY_POINTS, ids=str)
def test_entry_point_prints_the_version_and_returns_main_s_exit_code(entry: str) -> None:
    command = ENTRY_POINTS[entry]
    if not Path(command[0]).exists():
        pytest.skip(f"{command[0]} is not installed (pip install -e .)")
    version = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=30)
    assert version.returncode == 0 and version.stdout.startswith("promptpath ")
    usage = subprocess.run(
        [*command, "run", "ftp://x/y"], capture_output=True, text=True, timeout=30
    )
    assert usage.returncode == ExitCode.USAGE and usage.stdout == ""
    assert usage.stderr.startswith(
        "promptpath: target must be an http://, https://, ws:// or wss:// URL"
    )
