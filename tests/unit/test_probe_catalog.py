"""The probes' catalogue is the one list of probes: the folders, the registered classes,
both help texts and the docs table all name exactly what it names (the help texts were
once spelt by hand and both went stale), and reading it costs `--help` no probe's I/O."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from promptpath.probes.base import REGISTRY
from promptpath.probes.catalog import NAMES, folder_of, module_of
from promptpath.probes.suite import load_builtin
from tests.helpers.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
PROBES = ROOT / "promptpath" / "probes"


def test_every_probe_folder_is_in_the_catalogue_and_every_name_has_its_folder() -> None:
    folders = {path.parent.name for path in PROBES.glob("*/probe.py")}
    assert folders == {folder_of(name) for name in NAMES}
    assert len(set(NAMES)) == len(NAMES)


def test_each_name_loads_the_probe_registered_under_it_and_no_other_is_registered() -> None:
    loaded = load_builtin()
    assert list(loaded) == list(NAMES)
    for name, cls in loaded.items():
        assert cls.name == name, f"{module_of(name)} registers {cls.name!r}, not {name!r}"
        assert cls.__module__ == module_of(name)
    assert set(REGISTRY) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_verdict_names_its_probe_by_one_constant_probe(name: str) -> None:
    # One spelling across the folders (it was PROBE in seven verdicts and NAME in four).
    verdict = importlib.import_module(f"promptpath.probes.{folder_of(name)}.verdict")
    assert name == verdict.PROBE
    assert not hasattr(verdict, "NAME")


def _help_of(command: str) -> str:
    res = run_cli(command, "--help")
    assert res.exit_code == 0 and res.stderr == ""
    return " ".join(res.stdout.split())  # rich wraps help lines at spaces


@pytest.mark.parametrize(
    ("command", "pattern"),
    [
        ("run", r"--probe NAME Run a probe after the trace: (.+?) or all \(repeatable\)\."),
        ("probe", r"\[NAME\]\.\.\. Probes to run: (.+?) \(default: all\)\."),
    ],
)
def test_run_help_and_probe_help_list_every_registered_probe(command: str, pattern: str) -> None:
    match = re.search(pattern, _help_of(command))
    assert match is not None
    assert match.group(1).split(", ") == list(NAMES)
    assert set(match.group(1).split(", ")) == set(load_builtin())


def test_the_docs_table_lists_every_probe_in_the_catalogue_order_with_its_section() -> None:
    text = (ROOT / "docs" / "probes.md").read_text()
    rows = re.findall(r"^\| \[`([\w-]+)`\]\(#([\w-]+)\) \|", text, re.M)
    assert [name for name, _ in rows] == list(NAMES)
    assert all(anchor == name for name, anchor in rows)
    sections = re.findall(r"^## `([\w-]+)`$", text, re.M)
    assert sorted(sections) == sorted(NAMES)


def test_help_reads_the_catalogue_without_importing_any_probe() -> None:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "promptpath", "run", "--help"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    assert "Probes:" in out.stdout
    loaded = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    assert "promptpath.probes.catalog" in loaded
    # The names, and the settings (`--help` shows the defaults: plain dataclasses in one
    # module); nothing of a probe's folder: no socket, no tracer, no verdict.
    probe_modules = {m for m in loaded if m.startswith("promptpath.probes.")}
    assert probe_modules == {"promptpath.probes.catalog", "promptpath.probes.settings"}
