"""The installed console script: ``--version`` takes the fast path, everything else is
``cli.main`` (its own tests run it in process)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from promptpath import __version__

pytestmark = pytest.mark.integration

SCRIPT = Path(sys.executable).parent / "promptpath"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_version_answers_without_loading_typer() -> None:
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.argv = ['promptpath', '--version'];"
            " from promptpath.entry import main; code = main();"
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
