"""The one sentence a diff leads with: what changed, by how much, and the stage that
explains most of it first. Pure.

    TTFT +412 ms (p50, 20 vs 20 runs): +405 ms in first_token (after the request reached
    the server); DNS, connect, TLS, request unchanged; edge changed from FRA to AMS

Fact values are the documents' (untrusted) strings, cut short here; the presenter escapes.
"""

from __future__ import annotations

from collections.abc import Sequence

from promptpath.core.change.facts import FactChange
from promptpath.core.change.samples import MetricChange

__all__ = ["headline", "signed"]

#: The change a headline leads with, in this order: what a user feels first.
LEAD = ("ttft", "first_output", "total", "tokens_per_s", "gap_p99", "gap_p95", "gap_p50")
#: Where each stage's time goes, for the attribution.
WHERE: dict[str, str] = {
    "dns": "name resolution",
    "connect": "the TCP handshake",
    "tls": "the TLS handshake",
    "quic_handshake": "the QUIC handshake",
    "request": "sending the request",
    "wait": "until the response headers: network and the server's queue",
    "first_token": "after the request reached the server",
    "streaming": "while the answer streamed",
}
#: The stages named as unchanged (the setup and request; the later ones lead when they move).
QUIET = ("dns", "connect", "tls", "quic_handshake", "request", "wait")
#: Facts worth a place in the headline, in this order; the rest are in the table.
FACT_ORDER = (
    "failure",
    "cert_issuer",
    "tls_intercepted",
    "via",
    "proxy",
    "edge",
    "edge_location",
    "address",
    "family",
    "http_version",
    "tls_version",
    "dns_answers",
)
FACTS_SHOWN = 2
#: Milestones that move with the lead and its stages (TTFT from t0 and from the request,
#: the first output, the end): named in the table, not again in the headline.
_DERIVED = {
    "ttft",
    "ttft_from_request",
    "first_output",
    "ttft_network_adjusted",
    "first_output_network_adjusted",
    "total",
}
_VALUE_SHOWN = 60


def signed(value: float, unit: str) -> str:
    """A change with its sign and unit: +412 ms, −3.5 ms, −12.0 tok/s, +0.40 (a share)."""
    sign = "+" if value >= 0 else "−"
    size = abs(value)
    if unit == "share":
        return f"{sign}{size:.2f}"
    if unit == "ms":
        return f"{sign}{size:.0f} ms" if size >= 10 else f"{sign}{size:.1f} ms"
    return f"{sign}{size:.1f} {unit}"


def _short(values: Sequence[str]) -> str:
    text = ", ".join(values)
    return text if len(text) <= _VALUE_SHOWN else text[: _VALUE_SHOWN - 1] + "…"


def _count(change: MetricChange) -> str:
    if change.n_before == 1 and change.n_after == 1:
        return "1 vs 1 run"
    return f"p50, {change.n_before} vs {change.n_after} runs"


_SHORT = {"dns": "DNS", "tls": "TLS", "quic_handshake": "QUIC handshake"}


def _stage_name(name: str) -> str:
    return _SHORT.get(name, name)


def _facts(facts: Sequence[FactChange]) -> list[str]:
    ranked = sorted(
        (f for f in facts if f.name in FACT_ORDER or f.name.startswith("finding.")),
        key=lambda f: FACT_ORDER.index(f.name) if f.name in FACT_ORDER else len(FACT_ORDER),
    )
    parts = []
    for fact in ranked[:FACTS_SHOWN]:
        if fact.name.startswith("finding."):
            parts.append(f"{fact.label} {_short(fact.before)} → {_short(fact.after)}")
        else:
            parts.append(f"{fact.label} changed from {_short(fact.before)} to {_short(fact.after)}")
    if len(facts) > len(parts) and parts:
        more = len(facts) - len(parts)
        parts.append(f"{more} more fact{'s' if more > 1 else ''} changed")
    elif not parts and facts:
        parts.append(f"{len(facts)} fact{'s' if len(facts) > 1 else ''} changed")
    return parts


def headline(
    metrics: Sequence[MetricChange], errors: MetricChange, facts: Sequence[FactChange]
) -> str:
    """The diff's one line (see the module docstring)."""
    by_name = {m.name: m for m in metrics}
    changed = [m for m in metrics if m.changed]
    parts: list[str] = []
    if errors.changed and errors.before_p50 is not None and errors.after_p50 is not None:
        parts.append(
            f"error rate {errors.before_p50:.0%} → {errors.after_p50:.0%} ({errors.verdict})"
        )
    lead = next((by_name[n] for n in LEAD if n in by_name and by_name[n].changed), None)
    if lead is None and changed:
        lead = changed[0]
    stages = sorted(
        (m for m in changed if m.name in WHERE and m is not lead),
        key=lambda m: -abs(m.delta or 0.0),
    )
    quiet = [_stage_name(n) for n in QUIET if n in by_name and by_name[n].verdict == "unchanged"]
    if lead is not None:
        head = f"{lead.label} {signed(lead.delta or 0.0, lead.unit)} ({_count(lead)})"
        attributed = [
            f"{signed(m.delta or 0.0, m.unit)} in {m.name} ({WHERE[m.name]})" for m in stages
        ]
        parts.append(head + (": " + ", ".join(attributed) if attributed else ""))
        others = [
            m for m in changed if m is not lead and m.name not in WHERE and m.name not in _DERIVED
        ]
        if others:
            parts.append(
                ", ".join(f"{m.label} {signed(m.delta or 0.0, m.unit)}" for m in others[:3])
                + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            )
    elif not parts:
        sample = by_name.get("ttft") or (metrics[0] if metrics else None)
        count = f" ({_count(sample)})" if sample is not None else ""
        small = [m for m in metrics if m.significant and not m.changed]
        if small:
            parts.append(f"No change beyond the floors{count}")
            parts.append(
                "real but under the floor: "
                + ", ".join(
                    f"{m.label} {signed(m.delta or 0.0, m.unit)} (floor {m.floor or 0.0:.3g})"
                    for m in small[:3]
                )
                + (f" and {len(small) - 3} more" if len(small) > 3 else "")
            )
        else:
            parts.append(f"No change beyond noise{count}")
    if quiet:
        parts.append(", ".join(quiet) + " unchanged")
    parts.extend(_facts(facts))
    return "; ".join(parts)
