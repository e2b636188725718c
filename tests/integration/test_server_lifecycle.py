"""Starting, counting, certificates and stopping: the reference endpoint as a component."""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import re
import socket
import ssl
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cryptography import x509

from promptpath.core.exitcodes import ExitCode
from promptpath.server.behaviour import Behaviour
from promptpath.server.certs import make_self_signed
from promptpath.server.hosting import ServerConfig, ServerSetupError, start_in_thread
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, collect
from tests.integration.conftest import StartRefServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def tls_client(ca: str | Path | None) -> httpx.Client:
    assert ca is not None
    return httpx.Client(verify=ssl.create_default_context(cafile=str(ca)), timeout=10.0)


def test_listening_line_describes_the_server(refserver_tls: RefServer) -> None:
    assert refserver_tls.url == f"https://127.0.0.1:{refserver_tls.port}"
    assert refserver_tls.port > 0 and refserver_tls.http3
    assert refserver_tls.ca is not None and "ca" in Path(refserver_tls.ca).name
    with tls_client(refserver_tls.ca) as client:
        health = client.get(refserver_tls.path("/healthz"))
        missing = client.post(refserver_tls.path("/v2/nothing"), json={})
        wrong_method = client.get(refserver_tls.path("/v1/chat/completions"))
    assert (health.status_code, health.text) == (200, "ok")
    assert missing.status_code == 404
    assert wrong_method.status_code == 405


def test_stats_count_tokens_and_a_client_that_left(start_refserver: StartRefServer) -> None:
    server = start_refserver(extra_args=["--tokens", "5", "--rate", "0"])
    with tls_client(server.ca) as client:
        full = collect(client, server.path("/v1/chat/completions"), CHAT)
        assert full.stream.data_messages[-1].data == "[DONE]"
        # a slow stream the client walks away from after two events
        collect(
            client,
            server.path("/v1/messages"),
            {**CHAT, "max_tokens": 64},
            {"x-promptpath-rate": "5", "x-promptpath-tokens": "20"},
            stop_after=5,  # message_start, content_block_start, ping, two tokens
        )
        deadline = time.monotonic() + 5
        while True:
            stats = client.get(server.path("/stats")).json()
            if stats["client_disconnects"] == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert stats["requests"] == 2, "/stats and /healthz are not counted"
    assert stats["client_disconnects"] == 1
    first, second = stats["recent"]
    assert first["path"] == "/v1/chat/completions" and first["dialect"] == "openai"
    assert (first["status"], first["tokens_sent"], first["disconnected"]) == (200, 5, False)
    assert second["dialect"] == "anthropic" and second["disconnected"] is True
    assert 2 <= second["tokens_sent"] < 20
    assert stats["tokens_sent"] == 5 + second["tokens_sent"]
    assert first["id"] < second["id"] and first["started_unix_ns"] <= second["started_unix_ns"]


def test_self_signed_ca_and_leaf_cover_loopback_names(tmp_path: Path) -> None:
    paths = make_self_signed(tmp_path, days=30)
    ca = x509.load_pem_x509_certificate(paths.ca.read_bytes())
    leaf = x509.load_pem_x509_certificate(paths.cert.read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert leaf.issuer == ca.subject
    sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    assert set(sans.get_values_for_type(x509.IPAddress)) == {
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    }
    left = leaf.not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert dt.timedelta(days=29) < left <= dt.timedelta(days=30)
    assert stat.S_IMODE(paths.key.stat().st_mode) == 0o600


@pytest.mark.parametrize("kwargs", [{"expired": True}, {"days": -2}])
def test_self_signed_can_make_an_expired_leaf(tmp_path: Path, kwargs: dict[str, object]) -> None:
    paths = make_self_signed(tmp_path, **kwargs)  # type: ignore[arg-type]
    leaf = x509.load_pem_x509_certificate(paths.cert.read_bytes())
    now = dt.datetime.now(dt.UTC)
    assert leaf.not_valid_before_utc < leaf.not_valid_after_utc < now


def test_server_with_expired_certificate_fails_verification(
    start_refserver: StartRefServer,
) -> None:
    server = start_refserver(extra_args=["--cert-days", "-1"])
    with tls_client(server.ca) as client, pytest.raises(httpx.ConnectError, match="expired"):
        client.get(server.path("/healthz"))


def test_start_in_thread_serves_and_stops(tmp_path: Path) -> None:
    config = ServerConfig(
        port=0, self_signed=str(tmp_path), http3=False, behaviour=Behaviour(rate=0, tokens=3)
    )
    handle = start_in_thread(config)
    try:
        assert handle.url == f"https://127.0.0.1:{handle.port}"
        assert handle.ca_path == tmp_path / "ca.pem" and not handle.http3
        with tls_client(handle.ca_path) as client:
            got = collect(client, handle.url + "/v1/chat/completions", CHAT)
        assert got.stream.data_messages[-1].data == "[DONE]"
        assert handle.stats["tokens_sent"] == 3
    finally:
        started = time.monotonic()
        handle.stop()
    assert time.monotonic() - started < 3
    handle.stop()  # twice is fine
    with pytest.raises(httpx.ConnectError), tls_client(handle.ca_path) as client:
        client.get(handle.url + "/healthz")


def test_start_in_thread_reports_a_port_in_use(tmp_path: Path) -> None:
    with start_in_thread(ServerConfig(port=0, http3=False)) as first:
        assert first.url.startswith("http://")
        with pytest.raises(ServerSetupError, match="cannot listen"):
            start_in_thread(ServerConfig(port=first.port, http3=False))


def test_bad_flag_value_exits_2_naming_the_flag() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "promptpath.server", "--port", "0", "--rate", "-1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "--rate" in done.stderr and done.stdout == ""
    # the same plain usage error as `promptpath serve`, not a rich box
    assert done.stderr.strip().splitlines()[-1].startswith("Error: Invalid value for --rate")


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port something else is listening on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def serve_cli(
    busy_port: int, *args: str, environ: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """``promptpath serve ARGS`` in-process: exit code, stdout, stderr.

    ``--port`` defaults to a port in use, so an option that wrongly passes validation
    fails fast here instead of serving forever.
    """
    argv = ["serve", "--no-http3", "--port", str(busy_port), *args]
    # PROMPTPATH_DEBUG: an escaped exception (exit 70 for users) fails the test with its
    # traceback.
    res = run_cli(*argv, environ={"PROMPTPATH_DEBUG": "1", **(environ or {})})
    return res.exit_code, res.stdout, res.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--port", "70000"],  # was OverflowError from bind(): exit 70
        ["--port", "-1"],
        ["--cert-days", "3000000"],  # was OverflowError from the date arithmetic
        ["--tokens", "-3"],
        ["--rate", "-1"],
        ["--ttft-ms", "nan"],
        ["--keepalive-s", "1e-300"],  # was accepted: keepalives in a busy loop
        ["--pause-after", "-1"],
        ["--batch", "0"],
        ["--status", "100"],
        ["--body", "xml"],
    ],
)
def test_bad_serve_option_is_a_usage_error_naming_it(busy_port: int, args: list[str]) -> None:
    code, stdout, stderr = serve_cli(busy_port, *args)
    assert code == ExitCode.USAGE
    assert stdout == "" and "Traceback" not in stderr
    error = stderr.strip().splitlines()[-1]
    assert error.startswith("Error: Invalid value for") and args[0] in error


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("self-signed-under-a-file", r"--self-signed .*: cannot write the CA and certificate"),
        ("self-signed-and-certfile", r"--self-signed and --certfile/--keyfile exclude"),
        ("port-in-use", r"cannot listen on 127\.0\.0\.1:\d+ \(TCP\): .*in use"),
        ("unresolvable-host", r"cannot resolve listen address 'a{70}'"),
    ],
)
def test_serve_setup_failure_is_one_line_and_exit_2(
    tmp_path: Path, busy_port: int, case: str, expected: str
) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    args = {
        "self-signed-under-a-file": ["--self-signed", str(a_file / "certs")],
        "self-signed-and-certfile": [
            "--self-signed",
            str(tmp_path),
            "--certfile",
            "c.pem",
            "--keyfile",
            "k.pem",
        ],
        "port-in-use": [],  # serve_cli's default port is the busy one
        "unresolvable-host": ["--host", "a" * 70, "--port", "0"],
    }[case]
    code, stdout, stderr = serve_cli(busy_port, *args)
    assert code == ExitCode.USAGE
    assert stdout == ""
    assert stderr.count("\n") == 1 and stderr.startswith("promptpath serve: "), stderr
    assert re.search(expected, stderr), stderr


def test_serve_takes_the_key_from_the_cli_environment(busy_port: int) -> None:
    code, _, stderr = serve_cli(busy_port, "--api-key-env", "PP_SERVE_KEY")
    assert code == ExitCode.USAGE and "PP_SERVE_KEY is not set" in stderr
    # With the key in the Environment it gets past that check, to the busy port.
    code, _, stderr = serve_cli(
        busy_port, "--api-key-env", "PP_SERVE_KEY", environ={"PP_SERVE_KEY": "sk-k"}
    )
    assert code == ExitCode.USAGE and stderr.startswith("promptpath serve: cannot listen")


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (ServerConfig(port=70000), "--port 70000 is out of range"),
        (ServerConfig(port=0, self_signed="x", cert_days=10**7), "--cert-days .* out of range"),
    ],
)
def test_out_of_range_config_is_a_setup_error_for_api_callers_too(
    config: ServerConfig, expected: str
) -> None:
    with pytest.raises(ServerSetupError, match=expected):
        start_in_thread(config)


def test_importing_the_command_does_not_load_heavy_dependencies() -> None:
    code = (
        "import sys, json, promptpath.server.command; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} "
        "& {'hypercorn', 'cryptography', 'aioquic', 'h2', 'httpx'})))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
