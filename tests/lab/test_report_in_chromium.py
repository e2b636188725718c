"""The HTML and SVG reports in a real headless Chromium, offline: every mode and a failure
open with no console error and no request leaving the page, and the stage bars the browser
lays out are the JSON's stage durations to scale (within a pixel).

The reports come from real runs against the reference endpoint on loopback; the page is
loaded from disk with every name unresolvable and every request sent to a loopback sink.
"""

from __future__ import annotations

import json
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from promptpath.report.html import render_html
from promptpath.report.svg import render_svg
from tests.helpers import chromium
from tests.helpers.cli import run_cli
from tests.helpers.refserver import RefServer, reference_server

pytestmark = pytest.mark.lab

CHAT = "/v1/chat/completions"


def _need_chromium() -> None:
    if chromium.chromium_path() is None:
        message = "chromium is not installed (Debian package chromium; .ci/run installs it)"
        if os.environ.get("PROMPTPATH_REQUIRE_LAB"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def ref(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefServer]:
    with reference_server(
        tls=True,
        http3=True,
        tmp_path=tmp_path_factory.mktemp("ref"),
        extra_args=["--ttft-ms", "80", "--tokens", "12", "--rate", "100"],
    ) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[chromium.Browser]:
    _need_chromium()
    with chromium.browser() as b:
        yield b


def _body(ref: RefServer, *extra: str) -> dict[str, Any]:
    result = run_cli("run", ref.path(CHAT), "--cacert", str(ref.ca), "--json", *extra)
    body = json.loads(result.stdout)
    assert isinstance(body, dict)
    return body


MODES: dict[str, tuple[str, ...]] = {
    "single": (),
    "warm": ("--warm",),
    "canary": ("--canary", "--probe", "buffering", "-H", "x-promptpath-batch: 3"),
    "series": ("--count", "4"),
    "sweep": ("--count", "4", "--concurrency", "1,2", "--slo", "ttft_p95<5s"),
    "compare": ("--compare-http", "--compare-runs", "1"),
    "timeout": ("--timeout", "0.05", "-H", "x-promptpath-ttft-ms: 2000"),
}


def _png_is_not_blank(png: bytes) -> bool:
    """A screenshot with more than a handful of distinct byte values holds a drawing."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    pos, idat = 8, b""
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind = png[pos + 4 : pos + 8]
        if kind == b"IDAT":
            idat += png[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return len(set(zlib.decompress(idat))) > 16


def _bars(page: chromium.Page) -> list[dict[str, float]]:
    return list(
        page.evaluate(
            "Array.from(document.querySelectorAll('rect.stage')).map(r => ({"
            " ms: parseFloat(r.dataset.ms), stage: r.dataset.stage,"
            " px: r.getBoundingClientRect().width,"
            " svg: r.ownerSVGElement.getBoundingClientRect().width,"
            " view: r.ownerSVGElement.viewBox.baseVal.width}))"
        )
    )


def _texts_outside_their_figure(page: chromium.Page) -> list[str]:
    """Every SVG text the browser laid out (even partly) beyond its figure's left or right
    edge: a label cut at the edge (the histogram's p95 was)."""
    return list(
        page.evaluate(
            "Array.from(document.querySelectorAll('svg text')).filter(t => {"
            " const r = t.getBoundingClientRect(), f = t.ownerSVGElement.getBoundingClientRect();"
            " return r.width > 0 && (r.left < f.left - 0.5 || r.right > f.right + 0.5); })"
            ".map(t => t.textContent)"
        )
    )


def _clipped_evidence(page: chromium.Page) -> list[bool]:
    """For each evidence block: is part of it hidden (scrolled out of its box)?"""
    return list(
        page.evaluate(
            "Array.from(document.querySelectorAll('pre.evidence'))"
            ".map(e => e.offsetHeight === 0 || e.scrollHeight > e.clientHeight + 1)"
        )
    )


def _spans(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every run object's spans in the order the report draws them."""
    schema = body["schema"]
    if schema.startswith("promptpath.compare"):
        return [s for r in body["results"] for s in r["spans_ms"]]
    if schema.startswith("promptpath.series"):
        return []
    return list(body["spans_ms"]) + (list(body["warm"]["spans_ms"]) if body.get("warm") else [])


@pytest.mark.parametrize("mode", sorted(MODES))
def test_each_mode_opens_offline_and_its_bars_are_the_json_to_scale(
    ref: RefServer, browser: chromium.Browser, tmp_path: Path, mode: str
) -> None:
    body = _body(ref, *MODES[mode])
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(body), encoding="utf-8")
    loaded = browser.load(str(page_file))
    assert loaded.console_errors == []
    assert [u for u in loaded.requests if not u.startswith(("file:", "data:"))] == []
    assert browser.sink.connections == 0
    bars = _bars(loaded.page)
    assert bars, "no stage bar drawn"
    expected = _spans(body)
    if expected:  # a run or compare draws every span of every run it holds, in order
        assert [b["stage"] for b in bars[: len(expected)]] == [s["stage"] for s in expected]
        for bar, span in zip(bars, expected, strict=False):
            assert bar["ms"] == pytest.approx(span["end"] - span["start"], abs=0.006)
    # One axis per figure: px per ms is the same for every bar of a figure, so each bar's
    # laid-out width is its duration times that scale, within a pixel.
    by_figure: dict[tuple[float, float], list[dict[str, float]]] = {}
    for bar in bars:
        by_figure.setdefault((bar["svg"], bar["view"]), []).append(bar)
    for figure in by_figure.values():
        longest = max(figure, key=lambda b: b["ms"])
        scale = longest["px"] / longest["ms"]
        for bar in figure:
            assert abs(bar["px"] - bar["ms"] * scale) <= 1.0, (bar, scale)
    # No label cut at a figure's edge (the histogram's p95 label was, at the right).
    assert _texts_outside_their_figure(loaded.page) == []
    assert _png_is_not_blank(loaded.page.screenshot())


def test_a_failed_run_shows_where_it_stopped(browser: chromium.Browser, tmp_path: Path) -> None:
    # Port 9 on loopback: nothing listens there, so connect is refused before any byte.
    result = run_cli("run", "http://127.0.0.1:9" + CHAT, "--json")
    body = json.loads(result.stdout)
    assert body["error"]["stage"] == "connect"
    page_file = tmp_path / "failed.html"
    page_file.write_text(render_html(body), encoding="utf-8")
    loaded = browser.load(str(page_file))
    assert loaded.console_errors == []
    text = loaded.page.evaluate("document.body.innerText")
    assert "FAILED in connect" in text
    assert [b["stage"] for b in _bars(loaded.page)] == [s["stage"] for s in body["spans_ms"]]


def test_the_svg_renders_in_chromium_with_its_bars_to_scale(
    ref: RefServer, browser: chromium.Browser, tmp_path: Path
) -> None:
    body = _body(ref, "--warm")
    image = tmp_path / "report.svg"
    image.write_text(render_svg(body), encoding="utf-8")
    loaded = browser.load(str(image))
    assert loaded.console_errors == []
    bars = _bars(loaded.page)
    spans = body["spans_ms"] + body["warm"]["spans_ms"]
    assert [b["stage"] for b in bars] == [s["stage"] for s in spans]
    scale = max(bars, key=lambda b: b["ms"])
    for bar in bars:
        assert abs(bar["px"] - bar["ms"] * scale["px"] / scale["ms"]) <= 1.0
    # The verdict line leads the image, wrapped inside its width.
    rows = loaded.page.evaluate(
        "Array.from(document.querySelectorAll('text.verdict')).map(t => t.textContent)"
    )
    assert " ".join(rows) == body["headline"]
    assert _texts_outside_their_figure(loaded.page) == []
    assert _png_is_not_blank(loaded.page.screenshot())


#: Each demo hop and the finding its page must show (the clean hop's probes all pass).
HOP_FINDINGS = {
    "buffering": ["[FAIL] buffering"],
    "compression": ["[FAIL] buffering"],
    "idle-timeout": ["[FAIL] idle-timeout"],
    "ghost-stream": ["[FAIL] ghost-stream"],
    "clean": ["[PASS] buffering", "[PASS] idle-timeout", "[PASS] ghost-stream"],
}


@pytest.mark.parametrize("hop", sorted(HOP_FINDINGS))
def test_each_demo_hop_report_written_by_html_opens_offline_with_its_findings(
    browser: chromium.Browser, tmp_path: Path, hop: str
) -> None:
    page_file = tmp_path / "hop.html"
    result = run_cli("demo", "--hop", hop, "--html", str(page_file))
    assert result.exit_code == (0 if hop == "clean" else 1)  # a broken hop is found
    loaded = browser.load(str(page_file))
    assert loaded.console_errors == []
    assert [u for u in loaded.requests if not u.startswith(("file:", "data:"))] == []
    text = loaded.page.evaluate("document.body.innerText")
    for finding in HOP_FINDINGS[hop]:
        assert finding in text
    assert "promptpath demo --hop " + hop in text  # the command that reproduces it
    assert _bars(loaded.page), "no stage bar drawn"
    # The banner leads with the failing finding, in the verdict's colour.
    banner = loaded.page.evaluate(
        "(() => { const b = document.querySelector('p.verdict');"
        " return [b.textContent, getComputedStyle(b).backgroundColor]; })()"
    )
    if hop == "clean":
        assert banner == [banner[0], "rgb(230, 244, 234)"] and banner[0].startswith("OK: ")
    else:
        assert banner == [banner[0], "rgb(253, 232, 232)"], banner
        assert banner[0].startswith(HOP_FINDINGS[hop][0].replace("[FAIL] ", "FAIL ") + ": ")
    # Each finding's evidence is real lines of text, never a literal "\n"; printed, none of
    # it is folded away or scrolled out of sight.
    evidence = loaded.page.evaluate(
        "Array.from(document.querySelectorAll('pre.evidence')).map(e => e.textContent)"
    )
    assert len(evidence) == len(HOP_FINDINGS[hop])
    assert all("\n" in e and "\\n" not in e for e in evidence)
    loaded.page.call("Emulation.setEmulatedMedia", media="print")
    assert _clipped_evidence(loaded.page) == [False] * len(evidence)
    assert _png_is_not_blank(loaded.page.screenshot())
