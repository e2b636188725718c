"""Each demo hop (server/hops.py) is found by its probe with the expected verdict, through
the real CLI, over real sockets on loopback; the clean hop raises nothing.

Observed by hand first (this file's numbers): the buffering hop's deliveries are 4012
payload bytes (4096 wire bytes less chunk framing) every ~600 ms at 20 tokens/s; the idle
hop's cut is found at 3.0 ± 0.05 s, mid-body and on keep-alive; the compression hop
delivers all 60 events in one burst at the end to a gzip client; the ghost hop leaves
~35 of 40 tokens generated for nobody.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from html import escape
from pathlib import Path

import pytest

from promptpath.cli.demo_hops import HOP_PROBES
from promptpath.server.hops import HopKind
from tests.helpers.cli import run_cli

pytestmark = pytest.mark.integration


def _through(kind: HopKind, tmp_path: Path) -> dict[str, dict[str, object]]:
    """``promptpath demo --hop KIND --json --html FILE --svg FILE``: the findings, by probe;
    the verdict line leading with the failing one in every channel."""
    page, image = tmp_path / "report.html", tmp_path / "report.svg"
    result = run_cli("demo", "--hop", kind, "--json", "--html", str(page), "--svg", str(image))
    body = json.loads(result.stdout)
    assert body["error"] is None, result.stderr
    findings = {f["probe"]: f for f in body["findings"]}
    assert sorted(findings) == sorted(HOP_PROBES[kind])
    assert result.exit_code == (0 if kind == "clean" else 1), result.stderr
    # The page a ticket carries holds the same findings.
    text = page.read_text(encoding="utf-8")
    assert all(f"[{f['verdict'].upper()}] {name}" in text for name, f in findings.items())
    # One verdict line, what is wrong first: the terminal's last line, the JSON's headline,
    # the page's banner (its colour the verdict's) and the image's title.
    line = body["headline"]
    assert result.stderr.rstrip("\n").splitlines()[-1] == line
    (failing,) = [f for f in findings.values() if f["verdict"] == "fail"] or [None]
    if failing is None:
        assert line.startswith("OK: first token after")
    else:
        lead = f"FAIL {failing['probe']}: {failing['lead']} — first token after "
        assert line.startswith(lead), line
    banner = "failed" if failing else "ok"
    assert f"<p class='verdict {banner}'>{escape(line)}</p>" in text
    title = ET.parse(image).getroot().find("{http://www.w3.org/2000/svg}title")
    assert title is not None and (title.text or "").startswith(line)
    return findings


def test_the_buffering_hop_is_a_size_triggered_buffer(tmp_path: Path) -> None:
    f = _through("buffering", tmp_path)["buffering"]
    assert f["verdict"] == "fail"
    mechanism = f["evidence"]["mechanism"]
    # 4096 wire bytes a block, less the chunk framing of the ~12 events in it.
    assert mechanism["kind"] == "size_buffer" and 3900 <= mechanism["block_bytes"] <= 4096
    assert "demo-buffering" in str(f["summary"])  # the hop is named, by its Via
    kib = mechanism["block_bytes"] / 1024
    assert (
        f["lead"] == f"a hop delivers the stream in {kib:.1f} KiB blocks (Via: 1.1 demo-buffering)"
    )


def test_the_compression_hop_holds_a_gzip_client_to_the_end(tmp_path: Path) -> None:
    f = _through("compression", tmp_path)["buffering"]
    assert f["verdict"] == "fail"
    compression = f["evidence"]["compression"]
    assert compression["encoding"] == "gzip" and compression["held_back"] is True
    assert f["evidence"]["pattern"] == "whole"
    assert f["evidence"]["mechanism"]["kind"] == "compression"


def test_the_idle_hop_cut_is_found_at_three_seconds(tmp_path: Path) -> None:
    f = _through("idle-timeout", tmp_path)["idle-timeout"]
    assert f["verdict"] == "fail"
    ev = f["evidence"]
    assert ev["cut_by"] == "fin" and ev["keepalive_helps"] is True
    assert abs(ev["threshold_s"] - 3.0) <= ev["resolution_s"] + 0.2


def test_the_ghost_hop_leaves_the_model_generating(tmp_path: Path) -> None:
    f = _through("ghost-stream", tmp_path)["ghost-stream"]
    assert f["verdict"] == "fail"
    assert "kept generating" in str(f["summary"])


def test_the_clean_hop_raises_nothing(tmp_path: Path) -> None:
    findings = _through("clean", tmp_path)
    assert {name: f["verdict"] for name, f in findings.items()} == {
        name: "pass" for name in HOP_PROBES["clean"]
    }
