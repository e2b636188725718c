"""Rate limits from response headers, and who answered a 429. Pure: headers, status and the
wall clock at t0 in; dimensions and a Finding out.

Header families read:
- OpenAI: ``x-ratelimit-{limit,remaining,reset}-{requests,tokens}``; reset is a Go-style
  duration (``1s``, ``6m0s``, ``59.3ms``).
- Anthropic: ``anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,
  remaining,reset}``; reset is an RFC 3339 time.
- IETF (draft-ietf-httpapi-ratelimit-headers): the structured-field form of draft 08 on,
  ``RateLimit: "policy";r=REMAINING;t=RESET_S`` with ``RateLimit-Policy:
  "policy";q=QUOTA;w=WINDOW_S``; draft 07's dictionary ``RateLimit: limit=L, remaining=R,
  reset=S``; and the older separate ``RateLimit-{Limit,Remaining,Reset}`` (also spelled
  ``X-RateLimit-*`` without a dimension).
- ``Retry-After``: delay-seconds or an HTTP date.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

from promptpath.core.findings import Finding, Verdict
from promptpath.probes.hophints import hops_named

PROBE = "ratelimit"
#: Below this share of the limit left, say so before the limit bites.
LOW_SHARE = 0.10

_OPENAI = re.compile(r"^x-ratelimit-(limit|remaining|reset)-(requests|tokens)$")
_ANTHROPIC = re.compile(
    r"^anthropic-ratelimit-(requests|tokens|input-tokens|output-tokens)-(limit|remaining|reset)$"
)
_LEGACY = re.compile(r"^(x-)?ratelimit-(limit|remaining|reset)$")
_GO_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_GO_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
#: hops_named() names that are not an edge or gateway in front of the application.
_NOT_EDGE = {"promptpath serve (hypercorn)"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Dimension:
    """One limit the server reported: how much is left of how much, and when it resets."""

    source: str  # openai | anthropic | ietf | ietf-draft-07 | ratelimit-* | x-ratelimit-*
    name: str  # requests, tokens, input-tokens, output-tokens, or an IETF policy name
    limit: int | None = None
    remaining: int | None = None
    reset: str | None = None  # as sent
    reset_s: float | None = None  # seconds from the response until it resets

    @property
    def share_left(self) -> float | None:
        if self.limit is None or self.remaining is None or self.limit <= 0:
            return None
        return self.remaining / self.limit

    def as_dict(self) -> dict[str, object]:
        share = self.share_left
        return {
            "source": self.source,
            "name": self.name,
            "limit": self.limit,
            "remaining": self.remaining,
            "reset": self.reset,
            "reset_s": None if self.reset_s is None else round(self.reset_s, 3),
            "remaining_pct": None if share is None else round(100 * share, 1),
        }


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return int(number) if math.isfinite(number) else None


def go_duration_s(text: str) -> float | None:
    """``6m0s`` → 360.0; a bare number counts as seconds; None when it is neither."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    parts = _GO_DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(n) * _GO_UNIT_S[u] for n, u in parts)


def _rfc3339_s(text: str, now_unix_s: float) -> float | None:
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return None
    return when.timestamp() - now_unix_s


def retry_after_s(text: str, now_unix_s: float) -> float | None:
    """Retry-After (RFC 9110 §10.2.3): delay-seconds, or an HTTP date."""
    text = text.strip()
    if text.isdigit():
        return float(text)
    try:
        return parsedate_to_datetime(text).timestamp() - now_unix_s
    except (TypeError, ValueError, IndexError):
        return None


def _sf_members(value: str) -> list[tuple[str, str | None, dict[str, str]]]:
    """A structured-field List or Dictionary, loosely: (item or key, value, params) each.

    Strings are unquoted; inner lists are not used by these headers and end a member."""
    members: list[tuple[str, str | None, dict[str, str]]] = []
    for raw in _split_top(value, ","):
        pieces = _split_top(raw, ";")
        head = pieces[0].strip()
        if not head:
            continue
        key, sep, val = head.partition("=")
        item, item_value = (key.strip(), _unquote(val)) if sep else (_unquote(head), None)
        params: dict[str, str] = {}
        for piece in pieces[1:]:
            pkey, psep, pval = piece.partition("=")
            if pkey.strip():
                params.setdefault(pkey.strip().lower(), _unquote(pval) if psep else "?1")
        members.append((item, item_value, params))
    return members


def _split_top(text: str, sep: str) -> list[str]:
    """Split on ``sep`` outside double quotes."""
    out: list[str] = []
    current: list[str] = []
    quoted = escaped = False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\" and quoted:
            escaped = True
        elif ch == '"':
            quoted = not quoted
        elif ch == sep and not quoted:
            out.append("".join(current))
            current = []
            continue
        current.append(ch)
    out.append("".join(current))
    return out


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return re.sub(r"\\(.)", r"\1", text[1:-1])
    return text


def _ietf(lowered: Sequence[tuple[str, str]]) -> list[Dimension]:
    limits = [v for k, v in lowered if k == "ratelimit"]
    policies = [v for k, v in lowered if k == "ratelimit-policy"]
    if not limits:
        return []
    members = [m for value in limits for m in _sf_members(value)]
    if any(value is not None for _item, value, _p in members):  # draft 07: a Dictionary
        fields = {item.lower(): value for item, value, _p in members}
        reset = fields.get("reset")
        return [
            Dimension(
                source="ietf-draft-07",
                name="default",
                limit=_int(fields.get("limit")),
                remaining=_int(fields.get("remaining")),
                reset=reset,
                reset_s=None if reset is None else _int(reset),
            )
        ]
    quotas = {item: params for value in policies for item, _v, params in _sf_members(value)}
    dims = []
    for item, _value, params in members:
        reset = params.get("t")
        dims.append(
            Dimension(
                source="ietf",
                name=item,
                limit=_int(quotas.get(item, {}).get("q")),
                remaining=_int(params.get("r")),
                reset=reset,
                reset_s=None if reset is None else _int(reset),
            )
        )
    return dims


def dimensions(headers: Sequence[tuple[str, str]], now_unix_s: float) -> list[Dimension]:
    """Every rate-limit dimension the headers report, provider families first."""
    lowered = [(k.lower(), v.strip()) for k, v in headers]
    fields: dict[tuple[str, str], dict[str, str]] = {}
    for key, value in lowered:
        if m := _OPENAI.match(key):
            fields.setdefault(("openai", m.group(2)), {}).setdefault(m.group(1), value)
        elif m := _ANTHROPIC.match(key):
            fields.setdefault(("anthropic", m.group(1)), {}).setdefault(m.group(2), value)
        elif m := _LEGACY.match(key):
            source = "x-ratelimit-*" if m.group(1) else "ratelimit-*"
            fields.setdefault((source, "default"), {}).setdefault(m.group(2), value)
    dims: list[Dimension] = []
    for (source, name), got in fields.items():
        reset = got.get("reset")
        reset_s = None
        if reset is not None:
            if source == "openai":
                reset_s = go_duration_s(reset)
            elif source == "anthropic":
                reset_s = _rfc3339_s(reset, now_unix_s)
            else:
                number = _int(reset)
                # These headers were written both ways: seconds to wait, or a Unix time.
                if number is not None:
                    reset_s = float(number) if number < 1_000_000_000 else number - now_unix_s
        dims.append(
            Dimension(
                source=source,
                name=name,
                limit=_int(got.get("limit")),
                remaining=_int(got.get("remaining")),
                reset=reset,
                reset_s=reset_s,
            )
        )
    return dims + _ietf(lowered)


def _left(dim: Dimension) -> str:
    if dim.remaining is None:
        text = f"{dim.name}: limit {dim.limit}" if dim.limit is not None else f"{dim.name}: ?"
    elif dim.limit is None:
        text = f"{dim.name} {dim.remaining:,} left"
    else:
        share = dim.share_left
        pct = "" if share is None else f" ({100 * share:.1f} %)"
        text = f"{dim.name} {dim.remaining:,}/{dim.limit:,} left{pct}"
    if dim.reset_s is not None:
        text += f", resets in {_duration(dim.reset_s)}"
    return text


def _duration(seconds: float) -> str:
    if seconds < 0:
        return "the past"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def judge(headers: Sequence[tuple[str, str]], status: int | None, now_unix_s: float) -> Finding:
    """pass (within limits, or none sent), warn (a dimension under 10 % left), fail (429)."""
    dims = dimensions(headers, now_unix_s)
    lowered = [(k.lower(), v) for k, v in headers]
    retry_raw = next((v for k, v in lowered if k == "retry-after"), None)
    retry_s = None if retry_raw is None else retry_after_s(retry_raw, now_unix_s)
    quoted = {
        k: v
        for k, v in lowered
        if k in ("server", "via", "cf-ray", "retry-after")
        or _OPENAI.match(k)
        or _ANTHROPIC.match(k)
        or _LEGACY.match(k)
        or k in ("ratelimit", "ratelimit-policy")
    }
    evidence: dict[str, object] = {
        "status": status,
        "dimensions": [d.as_dict() for d in dims],
        "retry_after_s": retry_s,
        "headers": quoted,
    }
    if status == 429:
        return _on_429(dims, headers, retry_s, evidence)
    if not dims:
        return Finding(
            probe=PROBE,
            verdict=Verdict.PASS,
            summary=f"not rate-limited (status {status}); the answer carried no rate-limit headers",
            evidence=evidence,
        )
    low = [d for d in dims if d.share_left is not None and d.share_left < LOW_SHARE]
    if low:
        return Finding(
            probe=PROBE,
            verdict=Verdict.WARN,
            summary="close to the limit: " + "; ".join(_left(d) for d in low),
            evidence=evidence,
            advice=[
                "under 10 % of a limit is left: the next requests may get 429 until it resets;"
                " spread the load, lower max_tokens, or ask the provider for a higher tier",
            ],
        )
    return Finding(
        probe=PROBE,
        verdict=Verdict.PASS,
        summary="within limits: " + "; ".join(_left(d) for d in dims),
        evidence=evidence,
    )


def _on_429(
    dims: list[Dimension],
    headers: Sequence[tuple[str, str]],
    retry_s: float | None,
    evidence: dict[str, object],
) -> Finding:
    edge = [hop for hop in hops_named(headers) if hop not in _NOT_EDGE]
    retry = "" if retry_s is None else f"; retry after {_duration(retry_s)}"
    if dims:
        layer = "application"
        exhausted = [d for d in dims if d.remaining == 0] or dims
        summary = (
            "429 from the application (its own rate-limit headers came with it): "
            + "; ".join(_left(d) for d in exhausted)
            + retry
        )
        advice = [
            "the API's own limit answered: wait for the reset (honour Retry-After), spread"
            " requests, or raise the account's limit with the provider",
        ]
    elif edge:
        layer = "edge"
        summary = (
            f"429 from the edge ({', '.join(edge)}): no rate-limit headers from the provider,"
            f" so a gateway or CDN limit answered before the API{retry}"
        )
        advice = [
            f"the limit is on the path, not the provider's: check the rate limiting of"
            f" {', '.join(edge)} (nginx limit_req, a CDN or API-gateway rule) for this client",
            "limits belong at both layers; make the edge's at least as generous as the"
            " provider's, so clients see the provider's headers and reset times",
        ]
    else:
        layer = "unknown"
        summary = (
            "429 with neither rate-limit headers nor a gateway signature: which layer"
            f" answered cannot be told{retry}"
        )
        advice = ["compare with a request that bypasses any gateway to find the limiting hop"]
    return Finding(
        probe=PROBE,
        verdict=Verdict.FAIL,
        summary=summary,
        evidence={**evidence, "layer": layer, "edge": edge},
        advice=advice,
    )
