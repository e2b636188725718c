"""Probes against the reference endpoint (``--canary``): the controls it obeys, and
whether they arrived.

``promptpath serve`` reads its controls from ``x-promptpath-*`` request headers and from
the body's ``"promptpath"`` object (``server/behaviour.py``). A probe sends every control
that could shape its stream, so a server started with other defaults (pauses, batching,
errors) cannot change what the probe measures; it sends them both ways (``--canary-controls``
narrows that), because gateways strip unknown headers.

The endpoint reports the controls it applied in its first event; ``check_controls`` holds
them, and the server's own send times, against what the probe asked for. A probe whose
requested behaviour did not happen skips with the reason: it never passes a path on a
measurement it did not make.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from promptpath.core.findings import Finding, Verdict
from promptpath.core.timeline import ServerControls, Timeline
from promptpath.probes.settings import VIA_CHOICES as VIA_CHOICES
from promptpath.probes.settings import CanarySettings, ControlsVia, ProbeSettings

if TYPE_CHECKING:
    from promptpath.options import RunOptions

HEADER_PREFIX = "x-promptpath-"
#: The server's send stamps are its wall clock at each write; pauses are timed by its
#: event loop. A planned pause shows in them to within a few ms; allow scheduling noise.
PAUSE_SLACK_S = 0.1
#: Send cadence this far from the asked rate (a factor) means the rate was not applied.
RATE_FACTOR = 2.0
MIN_RATE_SAMPLES = 5

Control = tuple[str, str]  # (control name as in x-promptpath-<name>, value)


def is_canary(settings: ProbeSettings) -> bool:
    """The target is ``promptpath serve`` (``--canary``): it obeys control headers."""
    return settings.canary.on


def controls_via(settings: ProbeSettings) -> ControlsVia:
    """How the controls travel: headers, the body field, or both (the default)."""
    return settings.canary.controls


def canary_controls(
    *,
    tokens: int,
    rate: float,
    pause_after: int | None = None,
    pause_s: float = 0.0,
    keepalive_s: float = 0.0,
) -> tuple[Control, ...]:
    """A paced stream of ``tokens`` at ``rate`` per second, one token per event from the
    start; a pause of ``pause_s`` after token ``pause_after`` only when that is given."""
    if pause_after is None:
        pause: tuple[Control, ...] = (("pause-after", "off"),)
    else:
        pause = (("pause-after", str(pause_after)), ("pause-s", f"{pause_s:g}"))
    return (
        ("tokens", str(tokens)),
        ("rate", f"{rate:g}"),
        ("ttft-ms", "0"),
        ("batch", "1"),
        *pause,
        ("keepalive-s", f"{keepalive_s:g}"),
        ("truncate-after", "off"),
        ("error-after", "off"),
    )


#: Slack for a paced canary request beyond its planned duration (handshakes, a
#: retransmitted SYN).
CANARY_MARGIN_S = 15.0


def paced_request(
    options: RunOptions,
    prompt: str,
    *,
    tokens: int,
    rate: float,
    canary: CanarySettings,
) -> RunOptions:
    """A probe's own request for ``prompt``: with --canary, ``tokens`` paced at ``rate``
    per second (one per event), its timeout the planned duration plus CANARY_MARGIN_S at
    most; otherwise the prompt as the user's endpoint answers it."""
    if not canary.on:
        return options.derive(prompt=prompt)
    paced = options.derive(
        prompt=prompt,
        max_tokens=tokens,
        timeout=min(options.timeout, tokens / rate + CANARY_MARGIN_S),
    )
    return with_controls(paced, canary_controls(tokens=tokens, rate=rate), canary.controls)


def with_controls(
    options: RunOptions, controls: Sequence[Control], via: ControlsVia = "both"
) -> RunOptions:
    """``options`` carrying ``controls`` as headers and/or in the body (--canary-controls)."""
    headers = options.headers
    if via != "body":
        headers += tuple((HEADER_PREFIX + name, value) for name, value in controls)
    body = options.body_controls
    if via != "headers":
        body += tuple(controls)
    return options.derive(headers=headers, body_controls=body)


# -- the check -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class ControlCheck:
    """What the probe asked of the canary against what the stream shows it did."""

    asked: tuple[Control, ...]
    via: ControlsVia
    reported: ServerControls | None  # the endpoint's own report, if one arrived
    not_applied: tuple[tuple[str, str, object], ...] = ()  # (control, asked, applied)
    problem: str | None = None  # why the requested behaviour cannot be trusted

    @property
    def ok(self) -> bool:
        return self.problem is None

    def evidence(self) -> dict[str, object]:
        sources = dict(self.reported.sources) if self.reported is not None else {}
        return {
            "sent_as": self.via,
            "asked": dict(self.asked),
            "reported": self.reported is not None,
            "request_id": self.reported.request_id if self.reported is not None else None,
            "arrived_by": {
                way: sorted(c for c, s in sources.items() if s == way) for way in ("header", "body")
            },
            "not_applied": [
                {"control": c, "asked": a, "applied": v} for c, a, v in self.not_applied
            ],
            "problem": self.problem,
        }


def _same(asked: str, applied: object) -> bool:
    if asked.lower() in ("off", "none", ""):
        return applied is None
    if applied is None or isinstance(applied, bool):
        return False
    if isinstance(applied, (int, float)):
        try:
            return math.isclose(float(asked), float(applied), rel_tol=1e-9, abs_tol=1e-9)
        except ValueError:
            return False
    return asked.strip().lower() == str(applied).strip().lower()


def _value(applied: object) -> str:
    """A control's value as its header would spell it."""
    if applied is None:
        return "off"
    if isinstance(applied, float):
        return f"{applied:g}"
    return str(applied)


def _report(timeline: Timeline) -> ServerControls | None:
    return next((e.controls for e in timeline.events if e.controls is not None), None)


def _stripped(via: ControlsVia) -> str:
    return {
        "both": "a hop strips the x-promptpath-* headers and the body field",
        "headers": "a hop strips the x-promptpath-* headers (the body field was not sent:"
        " --canary-controls headers)",
        "body": "a hop strips the request body's promptpath field (the headers were not"
        " sent: --canary-controls body)",
    }[via]


def _sent_s(timeline: Timeline) -> list[float]:
    """Server send times of the content events, in send order, in seconds."""
    stamped = [
        (e.seq if e.seq is not None else i, e.server_sent_unix_ns)
        for i, e in enumerate(timeline.events)
        if e.kind == "content" and e.server_sent_unix_ns is not None
    ]
    return [sent / 1e9 for _, sent in sorted(stamped)]


def _pause_problem(sent: list[float], pause_after: int, pause_s: float) -> str | None:
    """The send times around the asked pause, when the stream got past it."""
    if pause_s <= 0 or len(sent) <= pause_after or pause_after < 1:
        return None
    gap = sent[pause_after] - sent[pause_after - 1]
    if gap >= pause_s - PAUSE_SLACK_S:
        return None
    longest = max((b - a for a, b in pairwise(sent)), default=0.0)
    return (
        f"the server's send times show no {pause_s:g} s pause after token {pause_after}"
        f" (longest gap {longest:.2f} s): the canary's pause did not happen"
    )


def _rate_problem(sent: list[float], rate: float) -> str | None:
    gaps = sorted(b - a for a, b in pairwise(sent))
    if rate <= 0 or len(gaps) < MIN_RATE_SAMPLES:
        return None
    median = gaps[len(gaps) // 2]
    planned = 1.0 / rate
    if planned / RATE_FACTOR <= median <= planned * RATE_FACTOR:
        return None
    shown = f"{1 / median:.0f} tokens/s" if median > 0 else "tokens sent all at once"
    return (
        f"the server's send times show {shown}, not the {rate:g} asked: the canary's"
        " pacing did not apply"
    )


def check_controls(
    timeline: Timeline,
    asked: Sequence[Control],
    via: ControlsVia,
    *,
    pause: tuple[int, float] | None = None,
    rate: float | None = None,
) -> ControlCheck:
    """Did the canary do what the probe asked? From its report and its send times.

    ``pause`` (after token K, S seconds) and ``rate`` are checked in the server's send
    times as well, when the stream got that far: they are the behaviour itself, where the
    report is only the endpoint's word. A stream without any event has nothing to check
    and passes through: an error status before the body, or a cut that took with it every
    event a buffering hop held (the cut itself shows that a silence happened).
    """
    base = ControlCheck(asked=tuple(asked), via=via, reported=_report(timeline))
    if not any(e.kind != "comment" for e in timeline.events):
        return base
    if base.reported is None:
        stamps = any(e.server_sent_unix_ns is not None for e in timeline.events)
        why = (
            "the canary's events carry send times but no report of the controls it applied"
            " (an older promptpath serve, or a hop rewrote its first event)"
            if stamps
            else "the stream carries no report from promptpath serve (the target is not the"
            " reference endpoint, or a hop rewrites its events)"
        )
        return dataclasses.replace(base, problem=why + ": the canary's controls are unconfirmed")
    applied = dict(base.reported.applied)
    missing = tuple(
        (name, value, applied.get(name))
        for name, value in asked
        if not _same(value, applied.get(name))
    )
    if missing:
        shown = ", ".join(f"{c} asked {a}, applied {_value(v)}" for c, a, v in missing)
        arrived = {name for name, _ in base.reported.sources} & {name for name, _ in asked}
        why = (
            f"{_stripped(via)}: the canary's controls did not arrive ({shown})"
            if not arrived
            else f"the canary's controls did not arrive as sent ({shown})"
        )
        return dataclasses.replace(base, not_applied=missing, problem=why)
    sent = _sent_s(timeline)
    problem = (_pause_problem(sent, *pause) if pause is not None else None) or (
        _rate_problem(sent, rate) if rate is not None else None
    )
    return dataclasses.replace(base, problem=problem)


ADVICE = (
    "let the canary's controls through: keep --canary-controls both (the default: headers"
    " and the body's promptpath field), or have the gateway forward x-promptpath-* headers"
    " (LiteLLM proxy: forward_client_headers_to_llm_api: true)",
)

_SEVERITY = {Verdict.SKIP: 0, Verdict.PASS: 1, Verdict.WARN: 2, Verdict.FAIL: 3, Verdict.ERROR: 4}


def skipped(probe: str, check: ControlCheck, evidence: dict[str, object]) -> Finding:
    """The finding of a canary run whose requested behaviour did not happen."""
    return Finding(
        probe=probe,
        verdict=Verdict.SKIP,
        summary=f"not judged: {check.problem}",
        evidence={**evidence, "mode": "canary", "controls": check.evidence()},
        advice=list(ADVICE),
    )


def without_canary_part(finding: Finding, check: ControlCheck) -> Finding:
    """A finding judged without its canary part, which did not happen as asked: it keeps
    a warn/fail/error the other parts found on their own, else it is a skip, never a pass."""
    verdict = finding.verdict if _SEVERITY[finding.verdict] > 1 else Verdict.SKIP
    return dataclasses.replace(
        finding,
        verdict=verdict,
        summary=f"canary part not judged: {check.problem}; {finding.summary}",
        evidence={**finding.evidence, "controls": check.evidence()},
        advice=[*finding.advice, *ADVICE],
    )
