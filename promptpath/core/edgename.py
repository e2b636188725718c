"""Which edge answered, named from the response headers as each CDN or cloud documents
them. Pure: headers in, an ``EdgeName`` (or nothing) out; never a guess.

Each row of ``RULES`` is one header a CDN writes, the CDN, and how its value names the
location (a POP, data centre or region code), from the provider's own documentation:

- Cloudflare ``cf-ray: <16 hex>-<IATA>``: the suffix is the data centre that served
  (developers.cloudflare.com, "Cloudflare HTTP headers", CF-Ray).
- CloudFront ``x-amz-cf-pop: FRA56-P1``: the edge location (three-letter IATA code, a
  number, a suffix); the code is named, the whole value kept.
- Fastly ``x-served-by: cache-{datacenter}{nodeid}-{DATACENTER}``, comma separated when
  shielding lists several: the last entry is the delivery node nearest the client
  (fastly.com/documentation/reference/http/http-headers/X-Served-By).
- Azure Front Door ``x-azure-ref``: a reference string for the access logs; its older,
  base64 form carries the edge server's name (``WSTEDGE0619``: POP ``WST``), its newer,
  dated form (``20240101T000000Z-…``) carries none, and then the edge is not named.
  Azure CDN's ``x-msedge-ref: Ref A: … Ref B: AMS04EDGE1234 …`` names the edge in Ref B.
- Akamai: with its debug pragma, ``x-cache: TCP_HIT from a23-1-2-3.deploy.akamaitechnologies.com``
  names the edge server (its host name, no city).
- Fly.io ``fly-request-id: <id>-<region>``: the three-letter region that accepted the
  connection (the proxy's ``Fly-Region``), as the id's suffix.
- Vercel ``x-vercel-id: fra1::iad1::<id>``: the first segment is the edge region.
- Google's front end (``via: 1.1 google``, ``server-timing: gfet4t7``) names no location:
  it is recognised (``recognised_cdn``) and the edge is not named.

Every value is untrusted: bounded (``MAX_VALUE``), its control characters spelled out,
and a code is named only when it matches the code's documented shape.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

#: The longest header value read or kept; a longer one is cut before it is looked at.
MAX_VALUE: Final = 200

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_CF_RAY = re.compile(r"[0-9a-f]{8,32}-([A-Z]{3})")
_CF_POP = re.compile(r"([A-Z]{3})[0-9]{1,3}(?:-[A-Z0-9]{1,4})?")
_FASTLY = re.compile(r"cache-[a-z0-9-]{1,40}[0-9]-([A-Z]{3})")
_MSEDGE = re.compile(r"([A-Z]{3})[0-9]{0,3}EDGE[0-9]{1,6}")
_AKAMAI = re.compile(r"\bfrom\s+([a-z0-9-]{1,63}\.deploy\.akamaitechnologies\.com)\b")
_FLY = re.compile(r"[0-9A-Za-z]{10,40}-([a-z]{3})")
_VERCEL = re.compile(r"([a-z]{3}[0-9])::")


@dataclass(frozen=True, slots=True, kw_only=True)
class EdgeName:
    """The edge that answered, as one header named it."""

    name: str  # the location code ("FRA") or, where a CDN names no city, the edge server
    cdn: str  # cloudflare | cloudfront | fastly | azure-front-door | akamai | fly | vercel
    header: str  # lower-case header name
    value: str  # the header's value, bounded and with control characters spelled out


def shown(value: str) -> str:
    """A header value as reports may show it: at most MAX_VALUE characters, controls
    spelled out (``\\x1b``), so a hostile value can neither flood nor drive a terminal."""

    def spell(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"

    cut = value[:MAX_VALUE]
    return _UNSAFE.sub(spell, cut) + ("…" if len(value) > MAX_VALUE else "")


def _cf_ray(value: str) -> str | None:
    m = _CF_RAY.fullmatch(value)
    return m.group(1) if m else None


def _cf_pop(value: str) -> str | None:
    m = _CF_POP.fullmatch(value)
    return m.group(1) if m else None


def _fastly(value: str) -> str | None:
    m = _FASTLY.fullmatch(value.split(",")[-1].strip())
    return m.group(1) if m else None


def _azure_ref(value: str) -> str | None:
    """The POP in an older X-Azure-Ref: a version digit ``0``, then base64 whose bytes
    hold the edge server's name (``…V1NURURHRTA2MTkA…`` decodes to ``WSTEDGE0619``); the
    dated form (``20240101T000000Z-…``) names none."""
    if not re.fullmatch(r"0[A-Za-z0-9+/=]{16,199}", value):
        return None
    body = value[1:]
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    m = _MSEDGE.search(raw.decode("latin-1"))
    return m.group(1) if m else None


def _msedge_ref(value: str) -> str | None:
    m = re.search(r"Ref B:\s*(\S+)", value)
    if m is None:
        return None
    edge = _MSEDGE.fullmatch(m.group(1))
    return edge.group(1) if edge else None


def _akamai(value: str) -> str | None:
    m = _AKAMAI.search(value)
    return m.group(1) if m else None


def _fly(value: str) -> str | None:
    m = _FLY.fullmatch(value)
    return m.group(1).upper() if m else None


def _vercel(value: str) -> str | None:
    m = _VERCEL.match(value)
    return m.group(1) if m else None


#: (header, cdn, reader): the reader takes the stripped value and returns the location
#: code, or None when the value does not have the documented shape.
RULES: Final[tuple[tuple[str, str, Callable[[str], str | None]], ...]] = (
    ("cf-ray", "cloudflare", _cf_ray),
    ("x-amz-cf-pop", "cloudfront", _cf_pop),
    ("x-served-by", "fastly", _fastly),
    ("x-azure-ref", "azure-front-door", _azure_ref),
    ("x-msedge-ref", "azure-front-door", _msedge_ref),
    ("x-cache", "akamai", _akamai),
    ("fly-request-id", "fly", _fly),
    ("x-vercel-id", "vercel", _vercel),
)

#: Headers that say which CDN or cloud front end answered without naming where:
#: (header, lower-case substring of its value, cdn).
RECOGNISED: Final[tuple[tuple[str, str, str], ...]] = (
    ("via", "google", "google"),
    ("server-timing", "gfet4t7", "google"),
    ("x-azure-ref", "", "azure-front-door"),
    ("cf-ray", "", "cloudflare"),
    ("x-amz-cf-id", "", "cloudfront"),
    ("x-served-by", "cache-", "fastly"),
    ("fly-request-id", "", "fly"),
    ("x-vercel-id", "", "vercel"),
    ("server", "akamaighost", "akamai"),
)


def location_of(header: str, value: str) -> str | None:
    """The location code ``value`` names for ``header`` (lower case), if it names one."""
    value = value[:MAX_VALUE].strip()
    for name, _cdn, read in RULES:
        if name == header:
            return read(value)
    return None


def edge_name(headers: Sequence[tuple[str, str]]) -> EdgeName | None:
    """The edge the first documented header names, in RULES' order; None when no header
    names one (an unknown header set, or a CDN that names no location)."""
    lowered = [(k.lower(), v) for k, v in headers]
    for header, cdn, read in RULES:
        for key, value in lowered:
            if key != header:
                continue
            code = read(value[:MAX_VALUE].strip())
            if code is not None:
                return EdgeName(name=code, cdn=cdn, header=header, value=shown(value.strip()))
    return None


def recognised_cdn(headers: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """(cdn, header) when a header says which CDN or front end answered, named or not."""
    for key, value in headers:
        low_key, low = key.lower(), value[:MAX_VALUE].lower()
        for header, needle, cdn in RECOGNISED:
            if low_key == header and needle in low:
                return cdn, header
    return None


def edge_words(headers: Sequence[tuple[str, str]]) -> str:
    """The edge in a few words for the SERVER line: named, or why not."""
    named = edge_name(headers)
    if named is not None:
        return f"edge {named.name} ({named.cdn}, {named.header})"
    known = recognised_cdn(headers)
    if known is not None:
        return f"edge not named ({known[0]}'s {known[1]} names no location)"
    return "edge not named"
