"""The option table (promptpath/plan/flags.py) is the only declaration of `run`'s and `probe`'s
options: the commands take exactly its rows, --help shows them in its panels, the probes'
defaults are the settings' own, and the top floor's functions stay small."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import promptpath
from promptpath.cli.faces import app
from promptpath.plan import flags
from promptpath.plan.resolve import PROFILE_FILLS, probe_settings, values_for
from promptpath.probes.settings import ProbeSettings
from tests.helpers.cli import run_cli

PACKAGE = Path(promptpath.__file__).parent


def _command(name: str) -> object:
    import typer.main

    group = typer.main.get_group(app)
    return group.commands[name]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["run", "probe"])
def test_each_command_takes_exactly_the_table_rows_for_it(name: str) -> None:
    command = _command(name)
    options = {p.name for p in command.params if p.param_type_name == "option"}  # type: ignore[attr-defined]
    assert options == {flag.dest for flag in flags.flags_of(name)}


def test_probe_takes_a_subset_of_run_and_shares_every_declaration() -> None:
    run = {f.dest: f for f in flags.flags_of("run")}
    for flag in flags.flags_of("probe"):
        assert run[flag.dest] is flag  # one object: no second copy to drift


def test_no_two_rows_claim_a_spelling_or_a_dest() -> None:
    spellings = [name for f in flags.FLAGS for d in f.decls for name in d.split("/")]
    assert len(spellings) == len(set(spellings))
    assert len(flags.BY_DEST) == len(flags.FLAGS)


def test_run_help_shows_the_five_panels_in_order_each_with_its_options() -> None:
    res = run_cli("run", "--help")
    assert res.exit_code == 0
    headings = [
        line[:-1] for line in res.stdout.splitlines() if re.fullmatch(r"[A-Z][^ ].*:", line)
    ]
    assert headings == ["Arguments", *flags.PANELS, "Options"]
    for flag in flags.flags_of("run"):
        section = res.stdout.split(f"\n{flag.panel}:\n", 1)[1].split("\n\n", 1)[0]
        assert flag.decls[0].split("/")[0] in section, (flag.dest, flag.panel)


def test_probe_help_has_no_series_or_export_options() -> None:
    text = run_cli("probe", "--help").stdout
    for option in ("--count", "--concurrency", "--slo", "--junit", "--compare-http", "--probe "):
        assert option not in text


def test_the_probe_options_defaults_are_the_settings_defaults() -> None:
    # Nothing given on the command line: the probes get exactly their own defaults.
    assert probe_settings(values_for("https://h/v1/messages")) == ProbeSettings()
    for flag in flags.FLAGS:
        if flag.setting is not None:
            probe, name = flag.setting.split(".")
            assert getattr(getattr(ProbeSettings(), probe), name) == flag.default, flag.dest


def test_every_profile_key_fills_an_option_of_the_table() -> None:
    from promptpath.plan.profiles import PROFILE_KEYS

    assert set(PROFILE_FILLS) <= set(PROFILE_KEYS)
    assert set(PROFILE_FILLS.values()) <= set(flags.BY_DEST)


TOP_FLOOR = ["cli.py", "commands.py", "resolve.py", "runner.py", "reporting.py", "modes"]
MAX_PARAMETERS = 10


def test_no_top_floor_function_takes_more_than_ten_parameters() -> None:
    paths = [
        p
        for name in TOP_FLOOR
        for p in sorted(PACKAGE.glob(name if name.endswith(".py") else f"{name}/*.py"))
    ]
    assert len(paths) >= 9
    wide = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
                if count > MAX_PARAMETERS:
                    wide.append(f"{path.name}:{node.lineno} {node.name} takes {count}")
    assert not wide, wide
