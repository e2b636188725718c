"""Compression judged for the client being imitated, and the identity comparison."""

from __future__ import annotations

import pytest

from promptpath.core.findings import Verdict
from promptpath.core.timeline import Timeline
from promptpath.options import RunOptions, parse_target
from promptpath.probes.base import ProbeContext
from promptpath.probes.buffering.compression import (
    for_this_client,
    wants_identity_check,
    with_identity_check,
)
from promptpath.probes.buffering.probe import BufferingProbe, identity_options
from promptpath.probes.buffering.verdict import judge
from promptpath.tracer.request import offered_encodings, prepare
from tests.unit.test_buffering_verdict import streamed, whole

SDK_OFFERS = ("gzip", "deflate")


def gzipped(tl: Timeline) -> Timeline:
    tl.response_headers.append(("Content-Encoding", "gzip"))
    return tl


def test_a_streamed_stream_compressed_as_the_client_asked_passes_and_says_so() -> None:
    finding = judge(gzipped(streamed()), canary=False, offered=SDK_OFFERS)
    assert finding.verdict is Verdict.PASS, finding.summary
    assert "compressed with gzip for this client without holding events back" in finding.summary
    assert finding.evidence["compression"] == {
        "encoding": "gzip",
        "offered": ["gzip", "deflate"],
        "for_this_client": True,
        "held_back": False,
    }
    assert finding.advice == []


def test_compression_the_request_did_not_offer_still_warns() -> None:
    finding = judge(gzipped(streamed()), canary=False, offered=())
    assert finding.verdict is Verdict.WARN
    assert finding.evidence["compression"]["for_this_client"] is False  # type: ignore[index]
    assert any("did not offer it" in a for a in finding.advice)


def test_a_whole_compressed_stream_fails_naming_the_compression_for_this_client() -> None:
    finding = judge(gzipped(whole()), canary=False, offered=SDK_OFFERS)
    assert finding.verdict is Verdict.FAIL
    assert "a hop compresses the event stream for this client (gzip)" in finding.summary
    assert finding.evidence["compression"]["held_back"] is True  # type: ignore[index]
    assert any("for clients that accept it" in a for a in finding.advice)
    assert wants_identity_check(finding)


def test_a_short_compressed_stream_stays_a_warning_it_cannot_be_judged() -> None:
    finding = judge(gzipped(streamed(n=8)), canary=False, max_tokens=64, offered=SDK_OFFERS)
    assert finding.verdict is Verdict.WARN
    assert finding.evidence["compression"]["held_back"] is None  # type: ignore[index]
    assert not wants_identity_check(finding)


def test_no_identity_check_for_a_stream_that_was_not_compressed() -> None:
    finding = judge(whole(), canary=False, offered=SDK_OFFERS)
    assert finding.verdict is Verdict.FAIL and "compression" not in finding.evidence
    assert not wants_identity_check(finding)


@pytest.mark.parametrize(
    ("encoding", "offered", "mine"),
    [("x-gzip", ("gzip",), True), ("gzip", ("*",), True), ("br", ("gzip", "deflate"), False)],
)
def test_what_counts_as_the_clients_own_coding(
    encoding: str, offered: tuple[str, ...], mine: bool
) -> None:
    assert for_this_client(encoding, offered) is mine


def test_identity_streaming_where_gzip_was_held_says_only_gzip_clients_are_held() -> None:
    client = judge(gzipped(whole()), canary=False, offered=SDK_OFFERS)
    identity = judge(streamed(), canary=False, offered=())
    merged = with_identity_check(client, identity)
    assert merged.verdict is Verdict.FAIL  # what the user's client gets
    assert "only clients that accept gzip are held back" in merged.summary
    check = merged.evidence["identity_check"]
    assert check == {
        "verdict": "pass",
        "pattern": "streamed",
        "compressed": None,
        "summary": identity.summary,
        "cause": "compression",
    }
    assert "exclude text/event-stream from compression" in merged.advice[0]
    assert sum("compress" in a for a in merged.advice) == 1, merged.advice


def test_identity_held_too_means_compression_is_not_the_only_cause() -> None:
    client = judge(gzipped(whole()), canary=False, offered=SDK_OFFERS)
    merged = with_identity_check(client, judge(whole(), canary=False))
    assert "compression is not the only cause" in merged.summary
    assert merged.evidence["identity_check"]["cause"] == "not_only_compression"  # type: ignore[index]
    assert merged.advice == client.advice


def _options(client: str, **kw: object) -> RunOptions:
    return RunOptions(
        target=parse_target("https://h/v1/chat/completions"),
        provider="openai",
        model="m",
        client=client,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


def test_the_identity_request_changes_only_accept_encoding_even_over_h() -> None:
    opts = _options("openai-python", headers=(("accept-encoding", "gzip"),))
    before, after = dict(prepare(opts).headers), dict(prepare(identity_options(opts)).headers)
    assert {k.lower(): v for k, v in after.items()}.pop("accept-encoding") == "identity"
    assert offered_encodings(identity_options(opts)) == ()
    same = {k.lower(): v for k, v in before.items() if k.lower() != "accept-encoding"}
    assert same == {k.lower(): v for k, v in after.items() if k.lower() != "accept-encoding"}


@pytest.mark.parametrize(("client", "requests"), [("openai-python", 2), ("identity", 1)])
def test_the_stated_cost_counts_the_identity_request_when_the_client_accepts_gzip(
    client: str, requests: int
) -> None:
    cost = BufferingProbe().cost(ProbeContext(options=_options(client), result=None))
    assert cost.requests == requests
    assert cost.tokens == requests * 64 and cost.seconds == requests * 60.0
