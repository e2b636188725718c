"""The installed console script: ``--version`` takes the fast path, everything else is
``cli.main`` (its own tests run it in process), and the process ends with ``os._exit``
once its two streams are flushed (entry.py): what it wrote must all be there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from promptpath import __version__
from promptpath.core.exitcodes import ExitCode
from tests.helpers.refserver import RefServer

pytestmark = pytest.mark.integration

SCRIPT = Path(sys.executable).parent / "promptpath"
#: PYTHONUNBUFFERED (set on some runners) would hide a missing flush: stdout into a file or
#: a pipe is block-buffered without it, and nothing is flushed at os._exit but by entry.end.
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _run(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=60, **kwargs
    )  # type: ignore[call-overload]


def test_version_answers_without_loading_typer() -> None:
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from promptpath.cli.entry import run; code = run(['--version']);"
            " print('typer' in sys.modules, code)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.stdout.splitlines() == [f"promptpath {__version__}", "False 0"]
    assert _run("--version").stdout == f"promptpath {__version__}\n"


def test_anything_else_is_the_full_command_line() -> None:
    res = _run("--help")
    assert res.returncode == 0 and "run" in res.stdout and "demo" in res.stdout
    bad = _run("run")  # no TARGET: click's usage error, exit 2, no traceback
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@pytest.mark.parametrize("sink", ["file", "pipe"])
def test_what_the_process_printed_is_all_there_when_it_ends(
    sink: str, tmp_path: Path, refserver_tls: RefServer
) -> None:
    # Checked by hand: `promptpath --version > FILE` without PYTHONUNBUFFERED and without
    # entry.end's flush leaves FILE empty (print buffers, os._exit drops the buffer).
    def run(*args: str) -> tuple[int, str, str]:
        if sink == "pipe":
            res = _run(*args, env=BUFFERED)
            return res.returncode, res.stdout, res.stderr
        out = tmp_path / "stdout"
        with out.open("w") as fh:
            res = subprocess.run(
                [str(SCRIPT), *args], stdout=fh, stderr=subprocess.PIPE, text=True,
                env=BUFFERED, timeout=60,
            )  # fmt: skip
        return res.returncode, out.read_text(), res.stderr

    assert run("--version") == (0, f"promptpath {__version__}\n", "")
    code, out, _ = run("run", "ftp://x/y", "--json")  # the usage error's JSON, unflushed
    assert code == ExitCode.USAGE and json.loads(out)["exit_code"] == ExitCode.USAGE
    url = f"https://localhost:{refserver_tls.port}/v1/chat/completions"
    assert refserver_tls.ca is not None
    code, out, err = run(
        "run", url, "--cacert", refserver_tls.ca, "--http", "2", "--json",
        "-H", "x-promptpath-ttft-ms: 0", "-H", "x-promptpath-tokens: 3",
    )  # fmt: skip
    assert code == 0, err
    body = json.loads(out)
    assert body["ok"] and body["tokens"]["count"] == 3
    assert err.rstrip("\n").splitlines()[-1].startswith("OK: first token after")


def test_the_key_log_is_whole_when_the_process_ends(
    tmp_path: Path, refserver_tls: RefServer
) -> None:
    # Checked by hand: the ssl module writes SSLKEYLOGFILE through OpenSSL's BIO, flushed
    # per line, so os._exit loses none of it (the header and the five TLS 1.3 secrets).
    keylog = tmp_path / "keys.log"
    url = f"https://localhost:{refserver_tls.port}/v1/chat/completions"
    assert refserver_tls.ca is not None
    res = _run(
        "run", url, "--cacert", refserver_tls.ca, "--http", "1.1",
        "-H", "x-promptpath-ttft-ms: 0", "-H", "x-promptpath-tokens: 2",
        env={**BUFFERED, "SSLKEYLOGFILE": str(keylog)},
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    labels = {line.split()[0] for line in keylog.read_text().splitlines() if line[:1] != "#"}
    assert labels == {
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0",
        "SERVER_TRAFFIC_SECRET_0",
        "EXPORTER_SECRET",
    }


def test_a_reader_gone_before_the_last_flush_makes_the_closed_pipe_code() -> None:
    read, write = os.pipe()
    os.close(read)  # nobody will read: the first write fails with EPIPE
    try:
        res = subprocess.run(
            [str(SCRIPT), "--version"], stdout=write, stderr=subprocess.PIPE, text=True,
            env=BUFFERED, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write)
    # Python's own exit would print "Exception ignored ... BrokenPipeError" and exit 120.
    assert (res.returncode, res.stderr) == (ExitCode.PIPE_CLOSED, "")


def test_the_console_script_writes_the_dataclass_method_cache_beside_the_bytecode() -> None:
    from promptpath.cli import dccache

    cache = dccache._cache_path()
    assert cache is not None
    cache.unlink(missing_ok=True)  # a cache: any process may write it again
    env = {k: v for k, v in BUFFERED.items() if k != "PYTHONDONTWRITEBYTECODE"}
    res = _run("--help", env=env)
    assert res.returncode == 0, res.stderr
    # (That a process finding it compiles nothing is tests/unit/test_dccache.py's.)
    assert cache.is_file() and cache.stat().st_size > 0
