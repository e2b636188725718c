"""--junit, --har, --prom-textfile, --pushgateway and --label over real runs on loopback,
read back by the consumers CI systems and monitoring use (junitparser, haralyzer,
prometheus_client's parser)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from haralyzer import HarParser
from junitparser import Failure, JUnitXml
from prometheus_client.parser import text_string_to_metric_families

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import CliResult, run_cli
from tests.helpers.har12 import HAR_1_2
from tests.helpers.refserver import RefServer, reference_server

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def url(server: RefServer) -> str:
    return f"https://localhost:{server.port}/v1/chat/completions"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(ref: RefServer, *args: str) -> CliResult:
    return run_cli("run", url(ref), "--cacert", str(ref.ca), "-4", "--json", *args)


Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def samples(text: str) -> Samples:
    """Every sample of an exposition, keyed by name and label set."""
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(found: Samples, name: str, **want: str) -> float:
    hits = [v for (n, labels), v in found.items() if n == name and set(want.items()) <= labels]
    assert len(hits) == 1, f"{name} {want}: {hits}"
    return hits[0]


@pytest.fixture(scope="module")
def exported(ref: RefServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One successful run with every file export, and what it printed."""
    out = tmp_path_factory.mktemp("exports")
    res = run(
        ref,
        "-H",
        "x-promptpath-ttft-ms: 150",
        "--junit",
        str(out / "junit.xml"),
        "--har",
        str(out / "run.har"),
        "--prom-textfile",
        str(out / "promptpath.prom"),
        "--label",
        "region=eu-west",
        "--label",
        'runner=a "quoted" \\ name',
    )
    return {"res": res, "dir": out, "report": json.loads(res.stdout)}


def test_a_run_with_exports_still_prints_its_own_result_first(exported: dict[str, Any]) -> None:
    res, report = exported["res"], exported["report"]
    assert res.exit_code == 0, res.stderr
    jsonschema.validate(report, SCHEMA)
    assert report["ok"] is True and "export failed" not in res.stderr


def test_junit_reads_back_as_one_suite_with_a_passing_case_per_stage(
    exported: dict[str, Any],
) -> None:
    xml = JUnitXml.fromfile(str(exported["dir"] / "junit.xml"))
    suites = list(xml)
    assert len(suites) == 1
    suite = suites[0]
    report = exported["report"]
    assert suite.name == report["target"]["url"]
    cases = {case.name: case for case in suite}
    assert list(cases) == list(report["stages_ms"])
    assert {"dns", "connect", "tls", "request", "wait", "first_token"} <= set(cases)
    for name, case in cases.items():
        assert case.is_passed, name
        assert case.time == pytest.approx(report["stages_ms"][name] / 1000, abs=1e-6)
    assert suite.failures == 0 and suite.tests == len(cases)


def test_har_loads_in_haralyzer_and_keeps_the_har_1_2_structure(exported: dict[str, Any]) -> None:
    data = json.loads((exported["dir"] / "run.har").read_text())
    jsonschema.validate(data, HAR_1_2, format_checker=jsonschema.FormatChecker())
    report = exported["report"]
    entries = HarParser(data).pages[0].entries
    assert len(entries) == 1
    entry = entries[0]
    assert entry.request.method == "POST" and entry.url == report["target"]["url"]
    assert entry.status == 200 and entry.serverAddress == "127.0.0.1"
    assert entry.startTime is not None and entry.startTime.tzinfo is not None
    t, stages = entry.timings, report["stages_ms"]
    assert t["dns"] == stages["dns"] and t["ssl"] == stages["tls"]
    # The spec puts ssl inside connect, and time is the sum without counting it twice.
    assert t["connect"] == pytest.approx(stages["connect"] + stages["tls"], abs=1e-3)
    assert t["send"] == stages["request"] and t["wait"] == stages["wait"]
    assert entry.time == pytest.approx(sum(v for k, v in t.items() if k != "ssl" and v > 0))
    custom = entry.raw_entry["_promptpath"]
    assert custom["ttft_ms"] == report["ttft_ms"] and custom["tokens"] == report["tokens"]
    # The injected 150 ms first-token delay lies between the headers and the first token.
    assert t["receive"] >= 150


def test_prometheus_textfile_parses_and_carries_the_runs_figures_in_seconds(
    exported: dict[str, Any],
) -> None:
    path: Path = exported["dir"] / "promptpath.prom"
    text = path.read_text()
    found = samples(text)
    report = exported["report"]
    labels = {"region": "eu-west", "runner": 'a "quoted" \\ name'}
    ttft = report["ttft_ms"]["from_start"] / 1000
    assert value(found, "promptpath_ttft_seconds", quantile="0.5", **labels) == pytest.approx(ttft)
    assert value(found, "promptpath_ttft_seconds_count", **labels) == 1
    dns = value(found, "promptpath_stage_duration_seconds", stage="dns", quantile="0.99")
    assert dns == pytest.approx(report["stages_ms"]["dns"] / 1000)
    assert value(found, "promptpath_success", target=report["target"]["url"]) == 1
    assert value(found, "promptpath_exit_code") == 0
    assert "# TYPE promptpath_ttft_seconds summary" in text
    assert "# HELP promptpath_stage_duration_seconds " in text
    # The textfile collector runs as another user: the file must be readable by others.
    assert path.stat().st_mode & 0o004
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


def test_a_failed_runs_failing_stage_is_a_junit_failure_and_its_code_stays(
    ref: RefServer, tmp_path: Path
) -> None:
    res = run(
        ref,
        "-H",
        "x-promptpath-status: 503",
        "--junit",
        str(tmp_path / "j.xml"),
        "--har",
        str(tmp_path / "r.har"),
        "--prom-textfile",
        str(tmp_path / "p.prom"),
    )
    assert res.exit_code == ExitCode.HTTP_STATUS, res.stderr
    error = json.loads(res.stdout)["error"]
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "j.xml"))))
    failed = [c for c in suite if not c.is_passed]
    assert [c.name for c in failed] == [error["stage"]]
    (outcome,) = failed[0].result
    assert isinstance(outcome, Failure) and outcome.message == error["message"]
    assert "503" in outcome.message
    har = json.loads((tmp_path / "r.har").read_text())
    jsonschema.validate(har, HAR_1_2)
    assert har["log"]["entries"][0]["response"]["status"] == 503
    found = samples((tmp_path / "p.prom").read_text())
    assert value(found, "promptpath_success") == 0
    assert value(found, "promptpath_exit_code") == ExitCode.HTTP_STATUS
    assert value(found, "promptpath_failed_runs", stage=error["stage"]) == 1


def test_a_refused_connect_is_a_failure_on_the_connect_case(tmp_path: Path) -> None:
    port = closed_port()
    res = run_cli(
        "run", f"http://127.0.0.1:{port}/v1/chat/completions", "--junit", str(tmp_path / "j.xml")
    )
    assert res.exit_code == ExitCode.CONNECT
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "j.xml"))))
    failed = {c.name: c.result for c in suite if not c.is_passed}
    assert list(failed) == ["connect"]
    assert isinstance(failed["connect"][0], Failure) and failed["connect"][0].type == "refused"


@pytest.mark.parametrize("flag", ["--junit", "--har", "--prom-textfile"])
def test_an_unwritable_export_path_is_refused_before_any_request(flag: str, tmp_path: Path) -> None:
    # Nothing listens on the port: had a request gone out, the exit would be 4 (connect).
    target = f"http://127.0.0.1:{closed_port()}/v1/chat/completions"
    for path in (tmp_path / "missing-dir" / "out", tmp_path):
        res = run_cli("run", target, flag, str(path), "--json")
        assert res.exit_code == ExitCode.USAGE, res.stderr
        assert flag in res.stderr and str(path) in res.stderr
        assert json.loads(res.stdout)["error"]["kind"] == "bad_option"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--label", "region"], "NAME=VALUE"),
        (["--label", "2region=x"], "not a Prometheus label name"),
        (["--label", "__name__=x"], "not a Prometheus label name"),
        (["--label", "stage=x"], "sets that label itself"),
        (["--label", "a=1", "--label", "a=2"], "given twice"),
        (["--pushgateway", "ftp://127.0.0.1:9091"], "http(s)://HOST:PORT"),
        # Before: exit 70 (ValueError, then httpx's InvalidURL after the run); the userinfo
        # is not quoted back.
        (["--pushgateway", "http://u:Pw9@[::1"], "--pushgateway wants http(s)://HOST:PORT"),
        (["--pushgateway", "http://u:Pw9@h:abc"], "--pushgateway wants http(s)://HOST:PORT"),
        (["--pushgateway", "http://u:Pw9@h:99999"], "--pushgateway wants http(s)://HOST:PORT"),
        (["--pushgateway", "http://[::1"], "--pushgateway wants http(s)://HOST:PORT"),
        (["--junit", "same.out", "--har", "same.out"], "--junit and --har name the same file"),
    ],
)
def test_bad_labels_and_pushgateway_urls_are_usage_errors(
    args: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # relative export paths land here
    res = run_cli("run", f"http://127.0.0.1:{closed_port()}/v1/chat/completions", *args)
    assert res.exit_code == ExitCode.USAGE and said in res.stderr
    assert "Pw9" not in res.stderr


def test_a_pushgateway_that_is_down_gives_exit_10_after_the_runs_own_result(
    ref: RefServer, tmp_path: Path
) -> None:
    down = f"http://127.0.0.1:{closed_port()}"
    res = run(ref, "--pushgateway", down, "--junit", str(tmp_path / "j.xml"))
    assert res.exit_code == ExitCode.EXPORT == 10
    assert json.loads(res.stdout)["ok"] is True  # the run's own result, whole
    (line,) = [ln for ln in res.stderr.splitlines() if "export failed" in ln]
    assert line.startswith(f"promptpath: export failed: --pushgateway {down}")
    # The other exports are still written.
    assert next(iter(JUnitXml.fromfile(str(tmp_path / "j.xml")))).tests > 0


def test_a_failed_export_does_not_hide_a_failed_runs_own_code(ref: RefServer) -> None:
    down = f"http://127.0.0.1:{closed_port()}"
    res = run(ref, "-H", "x-promptpath-status: 429", "--pushgateway", down)
    assert res.exit_code == ExitCode.HTTP_STATUS
    assert "export failed: --pushgateway" in res.stderr
