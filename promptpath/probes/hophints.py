"""Response headers that name the hops in the path (Server, Via, X-Cache, CDN ids). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from promptpath.core.edgename import RECOGNISED

#: (header, substring of its value or "" for any, the hop it names). The CDNs' own markers
#: are core/edgename.py's RECOGNISED rows: the one table of edge headers.
_HOP_HEADERS: tuple[tuple[str, str, str], ...] = (
    ("server", "nginx", "nginx"),
    ("server", "openresty", "nginx"),
    ("server", "caddy", "caddy"),
    ("server", "envoy", "envoy"),
    ("server", "cloudflare", "cloudflare"),
    ("server", "awselb", "aws-elb"),
    ("server", "apache", "apache"),
    ("server", "haproxy", "haproxy"),
    ("server", "varnish", "varnish"),
    ("server", "hypercorn", "promptpath serve (hypercorn)"),
    ("via", "cloudfront", "cloudfront"),
    ("via", "varnish", "varnish"),
    ("via", "caddy", "caddy"),
    *RECOGNISED,
    ("via", "", "proxy (Via)"),
    ("x-cache", "", "cache (X-Cache)"),
    ("x-varnish", "", "varnish"),
    ("x-envoy-upstream-service-time", "", "envoy"),
    ("x-kong-proxy-latency", "", "kong"),
)


#: Hops that are the origin's own server: never the hop in between to blame.
ORIGIN_HOPS = frozenset({"promptpath serve (hypercorn)"})


def header_hints(headers: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """Response headers that name a hop (Server, Via, X-Cache, CDN ids)."""
    hints: list[dict[str, str]] = []
    for name, value in headers:
        key, low = name.lower(), value.lower()
        for header, needle, hop in _HOP_HEADERS:
            if key == header and needle in low:
                hints.append({"header": name, "value": value[:120], "hop": hop})
                break
    return hints


def hops_named(headers: Sequence[tuple[str, str]]) -> list[str]:
    seen: list[str] = []
    for hint in header_hints(headers):
        if hint["hop"] not in seen:
            seen.append(hint["hop"])
    return seen


def hops_between(headers: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """The hints that name a hop between the client and the origin (not the origin)."""
    return [h for h in header_hints(headers) if h["hop"] not in ORIGIN_HOPS]
