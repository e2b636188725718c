"""`promptpath exporter` over real sockets: a subprocess probing the reference endpoint.

Facts checked by hand first (2026-12-02, this machine): a probe of the reference endpoint
(4 tokens, no pacing) answers in ~0.1-0.2 s; with ``x-promptpath-ttft-ms: 3000`` and a
scrape timeout of 1.5 s (offset 0.5 s) the answer came after 0.99 s with probe_success 0
and the timeout in stage first_token; SIGTERM during a 3 s probe let it finish, then the
process exited 143.
"""

from __future__ import annotations

import re
import select
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.exporterlab import Exporter, exporter, samples
from tests.helpers.refserver import RefServer

EXAMPLES = Path(__file__).parents[2] / "examples" / "exporter"
FAST = '{ "x-promptpath-tokens" = "4", "x-promptpath-rate" = "400" }'
#: Tokens 20 ms apart: tokens per second needs two content events read apart. At 400/s a
#: loaded machine read all four in one read now and then (one stamp, a zero span, no
#: promptpath_tokens_per_second: the dashboard test failed once in the quick subset).
PACED = '{ "x-promptpath-tokens" = "4", "x-promptpath-rate" = "50" }'
SECRET = "sk-exporter-test-secret-4f9a1c"


def _config(ref: RefServer, extra: str = "") -> str:
    return f"""
[exporter]
max_in_flight = 2
min_interval_s = 0
scrape_timeout_offset_s = 0.5

[modules.chat]
provider = "openai"
model = "m-chat"
max_tokens = 8
timeout = 10
api_key_env = "PP_TEST_KEY"
headers = {FAST}

[modules.slow]
provider = "openai"
max_tokens = 8
headers = {{ "x-promptpath-ttft-ms" = "3000", "x-promptpath-tokens" = "2" }}
timeout = 10

[modules.tls]
provider = "openai"
max_tokens = 8
headers = {PACED}
probes = ["tls"]

[modules.broken]
provider = "openai"
max_tokens = 8
headers = {{ "x-promptpath-status" = "500" }}

[targets.local]
url = "{ref.url}/v1/chat/completions"
cacert = "{ref.ca}"

[targets.cached]
url = "{ref.url}/v1/chat/completions"
cacert = "{ref.ca}"
modules = ["chat", "slow"]
min_interval_s = 300

[targets.budget]
url = "{ref.url}/v1/chat/completions"
cacert = "{ref.ca}"
modules = ["chat"]
daily_token_budget = 20
{extra}
"""


@pytest.fixture(scope="module")
def shared(
    refserver_tls: RefServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Exporter]:
    with exporter(
        tmp_path_factory.mktemp("exporter"),
        _config(refserver_tls),
        env={"PP_TEST_KEY": SECRET},
    ) as running:
        yield running


def _value(text: str, name: str, **labels: str) -> float:
    found = [v for got, v in samples(text).get(name, []) if labels.items() <= got.items()]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_a_probe_answers_the_textfile_metrics_and_probe_success(shared: Exporter) -> None:
    status, body, _ = shared.get("/probe?target=local&module=chat")
    assert status == 200
    assert _value(body, "probe_success") == 1
    assert _value(body, "promptpath_success") == 1
    assert 0 < _value(body, "promptpath_ttft_seconds", quantile="0.5") < 10
    assert 0 < _value(body, "probe_duration_seconds") < 10
    assert _value(body, "promptpath_exporter_cached") == 0
    line = [e for e in shared.log() if e["event"] == "probe" and e["module"] == "chat"][-1]
    assert line["target"] == "local" and line["result"] == "success"


def test_a_target_not_in_the_allow_list_is_refused_without_any_connection(
    shared: Exporter,
) -> None:
    with socket.socket() as bait:
        bait.bind(("127.0.0.1", 0))
        bait.listen(8)
        port = bait.getsockname()[1]
        for target in (
            f"http://127.0.0.1:{port}/v1/chat/completions",
            f"127.0.0.1:{port}",
            "not-in-the-config",
        ):
            status, body, _ = shared.get(f"/probe?target={target}&module=chat")
            assert status == 400, (target, body)
        status, body, _ = shared.get("/probe?target=local&module=nope")
        assert status == 400 and "unknown module" in body
        status, body, _ = shared.get("/probe?target=cached&module=tls")
        assert status == 400 and "does not allow" in body
        # No connection reached the bait: its accept queue is empty...
        assert select.select([bait], [], [], 0.3)[0] == []
        # ...and the check can see one: a connection of our own is in the queue at once.
        with socket.create_connection(("127.0.0.1", port)):
            assert select.select([bait], [], [], 2.0)[0] == [bait]
    _, metrics, _ = shared.get("/metrics")
    refused = "promptpath_exporter_scrapes_refused_total"
    assert _value(metrics, refused, reason="url_target") >= 1
    assert _value(metrics, refused, reason="unknown_target") >= 2  # HOST:PORT is no name


def test_a_scrape_timeout_shorter_than_the_probe_is_answered_in_time_with_the_stage(
    shared: Exporter,
) -> None:
    headers = {"X-Prometheus-Scrape-Timeout-Seconds": "1.5"}
    status, body, seconds = shared.get("/probe?target=local&module=slow", headers=headers)
    assert status == 200
    # The deadline is 1.5 - 0.5 s; the answer comes before Prometheus would give up.
    assert seconds < 1.5, seconds
    assert _value(body, "promptpath_exporter_deadline_seconds") == 1.0
    assert _value(body, "probe_success") == 0
    assert _value(body, "promptpath_exporter_timed_out", stage="first_token") == 1
    assert _value(body, "promptpath_failed_runs", stage="first_token") == 1
    assert _value(body, "promptpath_exit_code") == 8
    line = [e for e in shared.log() if e["event"] == "probe" and e["module"] == "slow"][-1]
    assert line["result"] == "timeout" and line["timed_out_in"] == "first_token"


def test_scrapes_within_the_interval_share_one_probe_and_are_marked_cached(
    shared: Exporter,
) -> None:
    results: list[str] = []

    def scrape() -> None:
        results.append(shared.get("/probe?target=cached&module=chat")[1])

    threads = [threading.Thread(target=scrape) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    _, later, _ = shared.get("/probe?target=cached&module=chat")
    cached = [_value(text, "promptpath_exporter_cached") for text in [*results, later]]
    assert sorted(cached) == [0, 1, 1, 1]  # one probe ran; the others waited for it
    assert _value(later, "promptpath_exporter_result_age_seconds") >= 0
    _, metrics, _ = shared.get("/metrics")
    ran = _value(
        metrics,
        "promptpath_exporter_probes_total",
        module="chat",
        target="cached",
        result="success",
    )
    assert ran == 1
    assert (
        _value(metrics, "promptpath_exporter_cache_hits_total", target="cached", module="chat") == 3
    )


def test_the_daily_budget_refuses_a_probe_that_would_pass_it(shared: Exporter) -> None:
    assert shared.get("/probe?target=budget&module=chat")[0] == 200  # 8 of 20
    assert shared.get("/probe?target=budget&module=chat")[0] == 200  # 16 of 20
    status, body, _ = shared.get("/probe?target=budget&module=chat")
    assert status == 429 and "daily token budget" in body
    _, metrics, _ = shared.get("/metrics")
    assert _value(metrics, "promptpath_exporter_budget_tokens_left", target="budget") == 4
    assert _value(metrics, "promptpath_exporter_scrapes_refused_total", reason="over_budget") == 1


def test_past_the_cap_on_probes_in_flight_a_scrape_is_refused(shared: Exporter) -> None:
    slow = {"X-Prometheus-Scrape-Timeout-Seconds": "2.5"}
    threads = [
        threading.Thread(
            target=shared.get, args=(f"/probe?target={t}&module=slow",), kwargs={"headers": slow}
        )
        for t in ("local", "cached")
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if _value(shared.get("/metrics")[1], "promptpath_exporter_probes_in_flight") == 2:
            break
        time.sleep(0.05)
    status, body, _ = shared.get("/probe?target=local&module=broken")
    for thread in threads:
        thread.join(30)
    assert status == 503 and "max_in_flight 2" in body


def test_the_key_is_in_no_answer_and_no_log_line(shared: Exporter) -> None:
    shared.get("/probe?target=local&module=chat")
    shared.get("/probe?target=local&module=broken")
    answers = [shared.get(p)[1] for p in ("/metrics", "/probe?target=local&module=broken")]
    for text in [*answers, shared.stderr.read_text()]:
        assert SECRET not in text
        assert SECRET[:12] not in text


def test_reload_keeps_the_old_config_when_the_new_one_is_invalid(
    refserver_tls: RefServer, tmp_path: Path
) -> None:
    with exporter(tmp_path, _config(refserver_tls), args=("--web.enable-lifecycle",)) as running:
        good = running.config.read_text()
        running.config.write_text(good + "\n[targets.new]\nbogus = 1\n")
        status, body, _ = running.post("/-/reload")
        assert status == 500 and "unknown key 'bogus'" in body
        assert running.get("/probe?target=local&module=broken")[0] == 200  # old one serves
        metrics = running.get("/metrics")[1]
        assert _value(metrics, "promptpath_exporter_config_last_reload_successful") == 0
        assert _value(metrics, "promptpath_exporter_config_reloads_total", result="failure") == 1
        running.config.write_text(
            good + f'\n[targets.new]\nurl = "{refserver_tls.url}/v1/chat/completions"\n'
            f'cacert = "{refserver_tls.ca}"\n'
        )
        running.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while running.get("/probe?target=new&module=broken")[0] != 200:
            assert time.monotonic() < deadline, running.stderr.read_text()
            time.sleep(0.1)
        metrics = running.get("/metrics")[1]
        assert _value(metrics, "promptpath_exporter_config_last_reload_successful") == 1
        reloads = [e for e in running.log() if e["event"] == "reload"]
        assert [e["ok"] for e in reloads] == [False, True]
        assert "unknown key 'bogus'" in reloads[0]["error"]


def _in_flight(running: Exporter, count: int) -> None:
    deadline = time.monotonic() + 5
    while _value(running.get("/metrics")[1], "promptpath_exporter_probes_in_flight") != count:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_sigterm_lets_the_probe_in_flight_finish_then_exits_143(
    refserver_tls: RefServer, tmp_path: Path
) -> None:
    with exporter(tmp_path, _config(refserver_tls), args=("--drain-timeout", "10")) as running:
        answers: list[tuple[int, str, float]] = []
        thread = threading.Thread(
            target=lambda: answers.append(running.get("/probe?target=local&module=slow"))
        )
        thread.start()
        _in_flight(running, 1)
        running.signal(signal.SIGTERM)
        # Draining: still reachable, not ready, starting no probe (docs/exporter.md).
        deadline = time.monotonic() + 5
        while (ready := running.get("/-/ready"))[0] != 503:
            assert ready[0] == 200 and time.monotonic() < deadline
            time.sleep(0.05)
        assert "draining" in ready[1]
        assert running.get("/metrics")[0] == 200
        assert running.get("/-/healthy")[0] == 200
        status, body, _ = running.get("/probe?target=local&module=chat")
        assert status == 503 and "shutting down" in body
        thread.join(30)
        assert running.process.wait(15) == 143
        [(status, body, _)] = answers
        assert status == 200 and _value(body, "probe_success") == 1  # the 3 s probe finished
        stopped = [e for e in running.log() if e["event"] == "stopped"]
        assert stopped == [stopped[0]] and stopped[0]["cut"] == 0
        assert stopped[0]["in_flight_at_signal"] == 1
        assert "Traceback" not in running.stderr.read_text()


def test_a_probe_the_drain_cuts_is_answered_503_naming_its_stage(
    refserver_tls: RefServer, tmp_path: Path
) -> None:
    with exporter(tmp_path, _config(refserver_tls), args=("--drain-timeout", "0.5")) as running:
        answers: list[tuple[int, str, float]] = []

        def scrape() -> None:
            answers.append(running.get("/probe?target=local&module=slow"))

        # One scrape runs the probe (3 s to its first token), the other waits for it.
        threads = [threading.Thread(target=scrape) for _ in range(2)]
        for thread in threads:
            thread.start()
        _in_flight(running, 1)
        time.sleep(0.2)  # the second scrape joined
        running.signal(signal.SIGTERM)
        for thread in threads:
            thread.join(30)
        assert running.process.wait(15) == 143
        assert len(answers) == 2
        for status, body, seconds in answers:
            assert status == 503, body
            assert "SIGTERM" in body and "'first_token'" in body
            assert seconds < 3  # cut after the 0.5 s drain, not the probe's 3 s
        [line] = [e for e in running.log() if e["event"] == "probe"]
        assert line["cut_by"] == "SIGTERM" and line["timed_out_in"] == "first_token"
        assert line["exit_code"] == 143 and "interrupted by SIGTERM" in line["message"]
        [stopped] = [e for e in running.log() if e["event"] == "stopped"]
        assert stopped["cut"] == 1
        assert "Traceback" not in running.stderr.read_text()


def test_a_reload_that_changes_a_targets_url_drops_its_cached_result(
    refserver_tls: RefServer, tmp_path: Path
) -> None:
    steady = (
        f'\n[targets.steady]\nurl = "{refserver_tls.url}/v1/chat/completions"\n'
        f'cacert = "{refserver_tls.ca}"\nmodules = ["chat"]\nmin_interval_s = 300\n'
    )
    with exporter(tmp_path, _config(refserver_tls, steady)) as running:
        for target in ("cached", "steady"):
            for cached in (0, 1):
                body = running.get(f"/probe?target={target}&module=chat")[1]
                assert _value(body, "promptpath_exporter_cached") == cached
        old = f'url = "{refserver_tls.url}/v1/chat/completions"\ncacert = "{refserver_tls.ca}"\n'
        text = running.config.read_text()
        moved = text.replace(
            "[targets.cached]\n" + old,
            "[targets.cached]\n" + old.replace("completions", "completions?moved=1"),
        )
        assert moved != text
        running.config.write_text(moved)
        running.signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while not [e for e in running.log() if e["event"] == "reload"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # The moved target is probed afresh at its new URL; the other keeps its result.
        body = running.get("/probe?target=cached&module=chat")[1]
        assert _value(body, "promptpath_exporter_cached") == 0
        line = [e for e in running.log() if e["event"] == "probe"][-1]
        assert line["target"] == "cached" and line["url"].endswith("?moved=1")
        body = running.get("/probe?target=steady&module=chat")[1]
        assert _value(body, "promptpath_exporter_cached") == 1


_PROMQL_WORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "sum",
        "avg",
        "min",
        "max",
        "count",
        "rate",
        "increase",
        "irate",
        "time",
        "quantile_over_time",
        "avg_over_time",
        "max_over_time",
        "min_over_time",
        "histogram_quantile",
        "humanizeDuration",
        "le",
    }
)


def _metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: identifiers outside label matchers,
    strings and ranges, less the language's own words."""
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr))
    grouped = set()
    for match in re.finditer(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        grouped |= {w.strip() for w in match.group(1).split(",")}
    return {w for w in words - _PROMQL_WORDS - grouped if "_" in w}


def _shipped_exprs() -> list[str]:
    import json

    import yaml

    dashboard = json.loads((EXAMPLES / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    rules = yaml.safe_load((EXAMPLES / "rules.yml").read_text())
    exprs += [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    return exprs


def test_every_metric_the_dashboard_and_the_rules_read_is_one_the_exporter_emits(
    shared: Exporter,
) -> None:
    texts = [
        shared.get("/probe?target=local&module=tls")[1],  # a finding, a certificate
        shared.get("/probe?target=local&module=broken")[1],  # a failed stage
        shared.get(
            "/probe?target=local&module=slow",
            headers={"X-Prometheus-Scrape-Timeout-Seconds": "1"},
        )[1],
        shared.get("/metrics")[1],
    ]
    emitted = {name for text in texts for name in samples(text)}
    exprs = _shipped_exprs()
    assert len(exprs) >= 20
    read = set().union(*(_metric_names(e) for e in exprs))
    assert {"probe_success", "promptpath_ttft_seconds", "promptpath_finding"} <= read
    assert read - emitted == set()


def _raw(exporter_port: int, data: bytes) -> bytes:
    """Bytes sent on one connection, and all the exporter answers until it closes."""
    with socket.create_connection(("127.0.0.1", exporter_port), timeout=10) as sock:
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_the_http_server_keeps_serving_through_bad_requests(shared: Exporter) -> None:
    # Two requests on one keep-alive connection, a HEAD among them (headers, no body).
    two = _raw(
        shared.port,
        b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /-/healthy HTTP/1.1\r\nHost: x\r\n\r\n",
    )
    assert two.count(b"HTTP/1.1 200") == 2 and two.endswith(b"OK\n")
    assert b"# HELP" not in two  # the HEAD answer carried no body
    assert _raw(shared.port, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400")
    big = b"POST /-/reload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000
    assert _raw(shared.port, big).startswith(b"HTTP/1.1 413")
    assert shared.get("/nowhere")[0] == 404
    assert shared.get("/-/reload")[0] == 405
    assert shared.get("/-/ready")[0] == 200
    assert shared.get("/metrics")[0] == 200  # still serving


def test_a_config_that_does_not_load_or_an_address_in_use_exits_2_in_one_line(
    refserver_tls: RefServer, tmp_path: Path
) -> None:
    from tests.helpers.cli import run_cli

    bad = tmp_path / "bad.toml"
    bad.write_text(_config(refserver_tls).replace("max_tokens = 8", "max_tokens = 0", 1))
    res = run_cli("exporter", "--config", str(bad))
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1 and "--max-tokens must be at least 1" in res.stderr
    assert "module 'chat'" in res.stderr and str(bad) in res.stderr
    good = tmp_path / "good.toml"
    good.write_text(_config(refserver_tls))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        res = run_cli("exporter", "--config", str(good), "--listen", f"127.0.0.1:{port}")
    assert res.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("exporter", "--config", str(good), "--listen", "nonsense")
    assert res.exit_code == 2 and "--listen wants HOST:PORT" in res.stderr
    res = run_cli("exporter")
    assert res.exit_code == 2 and "--config FILE is needed" in res.stderr


@pytest.mark.parametrize("where", ["config", "environment"])
def test_each_fresh_probe_goes_to_the_otlp_endpoint(
    refserver_tls: RefServer, tmp_path: Path, where: str
) -> None:
    # The OTLP export itself (spans, instants, conventions) is tests/integration/
    # test_otlp_export.py's; here: the exporter sends each fresh probe, never a cached
    # answer, with its target and module and the environment's resource attributes, to
    # the config's otlp_endpoint or else to OTEL_EXPORTER_OTLP_ENDPOINT.
    from tests.helpers.otlpreceiver import attributes, otlp_receiver

    with otlp_receiver() as receiver:
        config = _config(refserver_tls)
        env = {"OTEL_RESOURCE_ATTRIBUTES": "vantage=lab-1", "PP_TEST_KEY": SECRET}
        if where == "config":
            config = config.replace(
                "[exporter]\n", f'[exporter]\notlp_endpoint = "{receiver.url}"\n', 1
            )
            # The config's endpoint follows the exporter's opt-in, as a run's does.
            env["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        else:
            env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
        with exporter(tmp_path, config, env=env) as running:
            assert running.get("/probe?target=cached&module=chat")[0] == 200
            assert running.get("/probe?target=cached&module=chat")[0] == 200  # cached
            deadline = time.monotonic() + 15
            while not receiver.of("/v1/traces") or not receiver.of("/v1/metrics"):
                assert time.monotonic() < deadline, running.stderr.read_text()
                time.sleep(0.1)
            time.sleep(0.5)  # a second export, were there one, would be here by now
            (traces,) = receiver.of("/v1/traces")
            (resource_spans,) = traces.message.resource_spans
            resource = attributes(resource_spans.resource.attributes)
            assert resource["vantage"] == "lab-1"
            assert resource["promptpath.exporter.target"] == "cached"
            assert resource["promptpath.exporter.module"] == "chat"
            names = [s.name for ss in resource_spans.scope_spans for s in ss.spans]
            assert "chat m-chat" in names
            assert SECRET not in str(traces.message)
            (sent,) = receiver.of("/v1/metrics")
            sent_names = {
                m.name
                for rm in sent.message.resource_metrics
                for sm in rm.scope_metrics
                for m in sm.metrics
            }
            latest, default = "gen_ai.client.inference.duration", "gen_ai.client.operation.duration"
            expected, other = (latest, default) if where == "config" else (default, latest)
            assert expected in sent_names and other not in sent_names
            metrics = running.get("/metrics")[1]
            assert _value(metrics, "promptpath_exporter_otlp_exports_total", result="exported") == 1
