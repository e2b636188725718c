"""The real ``main()`` in-process, with its own streams and environment variables."""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass

from promptpath.cli.faces import main
from promptpath.environment import Environment


@dataclass(frozen=True, slots=True)
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(
    *argv: str,
    environ: Mapping[str, str] | None = None,
    stdout_isatty: bool = False,
    stderr_isatty: bool = False,
) -> CliResult:
    """``promptpath ARGV`` with ``environ`` as its whole environment (nothing from
    os.environ), plus COLUMNS=100 so the report's layout does not depend on the runner."""
    out, err = io.StringIO(), io.StringIO()
    env = Environment(
        stdout=out,
        stderr=err,
        stdout_isatty=stdout_isatty,
        stderr_isatty=stderr_isatty,
        environ={"COLUMNS": "100", **(environ or {})},
    )
    code = main(list(argv), env=env)
    return CliResult(code, out.getvalue(), err.getvalue())


def fresh_import_shows(code: str) -> str:
    """What ``code`` prints in a new interpreter: a module's import side effects, seen
    where no earlier test imported it first."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()
