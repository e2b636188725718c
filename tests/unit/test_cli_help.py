"""`--help` and unknown options: what a new user reads before anything runs."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import get_args

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from promptpath.environment import Environment
from promptpath.options import ClientName, HTTPChoice, Provider
from tests.helpers.cli import fresh_import_shows, run_cli

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())


def help_text(*command: str) -> str:
    res = run_cli(*command, "--help")
    assert res.exit_code == 0 and res.stderr == ""
    return res.stdout


@pytest.mark.parametrize("command", ["run", "probe", "demo", "serve", "exporter", "vantage"])
def test_help_shows_no_type_placeholders(command: str) -> None:
    text = help_text(command)
    assert not re.search(r"<(str|int|float|list\[str\]|int range)>", text), text
    assert " TEXT" not in text and "{TARGET}" not in text


@pytest.mark.parametrize("command", ["run", "probe"])
def test_help_lists_the_choices_each_checked_option_accepts(command: str) -> None:
    options = {
        line.split()[0]: line.split()[1]
        for line in help_text(command).splitlines()
        if line.startswith("  --") and len(line.split()) >= 2
    }
    # The metavars are spelled out in cli.py; these are the sets the values are checked
    # against, so a new provider, client or HTTP version must reach --help too.
    assert options["--http"].split("|") == list(get_args(HTTPChoice))
    assert options["--provider"].split("|") == list(get_args(Provider))
    assert options["--as"].split("|") == list(get_args(ClientName))
    assert options["--fail-on"] == "warn|fail"


@pytest.mark.parametrize(
    ("option", "metavar"),
    [
        ("--resolve", "HOST:PORT:ADDR"),
        ("--cacert", "FILE"),
        ("--timeout", "SECONDS"),
        ("--max-tokens", "N"),
        ("--api-key-env", "NAME"),
        ("--idle-max", "SECONDS"),
    ],
)
def test_help_names_what_an_option_takes(option: str, metavar: str) -> None:
    assert re.search(rf"^  {re.escape(option)} {re.escape(metavar)}\b", help_text("run"), re.M)


def test_help_shows_the_target_argument_plainly() -> None:
    text = help_text("probe")
    assert text.startswith("Usage: promptpath probe [OPTIONS] TARGET [NAME]...\n")


def test_serve_help_tells_of_the_header_controls_and_stats() -> None:
    text = help_text("serve")
    assert "x-promptpath-<option>" in text and "x-promptpath-pause-after: 3" in text
    assert 'request body\'s "promptpath" object' in " ".join(text.split())
    assert "GET /stats" in text


def test_a_misspelt_option_gets_one_line_naming_the_real_one() -> None:
    res = run_cli("run", "https://h/v1/messages", "--timout", "3")
    assert res.exit_code == ExitCode.USAGE and res.stdout == ""
    assert res.stderr == "promptpath: no such option --timout: did you mean --timeout?\n"


def test_a_misspelt_option_under_json_gives_the_suggestion_in_the_usage_json() -> None:
    res = run_cli("probe", "https://h/v1/messages", "--timout", "3", "--json")
    assert res.exit_code == ExitCode.USAGE
    body = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert body["error"]["kind"] == "usage"
    assert body["error"]["message"] == "no such option --timout: did you mean --timeout?"


def test_an_option_near_nothing_points_to_help() -> None:
    res = run_cli("run", "https://h/v1/messages", "--zzz")
    assert res.exit_code == ExitCode.USAGE
    assert res.stderr == "promptpath: no such option --zzz (promptpath run --help lists them)\n"


def test_canary_controls_offers_exactly_the_ways_the_probes_know() -> None:
    from promptpath.probes.canary import VIA_CHOICES

    options = dict(re.findall(r"^  (--[\w-]+) (\S+)", help_text("run"), re.M))
    assert options["--canary-controls"].split("|") == list(VIA_CHOICES)
    res = run_cli("run", "http://127.0.0.1:9/v1/chat/completions", "--canary-controls", "query")
    assert res.exit_code == ExitCode.USAGE
    assert "--canary-controls must be one of both, headers, body" in res.stderr


# -- the lazy group: commands are built only when run or asked for --help -----------------
def _help_of_group(group: object, *argv: str) -> str:
    """``promptpath ARGV --help`` through ``group`` (a click group from the app), as text."""
    import typer

    from promptpath.cli import faces as cli

    assert isinstance(group, typer.core.TyperGroup)
    out = io.StringIO()
    env = Environment(stdout=out, stderr=io.StringIO(), environ={"COLUMNS": "100"})
    code = group.main([*argv, "--help"], prog_name="promptpath", standalone_mode=False, obj=env)
    assert code in (0, None), cli
    return out.getvalue()


@pytest.mark.parametrize(
    "argv",
    [(), ("run",), ("probe",), ("demo",), ("serve",), ("diff",), ("vantage",), ("watch",)],
)
def test_help_is_the_same_whether_the_commands_are_built_lazily_or_all_at_once(
    argv: tuple[str, ...],
) -> None:
    import typer

    from promptpath.cli.faces import _COMMANDS, app

    lazy = typer.main.get_command(app)
    eager = typer.main.get_command(app)
    built = [eager.commands[name] for name in _COMMANDS]  # type: ignore[attr-defined]
    assert [c.name for c in built] == [
        "run",
        "probe",
        "demo",
        "serve",
        "exporter",
        "diff",
        "mcp",
        "vantage",
        "watch",
    ]
    expected = _help_of_group(eager, *argv)
    assert expected.startswith("Usage: promptpath")
    assert _help_of_group(lazy, *argv) == expected
    if not argv:  # the group's --help lists every command without building one
        assert dict(lazy.commands._built) == {}  # type: ignore[attr-defined]


def test_a_misspelt_command_is_named_with_the_nearest_real_one() -> None:
    res = run_cli("rnu", "https://h/v1/messages")
    assert res.exit_code == ExitCode.USAGE
    assert "No such command 'rnu'. Did you mean 'run'?" in res.stderr


def test_importing_the_faces_makes_no_commands_options() -> None:
    # Each command's options (run and probe: ~100 typer.Options each) are made when that
    # command is built, not when the CLI module loads: `promptpath --help` makes none.
    made = fresh_import_shows(
        "import promptpath.cli.faces as f\n"
        "print([n for n in ('run', 'probe', 'demo', 'exporter')"
        " if '__signature__' in vars(getattr(f, n))])\n"
    )
    assert made == "[]", made
