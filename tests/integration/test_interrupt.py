"""Ctrl-C during a trace: one line, exit 130, no traceback, and the partial JSON."""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.helpers.refserver import RefServer, reference_server
from tests.helpers.waiting import unread_socket_bytes, wait_for

TTFT_MS = 20000
#: Bounds for the child to start and get the headers (~1 s), well inside TTFT_MS.
HEADERS_WAIT_S, READ_WAIT_S = 12.0, 4.0


def _streaming(client: httpx.Client, srv: RefServer) -> bool:
    """The server has sent the response headers (it sets the status just before)."""
    recent = client.get(srv.path("/stats")).json()["recent"]
    return any(r["status"] == 200 for r in recent)


def _has_read_everything(proc: subprocess.Popen[str]) -> bool:
    if proc.poll() is not None:
        pytest.fail(f"the trace ended before the interrupt: {proc.communicate()}")
    return unread_socket_bytes(proc.pid) == 0


@pytest.mark.skipif(sys.platform != "linux", reason="reads the child's sockets in /proc")
@pytest.mark.parametrize(
    "mode",
    [["--http", "1.1"], ["--http", "2"], ["--http", "3"], ["--compare-http"]],
    ids=["h1", "h2", "h3", "compare"],
)
def test_sigint_during_a_trace_exits_130_with_the_partial_json(
    tmp_path: Path, mode: list[str]
) -> None:
    with reference_server(tls=True, http3=True, tmp_path=tmp_path) as srv:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "promptpath",
                "run",
                f"https://localhost:{srv.port}/v1/messages",
                "--cacert",
                str(srv.ca),
                "-H",
                f"x-promptpath-ttft-ms: {TTFT_MS}",
                "--json",
                *mode,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # Interrupt in the wait for the first token, once the child has the headers:
            # the server sent them and the child's sockets hold nothing it has not read.
            context = ssl.create_default_context(cafile=str(srv.ca))
            with httpx.Client(verify=context, timeout=10.0) as client:
                wait_for(
                    lambda: _streaming(client, srv), timeout=HEADERS_WAIT_S, what="the headers"
                )
            wait_for(
                lambda: _has_read_everything(proc), timeout=READ_WAIT_S, what="the child's read"
            )
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err
    body = json.loads(out)
    assert body["exit_code"] == 130 and body["error"]["kind"] == "interrupted"
    assert body["error"]["stage"] == "first_token" and "ttfb" in body["milestones_ms"]


def test_click_usage_errors_still_give_json_through_main() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "promptpath", "run", "https://h/v1/messages", "--json", "--bogus"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    body = json.loads(proc.stdout)
    assert body["exit_code"] == 2 and "--bogus" in body["error"]["message"]
    assert "Traceback" not in proc.stderr
