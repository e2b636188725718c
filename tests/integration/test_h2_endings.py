"""An HTTP/2 server that ends a stream by RST_STREAM or the connection by GOAWAY mid-answer:
the report says which, with the error code's name, over a real h2c connection on loopback
(the scripted h2 peer of tests/helpers/rawh2.py)."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import run_cli
from tests.helpers.rawh2 import H2Ending, openai_events, raw_h2_server


@pytest.mark.parametrize(
    ("ending", "code", "closed_by", "words"),
    [
        ("rst", 8, "stream_reset", "RST_STREAM CANCEL (8)"),
        ("rst", 2, "stream_reset", "RST_STREAM INTERNAL_ERROR (2)"),
        ("goaway", 0, "goaway", "GOAWAY NO_ERROR (0), last stream 1"),
        ("goaway", 11, "goaway", "GOAWAY ENHANCE_YOUR_CALM (11), last stream 1"),
    ],
)
def test_reset_or_goaway_mid_stream_is_named_with_its_code(
    ending: H2Ending, code: int, closed_by: str, words: str
) -> None:
    with raw_h2_server(openai_events([" a", " b"]), ending=ending, code=code) as server:
        url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
        result = run_cli("run", "--json", "--http", "2", "--timeout", "10", url)
    assert result.exit_code == 7, result.stderr  # a truncated stream
    report = json.loads(result.stdout)
    assert report["stream"]["closed_by"] == closed_by
    error = report["error"]
    assert error["stage"] == "stream" and error["kind"] == "truncated"
    assert words in error["message"]
    for text in (error["message"], result.stderr):
        assert "<" not in text and "stream_id:" not in text  # no Python repr of an h2 event
    assert report["tokens"]["count"] == 2  # what arrived before the ending is kept


def test_a_clean_h2_end_leaves_no_reset_recorded() -> None:
    with raw_h2_server(openai_events([" a"])) as server:
        url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
        result = run_cli("run", "--json", "--http", "2", url)
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["stream"]["closed_by"] not in ("stream_reset", "goaway")


def test_a_graceful_goaway_mid_stream_lets_the_stream_finish() -> None:
    # RFC 9113 section 6.8: GOAWAY(NO_ERROR, last stream 1) after the HEADERS and two
    # events, then the rest of stream 1 and its END_STREAM: the run succeeds with every
    # token (before the fix: "stream truncated after 2 tokens"). nginx 1.22.1 does this on
    # `nginx -s reload` (seen by hand with a raw h2 client: GOAWAY(NO_ERROR, 1) at once,
    # stream 1 went on to [DONE] and END_STREAM, then FIN); tests/lab/test_goaway_nginx.py.
    texts = [" a", " b", " c", " d", " e"]
    with raw_h2_server(openai_events(texts), goaway_after=2, gap_s=0.02) as server:
        url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
        result = run_cli("run", "--json", "--http", "2", "--timeout", "10", url)
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["error"] is None
    assert report["tokens"]["count"] == len(texts)
    assert report["stream"]["end"] == "marker"
    assert report["stream"]["closed_by"] == "goaway"  # the server's first word on its close
    goaway = report["stream"]["goaway"]
    assert goaway["code"] == 0 and goaway["last_stream_id"] == 1 and goaway["stream_id"] == 1
    # It came after the headers and before the last token (two events, then three more).
    milestones = report["milestones_ms"]
    assert milestones["ttfb"] <= goaway["at_ms"] <= milestones["last_token"]


def test_a_goaway_that_refuses_the_stream_is_an_error_at_once() -> None:
    # GOAWAY(NO_ERROR, last stream 0) instead of a response: stream 1 was never processed.
    # The error names the GOAWAY in the wait stage, as before graceful GOAWAYs were kept.
    with raw_h2_server(openai_events([" a"]), goaway_after=-1, goaway_last=0) as server:
        url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
        result = run_cli("run", "--json", "--http", "2", "--timeout", "10", url)
    assert result.exit_code == 7, result.stderr
    report = json.loads(result.stdout)
    error = report["error"]
    assert error["stage"] == "wait" and error["kind"] == "network_error"
    assert "GOAWAY NO_ERROR (0), last stream 0: stream 1 was not processed" in error["message"]
    assert report["stream"]["closed_by"] == "goaway"
    assert report["stream"]["goaway"]["last_stream_id"] == 0
    assert report["tokens"]["count"] == 0
