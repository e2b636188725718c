"""nginx reloaded while it streams an answer over HTTP/2: the old worker drains.

Checked by hand (nginx 1.22.1, ``listen ... http2`` by prior knowledge, a raw h2 client
logging frames): ``nginx -s reload`` (SIGHUP to the master) makes the worker holding the
connection send GOAWAY(NO_ERROR, last stream 1) at once, go on streaming stream 1 to
``[DONE]`` and END_STREAM, then close the connection (FIN). By contrast hypercorn 0.18
(the reference server) on SIGTERM sent GOAWAY(NO_ERROR, last stream 1) and closed
mid-stream: tests/integration/test_h2_endings.py's ``goaway`` ending plays that.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import proxylab
from tests.helpers.refserver import reference_server

pytestmark = pytest.mark.lab

TOKENS = 20  # at 10 tokens/s: 2 s of stream, the reload lands well inside it


def _requests(stats_url: str) -> int:
    with urllib.request.urlopen(stats_url, timeout=5) as reply:  # loopback only
        return int(json.load(reply)["requests"])


def test_an_nginx_reload_mid_stream_lets_the_answer_finish(tmp_path: Path) -> None:
    controls = ["--rate", "10", "--tokens", str(TOKENS)]
    with (
        reference_server(tls=False, extra_args=controls, tmp_path=tmp_path / "ref") as ref,
        proxylab.nginx(
            ref.port,
            tmp_path,
            listen="http2",
            location="proxy_http_version 1.1; proxy_buffering off;",
        ) as proxy,
    ):
        env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
        url = proxy.path("/v1/chat/completions")
        cli = subprocess.Popen(
            [sys.executable, "-m", "promptpath", "run", "--json", "--http", "2", url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            deadline = time.monotonic() + 20
            while _requests(ref.url + "/stats") < 1:  # the answer has begun upstream
                assert cli.poll() is None and time.monotonic() < deadline, "no request came"
                time.sleep(0.05)
            assert proxy.process is not None
            proxy.process.send_signal(signal.SIGHUP)  # nginx -s reload
            stdout, stderr = cli.communicate(timeout=30)
        finally:
            if cli.poll() is None:
                cli.kill()
                cli.wait()
    assert cli.returncode == 0, stderr + proxy.logs()
    report = json.loads(stdout)
    assert report["tokens"]["count"] == TOKENS
    assert report["stream"]["end"] == "marker"
    goaway = report["stream"]["goaway"]
    assert goaway is not None, "nginx sent no GOAWAY on reload\n" + proxy.logs()
    assert goaway["code"] == 0 and goaway["last_stream_id"] == 1 and goaway["stream_id"] == 1
    assert goaway["at_ms"] < report["milestones_ms"]["last_token"]  # it came mid-stream
