"""`promptpath --version` must not pay for the transports, the server or TLS parsing."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("aioquic", "hypercorn", "cryptography", "h2", "httpcore", "httpx", "dns", "anyio", "rich")


def test_cli_import_leaves_heavy_dependencies_unloaded() -> None:
    code = (
        "import sys, promptpath.cli\n"
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
