"""Bounded under every input (issue 24, item 3): for each hostile server or option, the
real CLI in a child process ends with its exit code, a schema-valid JSON report on stdout,
and within a wall-time and a peak-RSS bound.

RSS is the child's own peak (``ru_maxrss`` from ``os.wait4`` on its pid: the kernel's
accounting of that process alone). The bounds come from runs of this test on the shared
2-core machine while other engineers' suites ran, with margin; the values measured are
beside each case ("measured" = the range over those runs).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers import bombs, hostilews

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
#: Kill a child that outlives every bound by far: the test fails rather than hangs.
HARD_LIMIT_S = 120.0
PATH = "/v1/chat/completions"


@dataclass(frozen=True, slots=True)
class Child:
    code: int
    stdout: str
    stderr: str
    wall_s: float
    max_rss_mb: float


#: Runs the CLI and writes its peak RSS (KiB) to argv[1]. A launcher of its own because a
#: child's ru_maxrss includes the memory of the process it was forked from (the kernel
#: keeps the pre-exec high-water mark): forked from pytest it read 44-66 MB for a run
#: that stops at its usage error, as much as pytest held; 40 MB from this launcher.
LAUNCHER = """
import resource, subprocess, sys
code = subprocess.call(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    out.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
sys.exit(code if code >= 0 else 128 - code)
"""


def run_child(
    args: list[str],
    tmp_path: Path,
    *,
    limit_s: float = HARD_LIMIT_S,
    environ: dict[str, str] | None = None,
) -> Child:
    """``python -m promptpath ARGS``, with its wall time and its own peak RSS."""
    out, err, rss = tmp_path / "stdout", tmp_path / "stderr", tmp_path / "maxrss"
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(environ or {})
    command = [sys.executable, "-c", LAUNCHER, str(rss), sys.executable, "-m", "promptpath"]
    with out.open("w") as stdout, err.open("w") as stderr:
        started = time.monotonic()
        proc = subprocess.Popen(
            [*command, *args],
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        try:
            code = proc.wait(limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"the child outlived {limit_s:g} s")
        wall = time.monotonic() - started
    return Child(
        code=code,
        stdout=out.read_text(),
        stderr=err.read_text(),
        wall_s=wall,
        max_rss_mb=int(rss.read_text()) / 1024,  # KiB on Linux
    )


@contextlib.contextmanager
def silent_listener() -> Iterator[tuple[int, Callable[[], bool]]]:
    """A port that listens and never answers; the callable says whether anyone connected
    (the kernel completes a handshake into the backlog without an accept)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        sock.setblocking(False)

        def connected() -> bool:
            try:
                sock.accept()[0].close()
            except BlockingIOError:
                return False
            return True

        yield sock.getsockname()[1], connected


def _no_negative_stage(report: dict[str, Any]) -> None:
    stages = report["stages_ms"]
    assert all(v >= 0 for v in stages.values()), stages
    assert (report["stream"]["stall_ms"] or 0) >= 0


def _timed_out_in_stream(report: dict[str, Any]) -> None:
    assert report["error"]["kind"] == "timeout" and report["error"]["stage"] == "stream"
    _no_negative_stage(report)


def check_bomb(report: dict[str, Any], stderr: str) -> None:
    _timed_out_in_stream(report)
    stream = report["stream"]
    assert stream["compressed"] == "gzip"
    assert stream["not_kept"]["events"] > 0, "the cap of kept events was reached"
    assert stream["events"] == report["tokens"]["count"] > 100_000  # counted, not kept
    # Cut while decoding: said as such, not as a silence that never was.
    assert "still decoding at the 10 s deadline" in stderr and "no byte for" not in stderr


def check_endless(report: dict[str, Any], stderr: str) -> None:
    _timed_out_in_stream(report)
    stream = report["stream"]
    # Identity: decoded as read, but for the rest of the piece the deadline cut (one
    # piece is at most a 64 KiB read).
    assert stream["bytes"] - 65_536 <= stream["decoded_bytes"] <= stream["bytes"]
    assert stream["bytes"] > 1_000_000
    assert " -" not in stderr.split("FAILED")[-1], "no negative figure in the verdict"


def check_trickle(report: dict[str, Any], stderr: str) -> None:
    _timed_out_in_stream(report)
    # Measured 3,608-5,603 (the server's 1 ms sleeps stretch under load).
    assert report["stream"]["socket_reads"] > 1000, "the reads were many and small"


def check_long_lines(report: dict[str, Any], stderr: str) -> None:
    _timed_out_in_stream(report)
    assert report["stream"]["not_kept"]["text_chars"] > 0, "text past the budget dropped"


def check_nested_error(report: dict[str, Any], stderr: str) -> None:
    assert report["error"]["stage"] == "response" and report["status"] == 500
    assert "HTTP 500 — [[[[" in report["error"]["message"]


def check_tiny_timeout(report: dict[str, Any], stderr: str) -> None:
    assert report["error"]["kind"] == "timeout" and report["error"]["stage"] == "dns"
    _no_negative_stage(report)


def check_huge_timeout(report: dict[str, Any], stderr: str) -> None:
    assert report["error"]["stage"] == "config"
    assert "--timeout must be at most 86400 s" in report["error"]["message"]


def check_huge_interval(report: dict[str, Any], stderr: str) -> None:
    assert report["error"]["stage"] == "config"
    assert "--interval must be at most 86400 s (a day), got 1e+300" in report["error"]["message"]


def check_cacert_device(report: dict[str, Any], stderr: str) -> None:
    assert report["error"]["stage"] == "config"
    assert "--cacert /dev/zero: is a character device, not a file" in report["error"]["message"]


def check_ws_too_big(report: dict[str, Any], stderr: str) -> None:
    # Refused as it grew (1009), and the frames still arriving while we closed (the rest
    # of the message) were read past, not parsed into a second refusal. Before: exit 70.
    assert report["error"]["stage"] == "stream" and report["error"]["kind"] == "truncated"
    assert "1009 message too big" in report["error"]["message"]
    close = report["websocket"]["close"]
    assert (close["by"], close["code"]) == ("protocol", 1009)
    assert report["tokens"]["count"] == 1


def check_ws_refused_early(report: dict[str, Any], stderr: str) -> None:
    assert report["error"]["stage"] == "stream"
    assert "1002 protocol error" in report["error"]["message"]
    ws = report["websocket"]
    assert (ws["close"]["by"], ws["close"]["code"]) == ("protocol", 1002)
    assert ws["messages_sent"] == 0  # closed before our request: nothing sent after our Close


def check_ws_ping_at_close(report: dict[str, Any], stderr: str) -> None:
    # Our Close went at the deadline; the server's ping crossed it (never answered: wsproto
    # refused to send the pong, exit 70, before).
    _timed_out_in_stream(report)
    close = report["websocket"]["close"]
    assert (close["by"], close["code"]) == ("client", 1000)
    assert report["tokens"]["count"] == 3
    # The ping and the Close reply came after our Close: the close handshake's, no trickle.
    assert "no byte for" in stderr and "still trickling" not in stderr


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    body: Callable[[], bombs.Body] | None  # None: a port that listens and never answers
    args: tuple[str, ...]
    code: ExitCode
    max_wall_s: float
    max_rss_mb: float
    check: Callable[[dict[str, Any], str], None]
    #: A WebSocket server instead of a body (tests/helpers/hostilews.py): its port.
    ws: Callable[[], contextlib.AbstractContextManager[int]] | None = None


CASES = [
    # Measured over three runs at load 8-11 on the 2 cores (other suites running): the
    # bounds leave ~10 s for the load to get worse; an idle machine is ~2 s faster.
    # 3 MB of gzip, ~1 GB of events. Before: 49.97 s wall for --timeout 10, 364 MB RSS.
    # Measured: 11.8-14.4 s, 71-72 MB.
    Case("gzip_bomb", bombs.gzip_bomb, ("--timeout", "10"), ExitCode.TIMEOUT, 25, 130,
         check_bomb),
    # Events as fast as the client reads, never [DONE]. Measured: 12.4-15.1 s, 71-72 MB.
    Case("endless", bombs.endless_events, ("--timeout", "10"), ExitCode.TIMEOUT, 25, 130,
         check_endless),
    # One event per write, 1 ms apart: a socket read per event (the timeline keeps a
    # record per read). Measured: 12.4-12.9 s, 48-49 MB, 3,608-5,603 reads.
    Case("trickle", bombs.trickle_events, ("--timeout", "10"), ExitCode.TIMEOUT, 25, 130,
         check_trickle),
    # Gzip of 8 MB-long events. Measured: 11.3-13.4 s, 77 MB.
    Case("long_lines", bombs.long_lines_bomb, ("--timeout", "10"), ExitCode.TIMEOUT, 25, 130,
         check_long_lines),
    # A 500 whose body nests 60,000 arrays. Before: RecursionError, exit 70.
    # Measured: 1.0-1.8 s, 46 MB.
    Case("nested_error_body", bombs.nested_error, ("--timeout", "10"), ExitCode.HTTP_STATUS,
         15, 100, check_nested_error),
    # Before: connected after the deadline, "request -0.6 ms". Measured: 1.1-4.4 s (the
    # start-up under load: imports), 46 MB.
    Case("timeout_1e-9", None, ("--timeout", "1e-9"), ExitCode.TIMEOUT, 15, 100,
         check_tiny_timeout),
    # Before: OverflowError, exit 70. Measured: 0.8-2.8 s, 40 MB.
    Case("timeout_1e300", None, ("--timeout", "1e300"), ExitCode.USAGE, 15, 100,
         check_huge_timeout),
    # Before: taken; the series then waited for ever for its second run (this test's
    # child outlived its 120 s limit). Measured: 0.6-1.1 s at load 3.7, 30 MB.
    Case("interval_1e300", None, ("--count", "2", "--interval", "1e300"), ExitCode.USAGE, 15,
         100, check_huge_interval),
    # Before: "--cacert file not found: /dev/zero". Measured: 0.7-1.2 s at load 3.7, 30 MB.
    Case("cacert_dev_zero", None, ("--cacert", "/dev/zero"), ExitCode.USAGE, 15, 100,
         check_cacert_device),
    # A 20 MiB message; the rest of it still arriving while we close. Before: exit 70
    # (MessageTooLarge from the close's drain). Measured at load 5-6: 0.6-1.5 s, 52 MB.
    Case("ws_message_too_big", None, ("--timeout", "10"), ExitCode.STREAM, 15, 100,
         check_ws_too_big, ws=lambda: hostilews.hostile_ws_server(hostilews.oversized_message)),
    # A ping that crossed our Close (sent at the deadline). Before: exit 70
    # (LocalProtocolError). Measured at load 5-6: 2.5-3.0 s, 38 MB.
    Case("ws_ping_across_close", None, ("--timeout", "2"), ExitCode.TIMEOUT, 15, 100,
         check_ws_ping_at_close,
         ws=lambda: hostilews.hostile_ws_server(hostilews.ping_across_close)),
    # permessage-deflate of 1 GiB of "a" (~1 MB on the wire) with --as browser, which
    # offers the extension. Before: exit 70, 276-332 MB. Measured at load 5-6: 0.5-1.0 s,
    # 68-85 MB.
    Case("ws_deflate_bomb", None, ("--timeout", "10", "--as", "browser"), ExitCode.STREAM,
         15, 130, check_ws_too_big,
         ws=lambda: hostilews.hostile_ws_server(hostilews.deflate_bomb, accept_deflate=True)),
    # A frame we refuse (RSV1, no extension) in the 101's own read, before our
    # response.create went. Before: exit 70 (LocalProtocolError: the message could not
    # be sent after our Close 1002). Measured at load 5-6: 0.4-1.0 s, 38 MB.
    Case("ws_refused_frame_with_the_101", None, ("--timeout", "10"), ExitCode.STREAM, 15,
         100, check_ws_refused_early,
         ws=lambda: hostilews.hostile_ws_server(hostilews.refused_frame, with_101=True)),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bounded_under_every_input(case: Case, tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        if case.ws is not None:
            port, connected = stack.enter_context(case.ws()), None
            url = f"ws://127.0.0.1:{port}/v1/responses"
        elif case.body is None:
            port, connected = stack.enter_context(silent_listener())
            url = f"http://127.0.0.1:{port}{PATH}"
        else:
            port, connected = stack.enter_context(bombs.hostile_server(case.body())), None
            url = f"http://127.0.0.1:{port}{PATH}"
        child = run_child(["run", url, "--json", *case.args], tmp_path)
        if connected is not None:
            assert not connected(), "nothing may be dialled after the deadline"
    assert child.code == case.code, child.stderr[-2000:]
    report = json.loads(child.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["exit_code"] == case.code
    assert "Traceback" not in child.stderr
    case.check(report, child.stderr)
    reads = (report.get("stream") or {}).get("socket_reads")
    print(f"{case.name}: {child.wall_s:.2f} s, {child.max_rss_mb:.0f} MB, {reads} reads")
    assert child.wall_s < case.max_wall_s, f"{child.wall_s:.2f} s"
    assert child.max_rss_mb < case.max_rss_mb, f"{child.max_rss_mb:.0f} MB"


def _fifo(tmp_path: Path) -> str:
    path = tmp_path / "named.fifo"
    os.mkfifo(path)  # nobody ever opens it for writing
    return str(path)


def _garbage(tmp_path: Path) -> str:
    path = tmp_path / "cert.pem"
    path.write_text("not a certificate\n")
    return str(path)


def _sparse(tmp_path: Path) -> str:
    path = tmp_path / "config.toml"
    with path.open("wb") as fh:
        fh.truncate(200_000_000)  # 200 MB that take no disk
    return str(path)


def _nested(tmp_path: Path) -> str:
    path = tmp_path / "config.toml"
    path.write_text("[profiles.prod]\nheaders = " + "[" * 50_000 + "]" * 50_000 + "\n")
    return str(path)


@dataclass(frozen=True, slots=True)
class FileCase:
    name: str
    args: Callable[[Path], list[str]]
    said: str
    environ: Callable[[Path], dict[str, str]] | None = None


FILE_CASES = [
    # Before: blocked in open() before t0 for good, SIGTERM and SIGINT unanswered.
    FileCase("cert_fifo", lambda p: ["--cert", _fifo(p)],
             "--cert: cannot read the file (is a FIFO"),
    FileCase("key_fifo", lambda p: ["--cert", _garbage(p), "--key", _fifo(p)],
             "--key: cannot read the file (is a FIFO"),
    # Before: read until 2.6 GB, then exit 70.
    FileCase("cert_dev_zero", lambda p: ["--cert", "/dev/zero"],
             "--cert: cannot read the file (is a character device"),
    # Before: read whole (~420 MB at its peak), then a TOML error.
    FileCase("config_200mb", lambda p: [], "is larger than 4 MiB",
             environ=lambda p: {"PROMPTPATH_CONFIG": _sparse(p)}),
    FileCase("config_fifo", lambda p: [], "is a FIFO, not a regular file",
             environ=lambda p: {"PROMPTPATH_CONFIG": _fifo(p)}),
    # Before: RecursionError from tomllib, exit 70.
    FileCase("config_nested", lambda p: [], "arrays or tables nested too deeply",
             environ=lambda p: {"PROMPTPATH_CONFIG": _nested(p)}),
    # Not a file, the same class of input: before, ValueError from urlsplit, exit 70.
    FileCase("otlp_unclosed_bracket", lambda p: ["--otlp-endpoint", "http://u:pw@[::1"],
             "--otlp-endpoint is not a valid URL"),
]  # fmt: skip


@pytest.mark.parametrize("case", FILE_CASES, ids=[c.name for c in FILE_CASES])
def test_a_hostile_file_or_endpoint_an_option_names_is_exit_2_unread_and_bounded(
    case: FileCase, tmp_path: Path
) -> None:
    # A profile name as the target when the config is under test, a URL otherwise (port 9:
    # nothing is dialled, the options are refused first).
    target = "prod" if case.environ else "http://127.0.0.1:9/v1/chat/completions"
    environ = case.environ(tmp_path) if case.environ else None
    args = ["run", target, "--json", *case.args(tmp_path)]
    # Measured: 0.8-2.5 s (start-up under load), 40 MB.
    child = run_child(args, tmp_path, limit_s=30, environ=environ)
    assert child.code == ExitCode.USAGE, child.stderr[-2000:]
    error = json.loads(child.stdout)["error"]
    assert error["stage"] == "config" and case.said in error["message"]
    assert child.wall_s < 15, f"{child.wall_s:.2f} s"
    assert child.max_rss_mb < 100, f"{child.max_rss_mb:.0f} MB"
