"""The words for the report's ``h3`` object (HTTP/3 discovery): shared by the tracer that
fills it and the terminal that shows it."""

from __future__ import annotations

from typing import Any

#: ``https_rr.error`` when --resolve pins the origin: its name is not sent to DNS at all.
SKIPPED_BY_RESOLVE = "skipped: --resolve pins the address"


def describe_h3(h3: dict[str, Any] | None) -> str:
    """One line for the terminal report."""
    if h3 is None:
        return "HTTP/3: not applicable (cleartext target)"
    by = h3.get("advertised_by")
    problems = (h3.get("alt_svc") or {}).get("problems") or []
    tail = f" ({len(problems)} malformed Alt-Svc part(s) ignored)" if problems else ""
    if by == "alt-svc":
        return (
            f"HTTP/3 advertised by Alt-Svc at {h3['authority']} (ma {h3['max_age']} s"
            f"{', persist' if h3.get('persist') else ''}){tail}"
        )
    if by == "https-rr":
        return f"HTTP/3 advertised by the DNS HTTPS record at {h3['authority']}{tail}"
    rr = h3.get("https_rr") or {}
    error = rr.get("error")
    if error == SKIPPED_BY_RESOLVE:
        why = "; HTTPS record not looked up (--resolve pins the address)"
    elif error:
        why = f"; HTTPS record lookup failed: {error}"
    else:
        why = ""
    return f"HTTP/3 not advertised (no h3 in Alt-Svc or an HTTPS record){why}{tail}"


__all__ = ["SKIPPED_BY_RESOLVE", "describe_h3"]
