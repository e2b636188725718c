"""Compression of the event stream, judged for the client being imitated. Pure: no I/O.

A hop may compress because the client accepts it (httpx offers gzip, so the SDKs get
gzip) or regardless of what it was offered. Only the first is the path treating this
client as it asked; both can hold events back (nginx `gzip` for text/event-stream
delivers the whole answer at the end to a gzip client, and streams to an identity one).
One request cannot tell the compression from another buffer: the probe then sends the
same request with ``Accept-Encoding: identity`` and ``with_identity_check`` compares.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from promptpath.core.findings import Finding, Verdict

HELD_PATTERNS = ("whole", "bursts")


def _coding(name: str) -> str:
    return "gzip" if name == "x-gzip" else name  # RFC 9110 §8.4.1.3: the same coding


def for_this_client(encoding: str, offered: Sequence[str]) -> bool:
    """The stream came in a coding the request offered (the path did as asked)."""
    return "*" in offered or _coding(encoding) in {_coding(o) for o in offered}


def compression_facts(encoding: str, offered: Sequence[str], pattern: object) -> dict[str, object]:
    """Evidence: the coding, what was offered, and whether the compressed stream was held
    back (whole or in bursts; None while the delivery could not be judged)."""
    return {
        "encoding": encoding,
        "offered": list(offered),
        "for_this_client": for_this_client(encoding, offered),
        "held_back": None if pattern is None else pattern in HELD_PATTERNS,
    }


def wants_identity_check(finding: Finding) -> bool:
    """Compressed because this client accepts it, and held back: would identity stream?"""
    facts = finding.evidence.get("compression")
    return (
        isinstance(facts, dict)
        and facts.get("for_this_client") is True
        and facts.get("held_back") is True
        and finding.verdict in (Verdict.WARN, Verdict.FAIL)
    )


def with_identity_check(finding: Finding, identity: Finding) -> Finding:
    """The client's finding (its verdict stands: that is what the user gets), told whether
    the same request without compression was held back too."""
    facts = finding.evidence.get("compression")
    encoding = str(facts.get("encoding")) if isinstance(facts, dict) else "compression"
    identity_facts = identity.evidence.get("compression")
    check: dict[str, object] = {
        "verdict": identity.verdict.value,
        "pattern": identity.evidence.get("pattern"),
        "compressed": identity_facts.get("encoding") if isinstance(identity_facts, dict) else None,
        "summary": identity.summary,
    }
    advice = list(finding.advice)
    if identity.verdict is Verdict.PASS:
        check["cause"] = "compression"
        summary = (
            f"{finding.summary}; only clients that accept {encoding} are held back: the same"
            " request with Accept-Encoding: identity streamed"
        )
        # Now known to be the cause: this replaces the verdict's general compression line.
        advice = [a for a in advice if not a.startswith("a hop compresses the event stream")]
        advice.insert(
            0,
            f"the path holds the stream back only when it compresses it ({encoding}):"
            " exclude text/event-stream from compression (nginx: drop it from gzip_types;"
            " caddy: an `encode` matcher without it; haproxy: `compression type`), or turn"
            " response buffering off where it compresses (nginx with `proxy_buffering off`"
            " streams gzip)",
        )
    elif identity.verdict in (Verdict.WARN, Verdict.FAIL):
        check["cause"] = "not_only_compression"
        summary = (
            f"{finding.summary}; held back without compression too (Accept-Encoding:"
            " identity): compression is not the only cause"
        )
    else:
        check["cause"] = None
        summary = f"{finding.summary}; the identity comparison could not tell: {identity.summary}"
    return dataclasses.replace(
        finding,
        summary=summary,
        evidence={**finding.evidence, "identity_check": check},
        advice=advice,
    )
