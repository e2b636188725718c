"""The injected Environment decides where the report goes, its colour and its width."""

from __future__ import annotations

import io
import os
import sys

import pytest

from promptpath.cli.commands import report_console
from promptpath.environment import Environment


def env_of(
    *, stdout_isatty: bool = False, stderr_isatty: bool = False, **environ: str
) -> Environment:
    return Environment(
        stdout=io.StringIO(),
        stderr=io.StringIO(),
        stdout_isatty=stdout_isatty,
        stderr_isatty=stderr_isatty,
        environ=environ,
    )


@pytest.mark.parametrize(
    ("stdout_isatty", "json_out", "to_stdout"),
    [(True, False, True), (True, True, False), (False, False, False), (False, True, False)],
)
def test_report_goes_to_stdout_only_on_a_terminal_without_json(
    stdout_isatty: bool, json_out: bool, to_stdout: bool
) -> None:
    env = env_of(stdout_isatty=stdout_isatty)
    report_console(json_out, env).print("waterfall")
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    assert ("waterfall" in env.stdout.getvalue()) is to_stdout
    assert ("waterfall" in env.stderr.getvalue()) is not to_stdout


@pytest.mark.parametrize(
    ("stderr_isatty", "environ", "coloured"),
    [
        (True, {}, True),
        (True, {"NO_COLOR": "1"}, False),
        (True, {"NO_COLOR": ""}, True),  # no-color.org: empty means unset
        (False, {}, False),
        (False, {"FORCE_COLOR": "1"}, True),
        (False, {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    ],
)
def test_escape_codes_only_where_the_environment_allows_colour(
    stderr_isatty: bool, environ: dict[str, str], coloured: bool
) -> None:
    env = env_of(stderr_isatty=stderr_isatty, **environ)
    report_console(True, env).print("[bold red]FAILED[/bold red] in tls")
    assert isinstance(env.stderr, io.StringIO)
    text = env.stderr.getvalue()
    assert "FAILED" in text and ("\x1b[" in text) is coloured


def test_width_comes_from_the_environments_columns_not_the_process(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert report_console(False, env_of(COLUMNS="48")).width == 48


def test_from_process_is_the_real_process() -> None:
    env = Environment.from_process()
    assert env.stdout is sys.stdout and env.stderr is sys.stderr and env.environ is os.environ
    assert env.argv == tuple(sys.argv[1:])
    injected = env_of()
    assert Environment.of(injected) is injected  # what main() put on the click context
    assert Environment.of(None).environ is os.environ  # the app run without main()
