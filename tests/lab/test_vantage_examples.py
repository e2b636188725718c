"""examples/vantage/: the recording rules pass promtool (check, and their unit tests), and
those tests can fail.

Observed by hand (2026-12-06, promtool 2.42): ``promtool test rules`` checks the exact set
of firing alerts (an extra or a missing one fails it) and prints the difference; with the
alert's 5 ms floor raised to 50 ms the "far" vantage (40 ms over the fleet) is not fired
and the test fails naming PromptpathVantageStandsOut.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require_binary

pytestmark = pytest.mark.lab

EXAMPLES = Path(__file__).parents[2] / "examples" / "vantage"


def _run(*args: str, cwd: Path = EXAMPLES) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def test_promtool_accepts_the_recording_rules_and_their_unit_tests() -> None:
    promtool = require_binary("promtool")
    for args in (("check", "rules", "rules.yml"), ("test", "rules", "rules.test.yml")):
        done = _run(promtool, *args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        assert "SUCCESS" in done.stdout


def test_the_rule_unit_tests_can_fail(tmp_path: Path) -> None:
    promtool = require_binary("promtool")
    for name in ("rules.yml", "rules.test.yml"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    rules = tmp_path / "rules.yml"
    text = rules.read_text()
    assert "> 0.005" in text
    rules.write_text(text.replace("> 0.005", "> 0.05"))
    done = _run(promtool, "test", "rules", "rules.test.yml", cwd=tmp_path)
    assert done.returncode != 0
    assert "PromptpathVantageStandsOut" in done.stdout + done.stderr
