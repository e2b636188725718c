"""The Markdown summary (report/markdown.py) as a pure function of the report object: the
verdict line first, the figures a ticket needs, untrusted text inert, the size bounded.

The rendered Markdown is read back by markdown-it-py (rich's Markdown parser: CommonMark
plus the GFM table and strikethrough rules), so "inert" means what a renderer does with
it, not what a regular expression thinks."""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from promptpath.core.textsafe import visible
from promptpath.report import markdown
from promptpath.report.markdown import render_markdown

SAMPLE = Path(__file__).parents[2] / "examples" / "sample-run.json"

#: Everything a hostile server could try in a string: end the table row, open a link, an
#: image that fetches on render, raw HTML, a code span, emphasis, a heading on a line of
#: its own, an entity, a mention, GitHub math and a terminal escape.
HOSTILE = (
    "x | y | z\n# Heading\n[click](https://evil.example/) ![pic](https://evil.example/p.png)"
    " <img src=x onerror=alert(1)> `code` **bold** _em_ ~~gone~~ &amp; @team $x^2$ \x1b[31m"
    " \\| [ref]: https://evil.example/"
)


def _body() -> dict[str, Any]:
    body = json.loads(SAMPLE.read_text())
    assert isinstance(body, dict)
    return body


def _html(text: str) -> str:
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _parsed(text: str) -> _Tags:
    parser = _Tags()
    parser.feed(_html(text))
    return parser


def test_a_run_leads_with_its_verdict_then_target_stages_tokens_and_reproduce() -> None:
    body = _body()
    text = render_markdown(body, command=("promptpath", "run", body["target"]["url"], "--json"))
    lines = text.splitlines()
    assert lines[0] == f"**{markdown.text(body['headline'], markdown.PROSE_CHARS)}**"
    assert lines[0].startswith("**OK: first token after 363 ms")
    context = lines[2]
    for part in (body["target"]["url"], "model promptpath-demo", "HTTP/2", body["started_at"]):
        assert part in context, part
    rows = _parsed(text).rows
    # The stage table: each span's label, its duration and its start from t0, to 0.1 ms.
    assert rows[0] == ["stage", "ms", "from t0 ms"]
    spans = body["spans_ms"]
    assert len(rows) == 1 + len(spans)
    for row, span in zip(rows[1:], spans, strict=True):
        assert row[1] == f"{span['end'] - span['start']:.1f}"
        assert row[2] == f"{span['start']:.1f}"
    assert rows[1][0] == "DNS" and rows[2][0] == "TCP connect"
    assert "- TTFT: 362.7 ms from t0 (354.5 ms from the request sent)" in lines
    assert "- gaps between tokens: p50 24.8 ms, p95 26.0 ms, max 26.0 ms" in lines
    assert "- tokens: 48 (counted by usage), 40.0 tokens/s" in lines
    fence = lines.index("### Reproduce") + 2
    assert lines[fence : fence + 3] == [
        "```sh",
        f"promptpath run {body['target']['url']} --json",
        "```",
    ]


def test_a_failed_run_shows_its_error_stage_and_message() -> None:
    body = _body()
    body.update(ok=False, exit_code=3, status=None, headline="FAILED at connect: refused")
    body["error"] = {
        "stage": "connect",
        "kind": "connect_refused",
        "message": "connection refused by 127.0.0.1:9",
        "at_ms": 1.25,
    }
    body["spans_ms"] = body["spans_ms"][:2]
    body["ttft_ms"], body["tokens"] = {"from_start": None, "from_request": None}, {}
    body["stream"] = None
    text = render_markdown(body)
    lines = text.splitlines()
    assert lines[0] == "**FAILED at connect: refused**"
    error = lines.index("### Error")
    assert lines[error + 2] == "- stage connect · kind connect\\_refused · at 1.2 ms"
    assert lines[error + 3] == "- connection refused by 127.0.0.1:9"
    assert "### Tokens" not in lines and "### Reproduce" not in lines  # no command given


def test_findings_carry_verdict_probe_summary_and_advice() -> None:
    body = _body()
    body["findings"] = [
        {
            "probe": "buffering",
            "verdict": "fail",
            "summary": "the stream arrived in 4 KiB blocks",
            "advice": ["set proxy_buffering off", "or send X-Accel-Buffering: no"],
            "evidence": {},
        },
        {"probe": "tls", "verdict": "pass", "summary": "certificate valid", "advice": []},
    ]
    lines = render_markdown(body).splitlines()
    at = lines.index("### Findings")
    assert lines[at + 2 : at + 6] == [
        "- **FAIL** buffering: the stream arrived in 4 KiB blocks",
        "  - set proxy\\_buffering off",
        "  - or send X-Accel-Buffering: no",
        "- **PASS** tls: certificate valid",
    ]


def test_hostile_strings_stay_text_in_every_place_they_are_shown() -> None:
    body = _body()
    body["target"]["model"] = HOSTILE
    body["http_version"] = HOSTILE
    body["spans_ms"][0]["stage"] = HOSTILE
    body["error"] = {"stage": HOSTILE, "kind": HOSTILE, "message": HOSTILE, "at_ms": 3.0}
    body["findings"] = [
        {"probe": HOSTILE, "verdict": HOSTILE, "summary": HOSTILE, "advice": [HOSTILE]}
    ]
    body["headline"] = HOSTILE
    text = render_markdown(body, command=("promptpath", "run", "http://h/`x```y", HOSTILE))
    # No control character but the line ends; the escape is spelled out.
    assert not any(c < " " and c != "\n" for c in text) and "\\x1b" in text
    page = _parsed(text)
    # Only our own markup: bold, lists, tables, headings, the one code block. No link,
    # image, raw HTML, inline code, emphasis or strikethrough came from the strings.
    assert set(page.tags) <= {"p", "strong", "h3", "ul", "li", "table", "thead", "tbody",
                              "tr", "th", "td", "pre", "code", "blockquote"}  # fmt: skip
    assert page.tags.count("code") == 1 and page.tags.count("pre") == 1
    assert page.tags.count("h3") == len([ln for ln in text.splitlines() if ln.startswith("###")])
    # The stage table kept its three columns; the hostile cell reads back as sent.
    stages = page.rows[: 1 + len(body["spans_ms"])]
    assert all(len(row) == 3 for row in stages)
    shown = visible(HOSTILE)  # cut to the bound of a value
    assert stages[1][0] == shown[: markdown.VALUE_CHARS - 1] + "…"
    # The reproduce block holds the command whole: its backticks did not close the fence.
    html = _html(text)
    assert "http://h/`x```y" in html.split("<pre>", 1)[1].split("</pre>", 1)[0]


def _series() -> dict[str, Any]:
    ok = _body()
    failed = copy.deepcopy(ok)
    failed.update(ok=False, exit_code=4, status=500, started_at="2026-12-01T23:10:15.000+00:00")
    failed["error"] = {"stage": "wait", "kind": "http_status", "message": "HTTP 500 | oops"}
    return {
        "schema": "promptpath.series/1",
        "ok": False,
        "exit_code": 4,
        "target": ok["target"]["url"],
        "runs": [ok, failed],
        "aggregate": {
            "ttft_ms": {
                "n": 1,
                "min": 362.7,
                "p50": 362.7,
                "p95": 362.7,
                "max": 362.7,
                "unit": "ms",
            },
        },
        "failures": {"http_status": 1},
        "error_rate": 0.5,
        "slo": [{"expr": "ttft_p95<800ms", "ok": True, "value": 362.7, "concurrency": None}],
        "headline": "FAILED: 2 runs, 1 failed; TTFT p50 363 ms, p95 363 ms",
    }


def test_a_series_shows_its_aggregate_slos_and_each_run() -> None:
    body = _series()
    text = render_markdown(body)
    lines = text.splitlines()
    assert lines[0] == "**FAILED: 2 runs, 1 failed; TTFT p50 363 ms, p95 363 ms**"
    # The context spans the runs' time, the dialect and model from the first run.
    assert "when 2026-12-01T23:10:11.959+00:00 to 2026-12-01T23:10:15.000+00:00" in lines[2]
    assert "model promptpath-demo" in lines[2] and "schema promptpath.series/1" in lines[2]
    rows = _parsed(text).rows
    assert ["ttft\\_ms", "1", "362.7", "362.7", "362.7", "ms"] not in rows  # unescaped on render
    assert ["ttft_ms", "1", "362.7", "362.7", "362.7", "ms"] in rows
    assert ["ttft_p95<800ms", "—", "met", "362.7"] in rows
    assert ["1", "0", "200", "362.7", "1536.4", "—"] in rows
    assert ["2", "4", "500", "362.7", "1536.4", "HTTP 500 | oops"] in rows


def test_a_compare_report_gets_its_verdict_and_differences_table() -> None:
    run = _body()
    h3 = copy.deepcopy(run)
    h3["http_version"] = "HTTP/3"
    body = {
        "schema": "promptpath.compare/1",
        "results": [run, h3],
        "summary": ["HTTP/3 first token 40 ms sooner", "no difference in gaps"],
        "differences": {
            "ttft": {
                "label": "TTFT ms",
                "http2": 400.0,
                "http3": 360.0,
                "delta": -40.0,
                "better": "HTTP/3",
            },
        },
    }
    text = render_markdown(body)
    assert text.startswith("**HTTP/3 first token 40 ms sooner; no difference in gaps**\n")
    assert "HTTP/2 and HTTP/3" in text.splitlines()[2]
    assert ["TTFT ms", "400.0", "360.0", "-40.0", "HTTP/3"] in _parsed(text).rows


def test_a_kind_it_does_not_summarise_still_gets_its_verdict_and_a_pointer() -> None:
    body = {"schema": "promptpath.watch/1", "headline": "OK: 12 samples", "target": "https://h/"}
    text = render_markdown(body)
    assert text.splitlines()[0] == "**OK: 12 samples**"
    assert "(promptpath.watch/1) is not summarised here: attach --json" in text


def test_the_summary_stays_small_whatever_the_report_holds() -> None:
    body = _body()
    body["error"] = {"stage": "wait", "message": "x" * 1_000_000}
    body["findings"] = [
        {"probe": "p" * 10_000, "verdict": "warn", "summary": "s" * 10_000, "advice": ["a"] * 500}
    ] * 2000
    body["spans_ms"] = body["spans_ms"] * 1000
    text = render_markdown(body)
    assert len(text) < 200_000
    assert f"… and {2000 - markdown.MAX_ROWS} more findings" in text
    assert f"… and {len(body['spans_ms']) - markdown.MAX_ROWS} more rows" in text


def test_the_reproduce_block_leaves_a_credential_header_out_and_says_so() -> None:
    command = (
        "promptpath", "run", "https://h/v1/chat/completions?api_key=[redacted]",
        "-H", "Authorization: [redacted]", "--header=X-Trace: 1",
    )  # fmt: skip
    lines = render_markdown(_body(), command=command).splitlines()
    at = lines.index("### Reproduce")
    assert lines[at + 3] == (
        "promptpath run 'https://h/v1/chat/completions?api_key=[redacted]' '--header=X-Trace: 1'"
    )
    notes = "\n".join(lines[at + 5 :])
    assert "The credential header Authorization was left out" in notes
    assert "A credential was left out where the command says \\[redacted\\]" in notes


def test_the_summary_splits_ttft_into_the_server_side_and_the_wire_when_it_can() -> None:
    body = _body()
    assert "on the wire" not in render_markdown(body)  # sample-run.json predates the fields
    body.update(rtt_ms=38.0, ttft_network_adjusted_ms=912.0)
    lines = render_markdown(body).splitlines()
    assert "- ≈ 912.0 ms at the server side, 38.0 ms on the wire (one round trip)" in lines
