"""examples/github-actions.yml and examples/gitlab-ci.yml: valid YAML, and every promptpath
command line in them runs against the reference endpoint on loopback, its profile
pointed there, and writes the files the workflow keeps as artifacts."""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

EXAMPLES = Path(__file__).parents[2] / "examples"
#: What the CI system would put into ${{ ... }} and $VARIABLES (secrets: a dummy key).
#: Runner names have spaces, as real ones do: an example that does not quote an expansion
#: splits into stray arguments, and the test sees it as the shell would.
CI_VALUES = {
    "secrets.OPENAI_API_KEY": "sk-test-example",
    "runner.name": "GitHub Actions 7",
    "CI_RUNNER_DESCRIPTION": "gitlab runner eu",
}
_SHELL_ENDS = {">", ">>", "|", "&&", "||", ";", "2>", "2>&1"}


def _shell_lines(script: str) -> Iterator[str]:
    yield from script.replace("\\\n", " ").splitlines()


def _commands() -> Iterator[tuple[str, str, dict[str, str]]]:
    """(example file, command line, the step's environment) for each promptpath line."""
    github = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    for job in github["jobs"].values():
        for step in job["steps"]:
            env = {str(k): str(v) for k, v in (step.get("env") or {}).items()}
            for line in _shell_lines(step.get("run", "")):
                yield "github-actions.yml", line.strip(), env
    gitlab = yaml.safe_load((EXAMPLES / "gitlab-ci.yml").read_text())
    for job in gitlab.values():
        env = {str(k): str(v) for k, v in (job.get("variables") or {}).items()}
        for entry in job.get("script", []):
            for line in _shell_lines(entry):
                yield "gitlab-ci.yml", line.strip(), env


COMMANDS = [c for c in _commands() if c[1].startswith("promptpath ")]


def _substitute(text: str) -> str:
    text = re.sub(r"\$\{\{\s*([^}]+?)\s*\}\}", lambda m: CI_VALUES[m.group(1)], text)
    return re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: CI_VALUES[m.group(1)], text)


def argv_of(line: str) -> list[str]:
    """The command's arguments, up to the first redirection or shell operator."""
    words = shlex.split(_substitute(line))
    end = next((i for i, w in enumerate(words) if w in _SHELL_ENDS), len(words))
    return words[1:end]


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def test_each_example_has_promptpath_command_lines() -> None:
    files = {name for name, _, _ in COMMANDS}
    assert files == {"github-actions.yml", "gitlab-ci.yml"}
    assert any("--junit" in line and "--har" in line for _, line, _ in COMMANDS)


def test_the_github_workflow_keeps_junit_and_har_and_fails_on_exit_9() -> None:
    workflow: dict[str, Any] = yaml.safe_load((EXAMPLES / "github-actions.yml").read_text())
    steps = workflow["jobs"]["smoke"]["steps"]
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact"))
    assert upload["if"] == "always()"
    assert {"promptpath-junit.xml", "promptpath.har"} <= set(upload["with"]["path"].split())
    verdict = next(s for s in steps if s.get("name") == "Verdict")
    assert re.search(r"^\s*9\)[^\n]*exit 1", verdict["run"], re.M)


@pytest.mark.parametrize(
    ("example", "line", "env"), COMMANDS, ids=[f"{c[0]}:{i}" for i, c in enumerate(COMMANDS)]
)
def test_example_command_lines_run_against_the_reference_endpoint(
    example: str,
    line: str,
    env: dict[str, str],
    ref: RefServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    argv = argv_of(line)
    # The profile the example names, pointed at the reference endpoint.
    profiles = {w for w in argv if w.startswith("prod-")}
    config = tmp_path / "promptpath.toml"
    config.write_text(
        "".join(
            f'[profiles.{name}]\nurl = "{ref.url}/v1/chat/completions"\nmax_tokens = 8\n'
            for name in profiles
        )
    )
    environ = {k: _substitute(v) for k, v in env.items()} | {"PROMPTPATH_CONFIG": str(config)}
    monkeypatch.chdir(tmp_path)  # the example's relative artifact paths land here
    res = run_cli(*argv, environ=environ)
    assert res.exit_code == 0, f"{example}: {line}\n{res.stderr}"
    if "--json" in argv:
        assert json.loads(res.stdout)["exit_code"] == 0
    for flag in ("--junit", "--har", "--prom-textfile"):
        if flag in argv:
            written = tmp_path / argv[argv.index(flag) + 1]
            assert written.stat().st_size > 0, f"{flag} wrote nothing"
