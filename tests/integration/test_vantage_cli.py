"""`promptpath vantage` end to end over real loopback sockets, against a stand-in for
Prometheus' HTTP API that answers what each test scripts: the table in every output, and
each way Prometheus can fail named with its exit code. (A real Prometheus scraping real
exporters: tests/lab/test_vantage.py.)"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.net import promapi
from tests.helpers.cli import run_cli

SCHEMA = json.loads(
    (Path(__file__).parents[2] / "promptpath" / "report" / "vantage_schema.json").read_text()
)

#: query -> (status, body bytes, extra headers)
Answer = Callable[[str], tuple[int, bytes, dict[str, str]]]


@dataclass
class FakeProm:
    url: str
    seen: list[dict[str, Any]] = field(default_factory=list)


def _vector(series: list[tuple[dict[str, str], float]]) -> bytes:
    result = [{"metric": m, "value": [1700000000.0, repr(v)]} for m, v in series]
    return json.dumps(
        {"status": "success", "data": {"resultType": "vector", "result": result}}
    ).encode()


@contextlib.contextmanager
def fake_prometheus(answer: Answer) -> Iterator[FakeProm]:
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            form = urllib.parse.parse_qs(self.rfile.read(length).decode())
            seen.append({"path": self.path, "form": form, "headers": dict(self.headers)})
            status, body, headers = answer(form["query"][0])
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            if "content-length" not in {k.lower() for k in headers}:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield FakeProm(url=f"http://127.0.0.1:{server.server_address[1]}", seen=seen)
    finally:
        server.shutdown()
        server.server_close()


def _fleet(query: str) -> tuple[int, bytes, dict[str, str]]:
    """Two vantages: "far" slow in connect and TLS, "near" fast; a hostile label value."""
    hostile = "<script>\x1b[31m"
    stages = {"connect": (0.040, 0.0005), "tls": (0.045, 0.002), "wait": (0.02, 0.021)}

    def per_stage(far_scale: float, near_scale: float) -> bytes:
        series = []
        for stage, (far, near) in stages.items():
            series.append(({"vantage": "far", "stage": stage}, far * far_scale))
            series.append(({"vantage": hostile, "stage": stage}, near * near_scale))
        return _vector(series)

    if query.startswith("quantile_over_time(0.5,"):
        return 200, per_stage(1, 1), {}
    if query.startswith("quantile_over_time(0.95,"):
        return 200, per_stage(1.05, 2), {}
    if query.startswith("count_over_time(promptpath_stage"):
        return (
            200,
            _vector([({"vantage": v, "stage": s}, 10) for v in ("far", hostile) for s in stages]),
            {},
        )
    if query.startswith("count_over_time(promptpath_success"):
        return 200, _vector([({"vantage": "far"}, 10), ({"vantage": hostile}, 10)]), {}
    if query.startswith("sum_over_time(promptpath_success"):
        return 200, _vector([({"vantage": "far"}, 10), ({"vantage": hostile}, 10)]), {}
    if query.startswith("count_over_time(promptpath_edge"):
        return 200, _vector([({"vantage": "far", "edge": "FRA"}, 10)]), {}
    return 400, b'{"status":"error","errorType":"bad_data","error":"unexpected"}', {}


def test_the_table_names_the_slow_vantage_in_every_output(tmp_path: Path) -> None:
    page = tmp_path / "vantage.html"
    with fake_prometheus(_fleet) as prom:
        shown = run_cli("vantage", "--prometheus", prom.url, "--target", "api", "--html", str(page))
        as_json = run_cli("vantage", "--prometheus", prom.url, "--json", "--since", "30m")
    assert shown.exit_code == 0, shown.stderr
    assert "far stands out: connect 40.0 ms" in shown.stdout
    assert "40.0/42.0*" in shown.stdout and "FRA" in shown.stdout
    # The label value is shown, never obeyed: its control character spelled out.
    assert "\x1b" not in shown.stdout and "<script>" in shown.stdout
    html = page.read_text()
    assert "<script>" not in html and "&lt;script&gt;" in html and 'class="out"' in html
    assert as_json.exit_code == 0, as_json.stderr
    doc = json.loads(as_json.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["standout"] == {"vantage": "far", "stages": ["connect", "tls"]}
    assert doc["since_s"] == 1800 and doc["by"] == "vantage" and doc["target"] is None
    # Every query asked at one instant, as a form, with Prometheus' own timeout.
    forms = [s["form"] for s in prom.seen[-6:]]
    assert len({f["time"][0] for f in forms}) == 1
    # What is left of --timeout (10 s) for each query, as Prometheus' own query timeout.
    assert all(0 < int(f["timeout"][0].removesuffix("ms")) <= 10_000 for f in forms), forms
    assert all(s["path"] == "/api/v1/query" for s in prom.seen)


def test_the_urls_path_is_the_base_and_its_credentials_go_as_basic_auth() -> None:
    with fake_prometheus(_fleet) as prom:
        url = prom.url.replace("http://", "http://ops:s3cr3t-pw@") + "/prometheus/"
        result = run_cli("vantage", "--prometheus", url, "--json")
    assert result.exit_code == 0, result.stderr
    assert prom.seen[0]["path"] == "/prometheus/api/v1/query"
    assert prom.seen[0]["headers"]["Authorization"] == "Basic b3BzOnMzY3IzdC1wdw=="
    assert "s3cr3t" not in result.stdout + result.stderr


def _error(status: int, body: bytes, **headers: str) -> Answer:
    return lambda _query: (status, body, dict(headers))


@pytest.mark.parametrize(
    ("answer", "code", "stage", "kind", "said"),
    [
        (
            _error(
                400, b'{"status":"error","errorType":"bad_data","error":"parse error \\u001b[2J"}'
            ),
            6,
            "response",
            "http_400",
            "refused the query (HTTP 400, bad_data): parse error \\x1b[2J",
        ),
        (_error(503, b"<html>down</html>"), 6, "response", "http_503", "answered HTTP 503"),
        (
            _error(200, b"<html>a login page</html>"),
            7,
            "response",
            "malformed",
            "not the Prometheus API",
        ),
        (
            _error(200, b'{"status":"success","data":{"resultType":"matrix","result":[]}}'),
            7,
            "response",
            "malformed",
            "not an instant vector",
        ),
        (
            _error(
                200, b'{"status":"success","data":{"resultType":"vector","result":[{"metric":1}]}}'
            ),
            7,
            "response",
            "malformed",
            "not a Prometheus vector",
        ),
        (
            _error(200, b"", **{"Content-Length": str(1 << 30)}),
            7,
            "response",
            "protocol_error",
            "over 16 MiB",
        ),
        (lambda _q: (200, _vector([]), {}), 2, "config", "usage", "no series: Prometheus at"),
    ],
)
def test_each_way_prometheus_fails_is_one_line_naming_it(
    answer: Answer, code: int, stage: str, kind: str, said: str
) -> None:
    with fake_prometheus(answer) as prom:
        result = run_cli("vantage", "--prometheus", prom.url, "--json", "--module", "chat")
    assert result.exit_code == code, result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("promptpath: vantage: ") and said in line, line
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["error"]["stage"] == stage and doc["error"]["kind"] == kind
    assert doc["exit_code"] == code


def test_an_answer_past_the_size_bound_is_refused_as_it_arrives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(promapi, "MAX_ANSWER_BYTES", 4096)
    chunked = b"".join(b"%x\r\n%s\r\n" % (1000, b"x" * 1000) for _ in range(10)) + b"0\r\n\r\n"
    with fake_prometheus(
        _error(200, chunked, **{"Transfer-Encoding": "chunked", "content-length": ""})
    ) as prom:
        result = run_cli("vantage", "--prometheus", prom.url)
    assert result.exit_code == 7, result.stderr
    assert "the answer is over" in result.stderr


def test_a_prometheus_that_refuses_the_connection_is_exit_4() -> None:
    with socket.socket() as sock:  # a port nobody listens on: bound, never listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        result = run_cli("vantage", "--prometheus", f"http://127.0.0.1:{port}", "--json")
    assert result.exit_code == 4, result.stderr
    assert "cannot be reached: connection refused" in result.stderr
    assert json.loads(result.stdout)["error"]["kind"] == "refused"


def test_a_prometheus_that_never_answers_is_cut_at_the_timeout() -> None:
    with socket.socket() as sock:  # accepts (the kernel's backlog), never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(4)
        begin = time.monotonic()
        result = run_cli(
            "vantage",
            "--prometheus",
            f"http://127.0.0.1:{sock.getsockname()[1]}",
            "--timeout",
            "0.5",
        )
        took = time.monotonic() - begin
    assert result.exit_code == 8, result.stderr
    assert "did not answer" in result.stderr
    # 0.5 s and the command's own work: measured 0.50-0.67 s over 20 runs at load 3.2.
    assert took < 3.0


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "--prometheus URL is needed"),
        (("--prometheus", "ftp://127.0.0.1:9090"), "--prometheus wants http(s)://"),
        (("--prometheus", "http://127.0.0.1:9090/?x=1"), "no ?query"),
        (("--prometheus", "http://127.0.0.1:9090", "--since", "soon"), "--since 'soon'"),
        (("--prometheus", "http://127.0.0.1:9090", "--by", "a-b"), "--by 'a-b'"),
        (("--prometheus", "http://127.0.0.1:9090", "--timeout", "0"), "--timeout must be"),
        (("--prometheus", "http://127.0.0.1:9090", "--target", "a\tb"), "control characters"),
        (("--prometheus", "http://127.0.0.1:9090", "--html", "/nonexistent-dir/x.html"), "--html"),
    ],
)
def test_bad_options_are_usage_errors_before_any_query(args: tuple[str, ...], said: str) -> None:
    result = run_cli("vantage", *args, "--json")
    assert result.exit_code == 2, result.stderr
    assert said in result.stderr
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, SCHEMA)
    assert doc["error"]["stage"] == "config"


def test_the_url_can_come_from_the_environment() -> None:
    with fake_prometheus(_fleet) as prom:
        result = run_cli("vantage", environ={"PROMPTPATH_PROMETHEUS_URL": prom.url})
    assert result.exit_code == 0, result.stderr
    assert "far stands out" in result.stdout
