"""benchmarks/flake_suite.py reads each round's JUnit report into pytest node ids and
counts, per test, the rounds it failed in. The report below is what pytest 9 with xdist
wrote for a small file (a pass, a parametrised failure, a skip in a class, a fixture error,
checked by hand); the ids are the ones pytest itself prints."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "flake_suite.py"

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite
name="pytest" errors="1" failures="1" skipped="1" tests="5" time="4.875">
<testcase classname="tests.unit.test_s" name="test_p[2]" time="0.001"><failure
message="AssertionError: x is not one&#10;  second line&#10;assert 2 == 1">trace</failure>
</testcase>
<testcase classname="tests.unit.test_s" name="test_ok" time="0.001" />
<testcase classname="tests.unit.test_s" name="test_p[1]" time="0.001" />
<testcase classname="tests.unit.test_s" name="test_e" time="0.000"><error
message="failed on setup with &quot;RuntimeError: fixture broke&quot;">trace</error></testcase>
<testcase classname="tests.unit.test_s.TestK" name="test_m" time="0.001"><skipped
type="pytest.skip" message="no jq here">skip</skipped></testcase>
</testsuite></testsuites>"""


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_bench_flake_suite", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _exists(path: str) -> bool:
    return path == "tests/unit/test_s.py"


def test_each_testcase_becomes_its_pytest_node_id_and_state() -> None:
    fs = _load()
    got = {o.node: (o.state, o.why) for o in fs.read_junit(JUNIT, _exists)}
    assert got == {
        "tests/unit/test_s.py::test_p[2]": ("failed", "AssertionError: x is not one"),
        "tests/unit/test_s.py::test_ok": ("passed", ""),
        "tests/unit/test_s.py::test_p[1]": ("passed", ""),
        "tests/unit/test_s.py::test_e": (
            "error",
            'failed on setup with "RuntimeError: fixture broke"',
        ),
        "tests/unit/test_s.py::TestK::test_m": ("skipped", "no jq here"),
    }


def test_a_test_reported_twice_in_a_round_keeps_the_worse_state() -> None:
    fs = _load()
    twice = JUNIT.replace(
        '<testcase classname="tests.unit.test_s" name="test_ok" time="0.001" />',
        '<testcase classname="tests.unit.test_s" name="test_ok" time="0.001"><error'
        ' message="failed on teardown with &quot;OSError&quot;">t</error></testcase>'
        '<testcase classname="tests.unit.test_s" name="test_ok" time="0.001" />',
    )
    (ok,) = [o for o in fs.read_junit(twice, _exists) if o.node.endswith("::test_ok")]
    assert (ok.state, ok.why) == ("error", 'failed on teardown with "OSError"')


def test_the_table_counts_rounds_failed_over_rounds_run_with_the_first_reason() -> None:
    fs = _load()
    one = fs.read_junit(JUNIT, _exists)
    two = [
        fs.Outcome(node=o.node, state="passed")
        if o.node.endswith("test_p[2]")
        else fs.Outcome(node=o.node, state=o.state, why=o.why + " (round 2)")
        for o in one
        if not o.node.endswith("test_ok")  # not collected that round
    ]
    table = fs.tally([one, two])
    flaky = table["tests/unit/test_s.py::test_p[2]"]
    assert (flaky.rounds_failed, flaky.rounds_run, flaky.failed_in) == (1, 2, [1])
    assert table["tests/unit/test_s.py::test_ok"].rounds_run == 1
    error = table["tests/unit/test_s.py::test_e"]
    assert (error.rounds_failed, error.rounds_run, error.failed_in) == (2, 2, [1, 2])
    assert error.why == 'failed on setup with "RuntimeError: fixture broke"'  # the first
    assert table["tests/unit/test_s.py::TestK::test_m"].rounds_failed == 0  # a skip
    assert fs.failure_table(table) == [
        "2/2  tests/unit/test_s.py::test_e\n"
        '      failed on setup with "RuntimeError: fixture broke"',
        "1/2  tests/unit/test_s.py::test_p[2]\n      AssertionError: x is not one",
    ]


def test_the_lab_versions_are_read_from_the_ci_script() -> None:
    fs = _load()
    script = (BENCH.parents[1] / ".ci" / "run").read_text()
    pinned = fs.pinned_lab_versions(script)
    assert set(pinned) == {"mitmproxy", "litellm"}
    assert f"MITMPROXY_VERSION={pinned['mitmproxy']}\n" in script
