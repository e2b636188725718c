"""The edge named from documented CDN headers (core/edgename.py): each provider's own
example values, hostile values bounded and escaped, and never a guess."""

from __future__ import annotations

import pytest

from promptpath.core.edgename import MAX_VALUE, edge_name, edge_words, location_of, recognised_cdn
from promptpath.core.servertime import server_account


@pytest.mark.parametrize(
    ("header", "value", "name", "cdn"),
    [
        # Cloudflare's docs: CF-Ray 230b030023ae2822-SJC
        ("CF-Ray", "230b030023ae2822-SJC", "SJC", "cloudflare"),
        ("X-Amz-Cf-Pop", "FRA56-P1", "FRA", "cloudfront"),
        # Fastly's docs: cache-{datacenter}{nodeid}-{datacenter}; the last entry delivered
        ("X-Served-By", "cache-wdc5548-WDC", "WDC", "fastly"),
        ("X-Served-By", "cache-iad-kiad7000025-IAD, cache-fra-etou8220021-FRA", "FRA", "fastly"),
        # Microsoft's documented example decodes to ...WSTEDGE0619...
        (
            "X-Azure-Ref",
            "0zxV+XAAAAABKMMOjBv2NT4TY6SQVjC0zV1NURURHRTA2MTkANDM3YzgyY2QtMzYwYS00YTU0LTk0YzMtNWZmNzA3NjQ3Nzgz",
            "WST",
            "azure-front-door",
        ),
        (
            "X-MSEdge-Ref",
            "Ref A: 1F2E Ref B: AMS04EDGE1234 Ref C: 2024-01-01T00:00:00Z",
            "AMS",
            "azure-front-door",
        ),
        (
            "X-Cache",
            "TCP_MISS from a23-45-67-89.deploy.akamaitechnologies.com (AkamaiGHost/22.1) (-)",
            "a23-45-67-89.deploy.akamaitechnologies.com",
            "akamai",
        ),
        ("Fly-Request-Id", "01JCQ8N4Z7G3K5V2W9X1Y0ABCD-ams", "AMS", "fly"),
        ("X-Vercel-Id", "fra1::iad1::8xk2p-1733500000000-0123456789ab", "fra1", "vercel"),
    ],
)
def test_each_documented_header_names_its_edge(
    header: str, value: str, name: str, cdn: str
) -> None:
    named = edge_name([("content-type", "text/event-stream"), (header, value)])
    assert named is not None
    assert (named.name, named.cdn, named.header, named.value) == (name, cdn, header.lower(), value)


@pytest.mark.parametrize(
    "headers",
    [
        [("x-edge-location", "FRA"), ("x-pop", "FRA")],  # edge-like, but no CDN documents them
        [("via", "1.1 google"), ("server-timing", "gfet4t7; dur=12")],  # names no location
        [("X-Azure-Ref", "20240101T000000Z-16b7c8d9f8fxyz8shCO1AMS0000000a000000000abc")],
        [("cf-ray", "FRA")],  # no ray id: not the documented shape
        [("cf-ray", "230b030023ae2822-FR4")],  # not an IATA code
        [("x-served-by", "cache-fra")],
        [("x-cache", "HIT")],
    ],
)
def test_an_unknown_or_malformed_set_is_not_named(headers: list[tuple[str, str]]) -> None:
    assert edge_name(headers) is None
    assert edge_words(headers).startswith("edge not named")


def test_a_front_end_that_names_no_location_is_recognised_not_named() -> None:
    headers = [("via", "1.1 google")]
    assert recognised_cdn(headers) == ("google", "via")
    assert edge_words(headers) == "edge not named (google's via names no location)"


def test_a_hostile_value_is_bounded_and_escaped() -> None:
    # Control characters never reach a terminal; a flood is cut.
    long = "cache-fra-x1-FRA, " * 40 + "\x1b[31m"
    assert edge_name([("x-served-by", long)]) is None
    fly = edge_name([("x-vercel-id", "fra1::\x1b[2J" + "a" * 500)])
    assert fly is not None and "\x1b" not in fly.value and "\\x1b" in fly.value
    # MAX_VALUE characters are kept (each control spelt in 4), then an ellipsis.
    assert fly.value == "fra1::\\x1b[2J" + "a" * (MAX_VALUE - 10) + "…"


def test_servertime_reads_locations_from_the_same_table() -> None:
    assert location_of("cf-ray", "230b030023ae2822-SJC") == "SJC"
    acc = server_account([("fly-request-id", "01JCQ8N4Z7G3K5V2W9X1Y0ABCD-ams")], wait_ms=None)
    assert acc is not None and acc.edge_name is not None and acc.edge_name.name == "AMS"
    assert server_account([("x-edge-location", "FRA")], wait_ms=None) is None
