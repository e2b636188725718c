"""`promptpath --version` must not pay for the transports, the server or TLS parsing."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("aioquic", "hypercorn", "cryptography", "h2", "httpcore", "httpx", "dns", "anyio", "rich")


def test_cli_import_leaves_heavy_dependencies_unloaded() -> None:
    code = (
        "import sys, promptpath.cli.faces\n"
        f"heavy = {HEAVY!r}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_version_runs_without_loading_them() -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "promptpath", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith("promptpath ")
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines()}
    assert not loaded & {"aioquic", "hypercorn", "cryptography", "h2", "httpcore"}


def test_a_cli_run_keeps_httpcore_from_loading_trio() -> None:
    """httpcore imports trio when it is installed; the CLI runs on asyncio (README claim)."""
    import socket

    with socket.socket() as s:  # bound, not listening: the run fails fast with exit 4
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}/v1/messages"
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "promptpath", "run", url, "--timeout", "5"],
            capture_output=True,
            text=True,
        )
    assert out.returncode == 4, out.stderr[-500:]
    loaded = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "httpcore" in loaded and "trio._core" not in loaded
