"""--markdown FILE through the real CLI over real sockets on loopback: `demo`, and `run`
against the reference endpoint, a failed run and a run carrying keys among them.

Observed by hand first (`promptpath demo --markdown /tmp/md/demo.md`, this branch): the
file's first line is the JSON headline in bold, the context line names the target URL,
the dialect, the model, the HTTP version and the start time, the stage table has one
row per span (DNS, TCP connect, TLS, request, wait (TTFB), first token, streaming) and
the Reproduce block holds the command as typed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from promptpath.report.markdown import PROSE_CHARS, text
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.integration

ENV_KEY = "sk-markdown-Ab3dEf6hIj9kLm2nOp5qRs8t"
HEADER_KEY = "hdr-markdown-9f8e7d6c5b4a39281706"
QUERY_KEY = "qk-markdown-0a1b2c3d4e5f60718293"


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("ref")) as server:
        yield server


def _stage_rows(lines: list[str]) -> list[str]:
    at = lines.index("### Stages")
    rows = []
    for line in lines[at + 4 :]:
        if not line.startswith("| "):
            break
        rows.append(line)
    return rows


def test_demo_writes_the_summary_its_json_report_holds(tmp_path: Path) -> None:
    out = tmp_path / "demo.md"
    res = run_cli("demo", "--json", "--markdown", str(out))
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"**{text(body['headline'], PROSE_CHARS)}**"
    assert body["headline"].startswith("OK: first token after")
    for part in (body["target"]["url"], body["target"]["model"], body["http_version"]):
        assert part in lines[2], part
    assert len(_stage_rows(lines)) == len(body["spans_ms"])
    ttft = body["ttft_ms"]["from_start"]
    assert f"- TTFT: {ttft:.1f} ms from t0" in "\n".join(lines)
    at = lines.index("### Reproduce")
    assert lines[at + 3] == f"promptpath demo --json --markdown {out}"


def test_a_run_with_keys_writes_none_of_them_and_reproduce_says_what_was_left_out(
    ref: RefServer, tmp_path: Path
) -> None:
    out = tmp_path / "run.md"
    url = f"https://localhost:{ref.port}/v1/chat/completions?api_key={QUERY_KEY}"
    res = run_cli(
        "run", url, "--cacert", str(ref.ca), "-4", "--json",
        "-H", f"x-api-key: {HEADER_KEY}", "--markdown", str(out),
        environ={"OPENAI_API_KEY": ENV_KEY},
    )  # fmt: skip
    assert res.exit_code == 0, res.stderr
    body = json.loads(res.stdout)
    assert body["request"]["key_sent"] is True  # the environment's key went on the wire
    md = out.read_text(encoding="utf-8")
    for secret in (ENV_KEY, HEADER_KEY, QUERY_KEY):
        assert secret not in md and secret[:12] not in md
    lines = md.splitlines()
    assert lines[0] == f"**{text(body['headline'], PROSE_CHARS)}**"
    at = lines.index("### Reproduce")
    assert "api_key=[redacted]" in lines[at + 3] and "x-api-key" not in lines[at + 3]
    assert "The credential header x-api-key was left out" in "\n".join(lines[at + 5 :])


def test_a_failed_run_writes_its_error_and_keeps_its_exit_code(
    ref: RefServer, tmp_path: Path
) -> None:
    out = tmp_path / "failed.md"
    res = run_cli(
        "run", f"https://localhost:{ref.port}/v1/chat/completions", "--cacert", str(ref.ca),
        "-4", "--json", "-H", "x-promptpath-status: 503", "--markdown", str(out),
    )  # fmt: skip
    body = json.loads(res.stdout)
    assert res.exit_code == body["exit_code"] != 0, res.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == f"**{text(body['headline'], PROSE_CHARS)}**"
    assert lines[0].startswith("**FAIL")
    at = lines.index("### Error")
    assert "HTTP status 503" in lines[at + 2]
    assert lines[at + 3] == f"- {text(body['error']['message'], PROSE_CHARS)}"
