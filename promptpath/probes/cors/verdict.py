"""The ``cors`` verdict: may any web page call this authenticated endpoint from a browser?
Pure: the preflight's answer, the traced response's headers and whether the endpoint takes
a key come in as arguments.

A browser lets a page on another origin send ``Authorization`` (or cookies) only when
the endpoint's CORS headers allow that origin. ``Access-Control-Allow-Origin: *`` (or an
echo of whatever Origin came) on an endpoint that takes a key lets any page use a key it
holds or that a user pastes in; an echo with ``Access-Control-Allow-Credentials: true``
lets any page ride on the user's cookies too. A fixed list of origins, or no CORS headers
at all (browsers then refuse cross-origin calls), is what an API endpoint wants.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from promptpath.core.findings import Finding, Verdict

PROBE = "cors"
#: An origin no real deployment allows: only an endpoint that allows any origin says yes.
PROBE_ORIGIN = "https://promptpath-cors-check.invalid"
CORS_HEADERS = (
    "access-control-allow-origin",
    "access-control-allow-credentials",
    "access-control-allow-headers",
    "access-control-allow-methods",
    "access-control-expose-headers",
    "access-control-max-age",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Preflight:
    """The answer to ``OPTIONS`` with an unrelated Origin (no key sent)."""

    status: int | None
    headers: Sequence[tuple[str, str]] = ()
    error: str | None = None  # why there was no answer


def _cors(headers: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The CORS headers of an answer, by lower-case name (repeated ones joined)."""
    found: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key in CORS_HEADERS:
            found[key] = f"{found[key]}, {value.strip()}" if key in found else value.strip()
    return found


def _quote(headers: dict[str, str]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in headers.items())


def websocket_skip(url: str) -> Finding:
    """A ws:// or wss:// target: browsers send no CORS preflight before a WebSocket (the
    Fetch standard's "establish a WebSocket connection" sends only the Origin header, for
    the server to check), so there is no preflight to judge."""
    scheme = url.split(":", 1)[0]
    return Finding(
        probe=PROBE,
        verdict=Verdict.SKIP,
        summary=(
            f"a {scheme}:// target: browsers send no CORS preflight before a WebSocket"
            " (the server checks its Origin header)"
        ),
    )


def judge(preflight: Preflight, response: Sequence[tuple[str, str]], *, takes_key: bool) -> Finding:
    """``takes_key``: the endpoint is authenticated (our keyed request was accepted, or a
    request was refused for want of a key). A preflight counts only when it succeeded
    (2xx): browsers ignore the CORS headers of a failed one."""
    pre = _cors(preflight.headers)
    real = _cors(response)
    pre_ok = preflight.status is not None and 200 <= preflight.status < 300
    granted = pre if pre_ok else {}
    pre_origin = granted.get("access-control-allow-origin", "").strip()
    real_origin = real.get("access-control-allow-origin", "").strip()
    credentials = "true" in (
        granted.get("access-control-allow-credentials", "").lower(),
        real.get("access-control-allow-credentials", "").lower(),
    )
    allowed = {
        h.strip().lower() for h in granted.get("access-control-allow-headers", "").split(",")
    }
    auth_allowed = "authorization" in allowed
    evidence: dict[str, object] = {
        "origin_sent": PROBE_ORIGIN,
        "preflight": {"status": preflight.status, "headers": pre, "error": preflight.error},
        "response_headers": real,
        "takes_key": takes_key,
    }
    reflected = pre_origin == PROBE_ORIGIN
    any_origin = reflected or pre_origin == "*"
    quoted = f"preflight answered {_quote(pre)}" if pre else f"the response carried {_quote(real)}"
    if reflected and credentials:
        return Finding(
            probe=PROBE,
            verdict=Verdict.FAIL,
            summary=f"reflects any origin with credentials allowed: Origin {PROBE_ORIGIN} got"
            f" back {_quote(pre)}",
            evidence=evidence,
            advice=[
                "allow a fixed list of origins (compare Origin against it; never echo it back"
                " unchecked), and drop Access-Control-Allow-Credentials unless a browser"
                " app on a listed origin needs cookies",
            ],
        )
    if any_origin and (auth_allowed or credentials):
        what = "Access-Control-Allow-Origin: *" if not reflected else "any origin (echoed back)"
        why = "Authorization" if auth_allowed else "credentials"
        return Finding(
            probe=PROBE,
            verdict=Verdict.FAIL,
            summary=f"allows {what} with {why}: any web page can call it with a key; {quoted}",
            evidence=evidence,
            advice=[
                "an authenticated API endpoint needs no CORS headers unless a browser app"
                " calls it directly; then allow only that app's origins, not *",
            ],
        )
    if (any_origin or real_origin == "*") and takes_key:
        return Finding(
            probe=PROBE,
            verdict=Verdict.WARN,
            summary="allows any origin on an endpoint that takes a key, though its preflight"
            f" does not let browsers send Authorization; {quoted}",
            evidence=evidence,
            advice=[
                "drop Access-Control-Allow-Origin: * from the authenticated endpoint (or list"
                " the origins that need it): one added Allow-Headers line makes it open",
            ],
        )
    if not pre and not real:
        summary = "no CORS headers: browsers refuse cross-origin calls (what an API wants)"
    elif any_origin or real_origin == "*":
        summary = f"allows any origin, but the endpoint takes no key; {quoted}"
    else:
        summary = f"does not allow an unrelated origin ({PROBE_ORIGIN}); {quoted}"
    if preflight.error is not None:
        summary += f" (preflight: {preflight.error})"
    return Finding(probe=PROBE, verdict=Verdict.PASS, summary=summary, evidence=evidence)
