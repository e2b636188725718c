"""The response headers a CDN or cloud front end adds, played by the reference endpoint
(the ``cdn`` control): each in the shape its provider's documentation shows, so a test
sees over real sockets what a client behind that edge sees.

Written from the providers' documented examples, not from promptpath's reader of them
(core/edgename.py), so that a test of the reader against these is a test, not an echo.
Pure and cheap: the standard library only.
"""

from __future__ import annotations

import base64
from typing import Final

#: The CDNs the control plays; ``google`` (its front end names no location) and
#: ``unknown`` (an edge header no CDN documents) are there to see an edge left unnamed.
NAMES: Final = (
    "cloudflare",
    "cloudfront",
    "fastly",
    "azure-front-door",
    "akamai",
    "fly",
    "vercel",
    "google",
    "unknown",
)
DEFAULT_CODE: Final = "FRA"
#: The edge server Akamai's debug x-cache names (Akamai names no city).
AKAMAI_HOST: Final = "a23-45-67-89.deploy.akamaitechnologies.com"


def parse_cdn(raw: str) -> tuple[str, str]:
    """``NAME[:CODE]`` -> (name, code); CODE is three letters, FRA unless given."""
    name, _, code = raw.strip().partition(":")
    name = name.strip().lower()
    code = (code.strip() or DEFAULT_CODE).upper()
    if name not in NAMES:
        raise ValueError(f"must be NAME[:CODE] with NAME one of {', '.join(NAMES)}")
    if len(code) != 3 or not code.isascii() or not code.isalpha():
        raise ValueError("CODE must be three letters (an IATA code: FRA)")
    return name, code


def _azure_ref(code: str) -> str:
    """The older X-Azure-Ref: ``0`` and base64 of an opaque prefix, the edge server's name
    (``<POP>EDGE0619``), NUL and a request GUID, as Microsoft's example decodes."""
    raw = (
        b"\xcf\x15~\\\x00\x00\x00\x00J0\xc3\xa3\x06\xfd\x8dO\x84\xd8\xe9$\x15\x8c-3"
        + code.encode()
        + b"EDGE0619\x00437c82cd-360a-4a54-94c3-5ff707647783"
    )
    return "0" + base64.b64encode(raw).decode().rstrip("=")


def cdn_headers(cdn: tuple[str, str] | None) -> tuple[tuple[str, str], ...]:
    """The headers ``(name, code)``'s edge adds to an answer; () for None."""
    if cdn is None:
        return ()
    name, code = cdn
    low = code.lower()
    table: dict[str, tuple[tuple[str, str], ...]] = {
        "cloudflare": (("server", "cloudflare"), ("cf-ray", f"8f1e2d3c4b5a6978-{code}")),
        "cloudfront": (
            ("x-cache", "Miss from cloudfront"),
            ("via", "1.1 5f2b0c8e1a9d4e6f.cloudfront.net (CloudFront)"),
            ("x-amz-cf-pop", f"{code}56-P1"),
            ("x-amz-cf-id", "k3VqYp0dG9sWc8mXb2rT1nLh6aJfE4uZ5yQoR7iS_vKwN-xDjA=="),
        ),
        "fastly": (
            ("via", "1.1 varnish"),
            ("x-served-by", f"cache-iad-kiad7000112-IAD, cache-{low}-e{low}8230020-{code}"),
            ("x-cache", "MISS, MISS"),
        ),
        "azure-front-door": (
            ("x-azure-ref", _azure_ref(code)),
            ("x-cache", "CONFIG_NOCACHE"),
        ),
        "akamai": (
            ("server", "AkamaiGHost"),
            ("x-cache", f"TCP_MISS from {AKAMAI_HOST} (AkamaiGHost/22.1.2-1) (-)"),
        ),
        "fly": (
            ("server", "Fly/2b1a0c9e (2024-11-20)"),
            ("via", "1.1 fly.io"),
            ("fly-request-id", f"01JCQ8N4Z7G3K5V2W9X1Y0ABCD-{low}"),
        ),
        "vercel": (
            ("server", "Vercel"),
            ("x-vercel-id", f"{low}1::iad1::8xk2p-1733500000000-0123456789ab"),
        ),
        "google": (("via", "1.1 google"), ("server-timing", "gfet4t7; dur=12")),
        "unknown": (("x-edge-location", code), ("x-pop", code)),
    }
    return table[name]
