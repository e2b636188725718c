"""The dialects' registry is the one list of their names: the JSON schemas, the command line
and the docs read it, and reading it loads no plug-in."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptpath.dialects.registry import CLIENTS, NAMES

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = sorted((ROOT / "promptpath/report").glob("*.json"))


def _enums(node: object, key: str) -> Iterator[list[object]]:
    """Every ``enum`` of a property named ``key``, anywhere in a schema."""
    if isinstance(node, dict):
        for name, value in node.items():
            if name == key and isinstance(value, dict) and "enum" in value:
                yield value["enum"]
            yield from _enums(value, key)
    elif isinstance(node, list):
        for value in node:
            yield from _enums(value, key)


@pytest.mark.parametrize(("key", "names"), [("provider", NAMES), ("as", CLIENTS)])
def test_the_schemas_enumerate_the_registrys_names_in_its_order(
    key: str, names: tuple[str, ...]
) -> None:
    found = [e for path in SCHEMAS for e in _enums(json.loads(path.read_text()), key)]
    assert found, f"no enum of {key!r} in the schemas"
    assert all(enum == list(names) for enum in found), (found, names)


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["--version"]])
def test_help_and_version_read_the_names_and_load_no_plugin(argv: list[str]) -> None:
    # Before the registry, options.py imported every decoder to type one field: 30 ms of
    # every --help (python -X importtime -m promptpath --help, 2026-12-06).
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "promptpath", *argv],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    loaded = {line.split("|")[-1].strip() for line in out.stderr.splitlines() if "|" in line}
    ours = sorted(m for m in loaded if m.startswith(("promptpath.dialects", "promptpath.streams")))
    assert ours in (
        [],  # --version stops before the option table
        ["promptpath.dialects", "promptpath.dialects.registry"],
    ), ours
