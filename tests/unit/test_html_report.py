"""The HTML and SVG reports as pure functions of the report object: well-formed, to scale,
self-contained, and untrusted text shown inert."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from promptpath.core.textsafe import visible
from promptpath.report import svg
from promptpath.report.html import render_html
from promptpath.report.svg import render_svg

SAMPLE = Path(__file__).parents[2] / "examples" / "sample-run.json"
NS = "{http://www.w3.org/2000/svg}"


def _body() -> dict[str, Any]:
    body = json.loads(SAMPLE.read_text())
    assert isinstance(body, dict)
    return body


def _stage_rects(markup: str) -> list[ET.Element]:
    root = ET.fromstring(markup)
    return [r for r in root.iter(f"{NS}rect") if r.get("class") == "stage"]


def test_the_svg_is_xml_and_each_bar_is_its_stage_to_scale() -> None:
    body = _body()
    rects = _stage_rects(render_svg(body))
    spans = body["spans_ms"]
    assert [r.get("data-stage") for r in rects] == [s["stage"] for s in spans]
    axis = svg.Axis(svg.axis_end([body]))
    for rect, span in zip(rects, spans, strict=True):
        assert float(rect.get("x", "")) == pytest.approx(axis.x(span["start"]), abs=0.01)
        width = float(rect.get("width", ""))
        assert width == pytest.approx((span["end"] - span["start"]) * axis.scale, abs=0.01)
    # The axis ends at the stream's end: the last bar reaches the plot's right edge.
    last = rects[-1]
    right = float(last.get("x", "")) + float(last.get("width", ""))
    assert right == pytest.approx(svg.PLOT_X + svg.PLOT_W, abs=0.02)


def test_cold_and_warm_share_one_axis() -> None:
    cold = _body()
    warm = json.loads(json.dumps(cold))
    for span in warm["spans_ms"]:  # a warm run: half as long, on the same axis
        span["start"], span["end"] = span["start"] / 2, span["end"] / 2
    cold["warm"] = warm
    rects = _stage_rects(render_svg(cold))
    n = len(cold["spans_ms"])
    cold_w = [float(r.get("width", "")) for r in rects[:n]]
    warm_w = [float(r.get("width", "")) for r in rects[n:]]
    for c, w in zip(cold_w, warm_w, strict=True):
        assert w == pytest.approx(c / 2, abs=0.02)


def test_the_token_timeline_marks_coalesced_arrivals_and_send_times() -> None:
    body = _body()
    body["tokens"]["arrivals"] = {
        "at_ms": [100.0, 110.0, 110.0, 300.0],
        "path_coalesced": [2],
        "server_sent_ms": [99.0, 105.0, 109.0, 299.0],
        "omitted": 0,
    }
    root = ET.fromstring(render_svg(body))
    arrivals = [r for r in root.iter(f"{NS}rect") if "arrival" in (r.get("class") or "")]
    assert [float(r.get("data-ms", "")) for r in arrivals] == [100.0, 110.0, 110.0, 300.0]
    assert [("coalesced" in (r.get("class") or "")) for r in arrivals] == [F, F, True, F]
    held = [x for x in root.iter(f"{NS}line") if x.get("class") == "held"]
    assert len(held) == 4
    gaps = [float(r.get("data-ms", "")) for r in root.iter(f"{NS}rect") if r.get("class") == "gap"]
    assert gaps == [10.0, 0.0, 190.0]


F = False


class _Refs(HTMLParser):
    """Every attribute that could make a browser fetch something."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.scripts: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href", "srcset", "action", "data", "poster"):
                self.refs.append((tag, name, value or ""))
        if tag == "script":
            self.scripts.append(dict(attrs))


@pytest.mark.parametrize("schema", ["run", "failed"])
def test_the_page_is_self_contained(schema: str) -> None:
    body = _body()
    if schema == "failed":
        body.update(
            ok=False,
            exit_code=4,
            headline="FAILED in connect: refused",
            error={"stage": "connect", "kind": "refused", "message": "refused", "at_ms": 2.0},
        )
    page = render_html(body)
    parser = _Refs()
    parser.feed(page)
    assert parser.refs == []
    assert parser.scripts == [{"type": "application/json", "id": "promptpath-report"}]
    assert "url(" not in page and "@import" not in page
    assert "default-src 'none'" in page  # and if a hostile string slipped markup in: CSP


HOSTILE = "\x1b[2J\x1b]0;owned\x07<script>alert(1)</script>\ud800\u202e"


def test_hostile_text_is_inert_in_the_page_and_the_image() -> None:
    body = _body()
    body["response_headers"]["server"] = HOSTILE
    body["headline"] = "OK: " + HOSTILE
    body["findings"] = [
        {
            "probe": "tls",
            "verdict": "warn",
            "summary": HOSTILE,
            "evidence": {"x": HOSTILE},
            "advice": [HOSTILE],
        }
    ]
    page = render_html(body)
    image = render_svg(body)
    for text in (page, image):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        assert "<script>alert" not in text
        text.encode("utf-8")  # no lone surrogate: the file can be written as UTF-8
    assert "\\x1b[2J" in page and "&lt;script&gt;alert(1)" in page
    ET.fromstring(image)  # still well-formed XML
    # The embedded data block cannot be closed early by a string in the body.
    data = page.split("id='promptpath-report'>", 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["response_headers"]["server"] == HOSTILE


@pytest.mark.parametrize("char", ["\uffff", "\ufffe", "\x0b", "\x1f"])
def test_the_svg_stays_xml_when_a_string_holds_what_xml_forbids(char: str) -> None:
    # XML 1.0's Char production leaves out C0 (tab, LF, CR aside), surrogates and the
    # noncharacters U+FFFE and U+FFFF: an XML parser (Chromium's included) refuses the
    # whole image when one appears even once.
    body = _body()
    body["headline"] = f"FAILED: HTTP 500 — bad{char}byte"
    body["target"]["url"] = f"https://h/v1/x?m={char}"
    image = render_svg(body)
    ET.fromstring(image)
    assert f"bad\\u{ord(char):04x}byte" in image or f"bad\\x{ord(char):02x}byte" in image


def test_visible_escapes_controls_and_keeps_text() -> None:
    assert visible("tok\x00en\x1b[31m ü 💡\ud800") == "tok\\x00en\\x1b[31m ü 💡\\ud800"


def test_series_and_compare_pages_draw_their_figures() -> None:
    run = _body()
    series = {
        "schema": "promptpath.series/1",
        "ok": True,
        "target": run["target"]["url"],
        "runs": [run, run],
        "aggregate": {
            "ttft_ms": {
                "n": 2,
                "min": 1.0,
                "p50": 368.9,
                "p95": 368.9,
                "p99": 368.9,
                "max": 368.9,
                "unit": "ms",
            }
        },
        "sweep": [
            {"concurrency": 1, "runs": 1, "aggregate": {"ttft_ms": {"p50": 300.0, "p95": 320.0}}},
            {"concurrency": 4, "runs": 1, "aggregate": {"ttft_ms": {"p50": 350.0, "p95": 420.0}}},
        ],
        "exit_code": 0,
    }
    page = render_html(series)
    assert page.count("class='bin'") >= 1 and "class='p95'" in page
    assert "Waterfall of the median-TTFT run" in page
    compare = {
        "schema": "promptpath.compare/1",
        "ok": True,
        "results": [run, dict(run, http_version="HTTP/3")],
        "differences": {
            "ttft_ms": {"label": "TTFT", "http2": 1.0, "http3": 2.0, "delta": 1.0, "better": "same"}
        },
        "summary": ["TTFT: same"],
    }
    page = render_html(compare)
    assert page.count("class='stage'") == 2 * len(run["spans_ms"])
    assert "HTTP/3 (median run)" in page


def test_the_path_probe_draws_its_hop_table() -> None:
    body = _body()
    body["findings"] = [
        {
            "probe": "path",
            "verdict": "pass",
            "summary": "4 hop(s)",
            "advice": [],
            "evidence": {
                "hops": [
                    {
                        "ttl": 1,
                        "responders": ["10.0.0.1"],
                        "sent": 3,
                        "answered": 3,
                        "loss": 0.0,
                        "rtt_ms": {"min": 0.1, "median": 0.2, "max": 0.3},
                        "destination": False,
                    },
                    {
                        "ttl": 2,
                        "responders": [],
                        "sent": 3,
                        "answered": 0,
                        "loss": 1.0,
                        "rtt_ms": None,
                        "destination": False,
                    },
                    {
                        "ttl": 3,
                        "responders": ["10.0.0.9"],
                        "sent": 3,
                        "answered": 3,
                        "loss": 0.0,
                        "rtt_ms": {"min": 20.1, "median": 20.2, "max": 20.9},
                        "destination": True,
                    },
                ],
                "added_ms": {"1": 0.2, "3": 20.0},
                "deprioritised": [],
            },
        }
    ]
    page = render_html(body)
    assert "<td>10.0.0.1</td>" in page and "<td>silent</td>" in page
    assert "<td>+20.0</td>" in page and "<td>destination</td>" in page
