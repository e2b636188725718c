"""`promptpath diff` through the real main(), on documents edited in the test (pure
parsing: the measurements come from examples/sample-run.json)."""

from __future__ import annotations

import copy
import json
import random
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "promptpath" / "report"
SAMPLE: dict[str, Any] = json.loads((ROOT / "examples" / "sample-run.json").read_text())


def validate(body: dict[str, Any]) -> None:
    run_schema = Resource.from_contents(json.loads((REPORT / "schema.json").read_text()))
    diff_schema = json.loads((REPORT / "diff-schema.json").read_text())
    registry = Registry().with_resource(run_schema.id() or "", run_schema)
    jsonschema.Draft202012Validator(diff_schema, registry=registry).validate(body)


def _run(first_token: float, rng: random.Random) -> dict[str, Any]:
    """The sample run with its first token moved (the milestones after it with it)."""
    run = copy.deepcopy(SAMPLE)
    shift = first_token + rng.gauss(0, 3) - run["stages_ms"]["first_token"]
    run["stages_ms"]["first_token"] += shift
    run["ttft_ms"]["from_start"] += shift
    run["ttft_ms"]["from_request"] += shift
    run["first_output_ms"]["from_start"] += shift
    run["milestones_ms"]["end"] += shift
    for span in run["spans_ms"]:
        if span["stage"] in ("first_token", "streaming"):
            span["end"] += shift
        if span["stage"] == "streaming":
            span["start"] += shift
    return run


def _series(first_token: float, n: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    return {"schema": "promptpath.series/1", "runs": [_run(first_token, rng) for _ in range(n)]}


def _write(tmp_path: Path, name: str, body: object) -> str:
    path = tmp_path / name
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return str(path)


def test_a_slower_first_token_regresses_exit_1_and_the_headline_attributes_it(
    tmp_path: Path,
) -> None:
    before = _write(tmp_path, "before.json", _series(100, 10, 1))
    after = _write(tmp_path, "after.json", _series(400, 10, 2))
    res = run_cli("diff", before, after, "--json")
    assert res.exit_code == ExitCode.FINDING, res.stderr
    body = json.loads(res.stdout)
    validate(body)
    assert body["ok"] is False and body["exit_code"] == 1
    verdicts = {m["name"]: m["verdict"] for m in body["metrics"]}
    assert verdicts["first_token"] == verdicts["ttft"] == "regressed"
    for stage in ("dns", "connect", "tls", "request", "wait"):
        assert verdicts[stage] == "unchanged", stage
    match = re.match(
        r"TTFT \+(\d+) ms \(p50, 10 vs 10 runs\): \+(\d+) ms in first_token \(after the request"
        r" reached the server\); DNS, connect, TLS, request, wait unchanged$",
        body["headline"],
    )
    assert match is not None, body["headline"]
    assert all(abs(int(g) - 300) <= 10 for g in match.groups())  # 3 ms noise a run
    # The terminal report (stderr: stdout is JSON) ends with the same headline.
    assert res.stderr.rstrip().splitlines()[-1] == f"REGRESSED: {body['headline']}"


def test_identical_documents_exit_0_with_no_change(tmp_path: Path) -> None:
    path = _write(tmp_path, "same.json", _series(100, 10, 1))
    res = run_cli("diff", path, path, "--json")
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    validate(body)
    assert body["facts"] == [] and not any(m["verdict"] != "unchanged" for m in body["metrics"])
    assert body["headline"].startswith("No change beyond noise (p50, 10 vs 10 runs)")


def test_a_new_issuer_and_a_via_header_are_reported_as_facts(tmp_path: Path) -> None:
    after_doc = _series(100, 10, 2)
    for run in after_doc["runs"]:
        run["tls"]["cert"]["issuer"] = "CN=Corp SSL Inspection\x1b[2J,O=Corp"
        run["response_headers"]["via"] = "1.1 squid (squid/5.7)"
    before = _write(tmp_path, "before.json", _series(100, 10, 1))
    after = _write(tmp_path, "after.json", after_doc)
    res = run_cli("diff", before, after, "--json")
    assert res.exit_code == 0, res.stderr  # facts inform; only a metric regression exits 1
    body = json.loads(res.stdout)
    validate(body)
    facts = {f["name"]: f for f in body["facts"]}
    assert facts["cert_issuer"]["after"] == ["CN=Corp SSL Inspection\x1b[2J,O=Corp"]
    assert facts["cert_issuer"]["severity"] == "warn"
    assert facts["via"]["before"] == ["none"] and facts["via"]["after"] == ["1.1 squid (squid/5.7)"]
    assert "certificate issuer changed from" in body["headline"]
    # On the terminal the escape sequence is spelled out, never sent.
    assert "\x1b" not in res.stderr and "\\x1b[2J" in res.stderr


def test_single_runs_say_they_show_only_large_changes(tmp_path: Path) -> None:
    rng = random.Random(5)
    before = _write(tmp_path, "a.json", _run(100, rng))
    after = _write(tmp_path, "b.json", _run(130, rng))
    res = run_cli("diff", before, after, "--json")
    body = json.loads(res.stdout)
    validate(body)
    assert res.exit_code == 0
    assert any("Single runs can only show large changes" in n for n in body["notes"])
    assert {m["method"] for m in body["metrics"]} == {"single"}


def test_a_run_against_a_series_is_judged_against_its_spread(tmp_path: Path) -> None:
    series = _write(tmp_path, "series.json", _series(100, 20, 1))
    run = _write(tmp_path, "run.json", _run(900, random.Random(3)))
    res = run_cli("diff", series, run, "--json")
    body = json.loads(res.stdout)
    assert res.exit_code == 1
    ttft = next(m for m in body["metrics"] if m["name"] == "ttft")
    assert ttft["method"] == "spread" and ttft["verdict"] == "regressed"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("hello", "is not a promptpath document"),
        ('{"schema": "promptpath.run/9"}', "unknown schema version 'promptpath.run/9'"),
        ('{"schema": "other/1"}', "is not a promptpath document"),
        ("[1, 2]", "is not a promptpath document"),
        ('{"schema": "promptpath.watch/1", "seq": 1}\n{"x": 1}\n', "not a watch history"),
    ],
)
def test_bad_input_is_one_line_naming_the_file_exit_2(
    tmp_path: Path, content: str, message: str
) -> None:
    good = _write(tmp_path, "good.json", SAMPLE)
    bad = _write(tmp_path, "bad.json", content)
    res = run_cli("diff", good, bad, "--json")
    assert res.exit_code == ExitCode.USAGE
    [line] = res.stderr.splitlines()
    assert line.startswith(f"promptpath: diff: {bad}") and message in line, line
    usage = json.loads(res.stdout)
    assert usage["exit_code"] == 2 and usage["error"]["stage"] == "config"


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    res = run_cli("diff", str(tmp_path / "nope.json"), str(tmp_path / "nope.json"))
    assert res.exit_code == ExitCode.USAGE
    assert (
        res.stderr.strip()
        == f"promptpath: diff: cannot read {tmp_path / 'nope.json'}: No such file or directory"
    )


def _history(tmp_path: Path, truncated: bool = False) -> str:
    lines = []
    rng = random.Random(9)
    for i in range(40):
        hour = 10 if i < 20 else 14
        run = _run(100 if hour == 10 else 400, rng)
        at = f"2026-12-06T{hour:02d}:{i % 20:02d}:00.000Z"
        lines.append(
            json.dumps({"schema": "promptpath.watch/1", "seq": i + 1, "at": at, "run": run})
        )
    text = "\n".join(lines) + "\n"
    if truncated:
        text += '{"schema": "promptpath.watch/1", "seq": 41, "at": "2026-12'
    return _write(tmp_path, "history.jsonl", text)


def test_two_time_ranges_of_one_history(tmp_path: Path) -> None:
    history = _history(tmp_path, truncated=True)
    res = run_cli("diff", history, "--before", "10:00-11:00", "--after", "14:00-15:00", "--json")
    assert res.exit_code == 1, res.stderr
    body = json.loads(res.stdout)
    validate(body)
    assert body["before"] == {"source": "history.jsonl", "kind": "history", "runs": 20,
                              "failed": 0, "range": "10:00-11:00"}  # fmt: skip
    assert next(m for m in body["metrics"] if m["name"] == "ttft")["verdict"] == "regressed"
    same = run_cli("diff", history, "--before", "10:00-10:10", "--after", "10:10-10:20")
    assert same.exit_code == 0, same.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--before", "10:00-11:00"), "--before and --after go together"),
        (("--before", "10-11", "--after", "14:00-15:00"), "is not HH:MM-HH:MM"),
        (
            ("--before", "03:00-04:00", "--after", "14:00-15:00"),
            "holds no runs between 03:00-04:00",
        ),
        ((), "give two documents"),
    ],
)
def test_history_range_mistakes_are_usage_errors(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    res = run_cli("diff", _history(tmp_path), *args)
    assert res.exit_code == ExitCode.USAGE
    assert message in res.stderr and len(res.stderr.splitlines()) == 1


def test_compare_documents_are_compared_protocol_by_protocol(tmp_path: Path) -> None:
    rng = random.Random(4)
    h2, h3 = _run(100, rng), _run(100, rng)
    h3["http_version"] = "HTTP/3"
    slow_h3 = _run(900, rng)
    slow_h3["http_version"] = "HTTP/3"
    before = _write(tmp_path, "b.json", {"schema": "promptpath.compare/1", "results": [h2, h3]})
    after = _write(tmp_path, "a.json", {"schema": "promptpath.compare/1", "results": [h2, slow_h3]})
    assert run_cli("diff", before, after).exit_code == 0  # HTTP/2's runs: the same
    assert run_cli("diff", before, after, "--protocol", "3").exit_code == 1


def test_html_draws_both_sides_on_one_page_that_fetches_nothing(tmp_path: Path) -> None:
    after_doc = _series(400, 10, 2)
    after_doc["runs"][0]["response_headers"]["via"] = "1.1 <script>alert(1)</script>"
    before = _write(tmp_path, "before.json", _series(100, 10, 1))
    after = _write(tmp_path, "after.json", after_doc)
    page_path = tmp_path / "diff.html"
    res = run_cli("diff", before, after, "--html", str(page_path))
    assert res.exit_code == 1, res.stderr
    page = page_path.read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:)?//""", page)
    assert page.count("class='stage'") == 2 * len(SAMPLE["spans_ms"])  # both waterfalls
    assert "data-stage='first_token' data-verdict='regressed'" in page
    data = re.search(r"<script type='application/json' id='promptpath-report'>(.*)</script>", page)
    assert data is not None
    body = json.loads(data.group(1))
    validate(body)
    assert body["shown"]["before"]["schema"] == "promptpath.run/1"
