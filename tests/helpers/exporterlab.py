"""`promptpath exporter` as a subprocess for tests: its config written, its port read from
its "listening" log line, its stderr (one JSON object per line) kept in a file.

A subprocess, not a thread: the tests send it real signals (SIGHUP reloads, SIGTERM
drains) and read its exit code.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

STARTUP_TIMEOUT_S = 20.0
_ENV_DROP = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@dataclass(frozen=True, slots=True)
class Exporter:
    url: str  # http://127.0.0.1:PORT
    port: int
    config: Path
    process: subprocess.Popen[bytes] = field(repr=False)
    stderr: Path = field(repr=False)

    def log(self) -> list[dict[str, Any]]:
        """Every log line so far, each parsed (a line that is not JSON fails the test)."""
        lines = self.stderr.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def get(
        self, path: str, *, headers: Mapping[str, str] | None = None, timeout: float = 30.0
    ) -> tuple[int, str, float]:
        """(status, body, seconds) of GET ``path`` (no proxy, whatever the environment)."""
        return request(self.url + path, headers=headers, timeout=timeout)

    def post(self, path: str) -> tuple[int, str, float]:
        return request(self.url + path, method="POST")

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)


def request(
    url: str,
    *,
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, str, float]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(
        url, method=method, headers=dict(headers or {}), data=b"" if method == "POST" else None
    )
    start = time.monotonic()
    try:
        with opener.open(req, timeout=timeout) as response:
            body = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as exc:
        body, status = exc.read().decode(), exc.code
    return status, body, time.monotonic() - start


Samples = dict[str, list[tuple[dict[str, str], float]]]


def samples(text: str) -> Samples:
    """Prometheus text read by the official client's parser: each sample's labels and
    value, by sample name (``_bucket``, ``_total`` and all)."""
    from prometheus_client.parser import text_string_to_metric_families

    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def _wait_port(process: subprocess.Popen[bytes], stderr: Path) -> int:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        for line in stderr.read_text().splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if event.get("event") == "listening":
                    return int(event["port"])
        if process.poll() is not None:
            pytest.fail(f"exporter exited {process.returncode}: {stderr.read_text()[-2000:]}")
        time.sleep(0.05)
    pytest.fail(f"exporter did not listen within {STARTUP_TIMEOUT_S:g} s")


@contextlib.contextmanager
def exporter(
    tmp_path: Path,
    config_text: str,
    *,
    env: Mapping[str, str] | None = None,
    args: tuple[str, ...] = (),
    listen: str = "127.0.0.1:0",
    command_prefix: tuple[str, ...] = (),
) -> Iterator[Exporter]:
    """The exporter with ``config_text``; ``command_prefix`` wraps its command (``ip netns
    exec NS`` for the impairer lab: its port is still read from its log line)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = tmp_path / f"exporter-{time.monotonic_ns()}.toml"
    config.write_text(config_text)
    stderr_path = config.with_suffix(".stderr")
    command = [*command_prefix, sys.executable, "-m", "promptpath", "exporter"]
    command += ["--config", str(config)]
    command += ["--listen", listen, *args]
    process_env = {k: v for k, v in os.environ.items() if k not in _ENV_DROP} | dict(env or {})
    with stderr_path.open("w") as stderr:
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=process_env,
        )
    try:
        port = _wait_port(process, stderr_path)
        yield Exporter(
            url=f"http://127.0.0.1:{port}",
            port=port,
            config=config,
            process=process,
            stderr=stderr_path,
        )
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


__all__ = ["Exporter", "Samples", "exporter", "request", "samples"]
