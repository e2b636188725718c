"""Ctrl-C during a trace: one line, exit 130, no traceback, and the partial JSON."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.refserver import reference_server


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
                "x-promptpath-ttft-ms: 20000",
                "--json",
                *mode,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(2.5)  # well inside the 20 s wait for the first token
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
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
