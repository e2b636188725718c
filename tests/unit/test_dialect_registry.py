"""The dialects' registry is the one list of their names: the JSON schemas, the command line
and the docs read it, and reading it loads no plug-in."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptpath.dialects.plugins import detect_provider, dialects
from promptpath.dialects.registry import CLIENTS, DEMO_NAMES, NAMES, module_of

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
    # every --help (python -X importtime -m promptpath --help, 2026-12-06). Read from
    # sys.modules, not -X importtime: importlib.import_module (how plugins.py loads a
    # plug-in) is not in importtime's log.
    code = (
        "import json, sys\n"
        "from promptpath.cli.entry import run\n"
        f"sys.argv = ['promptpath', *{argv!r}]\n"
        f"assert run({argv!r}) == 0\n"
        "ours = ('promptpath.dialects', 'promptpath.streams')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(ours))), file=sys.stderr)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    ours = json.loads(out.stderr.strip().splitlines()[-1])
    assert ours in (
        [],  # --version stops before the option table
        ["promptpath.dialects", "promptpath.dialects.registry"],
    ), ours


#: The modules of dialects/ beside the plug-ins' folders: what the plug-ins share.
SHARED = {"__init__", "registry", "spec", "plugins", "stream", "sniff", "doctable"}


def test_every_name_is_one_plugin_whose_spec_bears_it_and_every_plugin_is_named() -> None:
    assert [d.name for d in dialects()] == list(NAMES)
    here = ROOT / "promptpath/dialects"
    assert {p.stem for p in here.glob("*.py")} == SHARED
    plugins = {p.parent.name for p in here.glob("*/__init__.py")}
    assert plugins == {module_of(name).rsplit(".", 1)[1] for name in NAMES}


def test_no_dialects_path_suffix_ends_anothers() -> None:
    # Suffixes are tried after every pattern, in the registry's order: that order must not
    # decide anything, as it did not when they were one table.
    suffixes = [(d.name, s) for d in dialects() for s in d.path_suffixes]
    clashes = [(a, b) for a in suffixes for b in suffixes if a != b and a[1].endswith(b[1])]
    assert clashes == []


def test_a_path_two_plugins_patterns_match_goes_to_the_one_that_says_more() -> None:
    vertex = "/v1/projects/p/locations/l/publishers/google/models/m:streamGenerateContent"
    assert detect_provider(vertex) == "vertex"
    assert detect_provider("/v1beta/models/m:streamGenerateContent") == "gemini"
    # Azure's path ends as OpenAI's does; the pattern is tried before the suffix.
    assert detect_provider("/openai/deployments/d/chat/completions") == "azure"
    assert detect_provider("/x/openai/deployments/d/chat/completions") == "openai"


def test_each_client_shape_is_defined_once_and_each_default_is_one() -> None:
    from promptpath.tracer.request import SHAPES

    defined = [shape.name for d in dialects() for shape in d.shapes]
    assert len(defined) == len(set(defined)), defined
    assert all(d.client in SHAPES for d in dialects())
    assert list(SHAPES) == list(CLIENTS)


def test_the_demo_offers_the_dialects_whose_plugins_name_a_path_and_says_which() -> None:
    from promptpath.core.exitcodes import ExitCode
    from tests.helpers.cli import run_cli

    offered = [d.name for d in dialects() if d.demo_path is not None]
    assert offered == ["openai", "responses", "anthropic", "ollama"]  # as the demo's table had
    assert list(DEMO_NAMES) == offered  # what demo --help lists without a plug-in
    shown = run_cli("demo", "--help", environ={"COLUMNS": "200"})
    assert "|".join(offered) in shown.stdout
    assert "gemini" not in shown.stdout  # help listed all eleven, the demo accepted four
    res = run_cli("demo", "--provider", "gemini")  # refused before any server starts
    assert res.exit_code == ExitCode.USAGE
    assert f"--provider must be one of {', '.join(offered)}, got 'gemini'" in res.stderr


def test_a_client_loads_every_plugin_but_no_emulation_and_the_server_each_one() -> None:
    # Each emulation is ~20 classes on server/dialect.py's ABC: ~8 ms of every run's CPU
    # when the plug-ins held them (2026-12-06, load 9), for code only `serve` runs.
    code = (
        "import json, sys\n"
        "from promptpath.dialects.plugins import decoder_for, detect_provider, dialects\n"
        "from promptpath.tracer.request import SHAPES\n"
        "dialects(), detect_provider('/v1/messages'), decoder_for('bedrock-invoke')\n"
        "client = sorted(m for m in sys.modules if m.startswith('promptpath.server')\n"
        "                or m.endswith('.emulation'))\n"
        "import promptpath.server.routing\n"
        "served = sorted(m for m in sys.modules if m.endswith('.emulation'))\n"
        "print(json.dumps([client, served]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    client, served = json.loads(out.stdout)
    assert client == []
    assert served == sorted(f"{module_of(name)}.emulation" for name in NAMES)
