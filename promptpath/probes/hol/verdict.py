"""The hol probe's verdict: measured groups of streams in, a Finding out. Pure.

Three groups of N streams ran (``hol.measure``): all on one HTTP/2 connection
(``shared``), each on its own connection (``separate``, at the same time as the shared
ones, so that anything holding back every stream — the server, this machine's CPU —
shows in both), and on one HTTP/3 connection when the endpoint offers it. Head-of-line
blocking is the shared connection's stalls holding all its streams together while the
separate connections' stalls do not: one lost TCP segment holds back the bytes of every
stream behind it until its retransmission arrives, so it says loss on this path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from promptpath.core.findings import Finding, Verdict
from promptpath.probes.hol.measure import GroupMeasure

PROBE = "hol"

#: Episodes that held two or more streams of the shared connection at once, each with a
#: retransmission's length (``retransmission_ms``), before it is called head-of-line
#: blocking. Not "every stream": a retransmission about a round trip long pushes some
#: streams' gaps just over the threshold and leaves others just under it, depending on
#: where each was in its cadence. Not fewer, and not without the length: one connection's
#: streams also stall together when its processing at either end waits for a CPU (at
#: load 12 on 2 cores a clean path gave up to 4 episodes of 40-66 ms in a run, and 2 clean
#: runs in 20 were called before the length counted). Over the impairer (20 ms each way,
#: the canary's 4 s streams), 40 runs each way at load 3.3-8.6: 2 % loss gave 5-17 such
#: episodes, a clean path 0-1.
MIN_EPISODES = 4
#: The shared connection's mean co-stall share at least this (1.0: every stall held every
#: stream; the benchmark's 2 % loss read 0.97-1.00)...
HOL_SHARE = 0.75
#: ... and the separate connections' at least this much lower (the benchmark's HTTP/3 and
#: separate streams read 0.2-0.5 at 4 streams: each stalls on its own losses).
MARGIN = 0.3
#: Timing noise allowed below a round trip over the cadence (``retransmission_ms``).
RETRANSMIT_SLACK_MS = 5.0
#: Distinct arrivals a stream needs before its gaps say anything (a hop that delivers
#: the answer in a few blocks leaves nothing to measure).
MIN_ARRIVALS = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class HolMeasure:
    """What the probe measured, and how it set the stall threshold."""

    streams: int
    shared: GroupMeasure
    separate: GroupMeasure
    http3: GroupMeasure | None = None
    http3_note: str | None = None  # why HTTP/3 was not measured
    cadence_ms: float | None
    cadence_source: str  # "canary" (the rate the probe asked for) or "measured"
    floor_ms: float
    rtt_ms: float | None  # the fastest TCP connect of the probe's connections
    threshold_ms: float | None
    #: Spans that held every stream of both TCP groups at once (measure.pauses): the
    #: server or this machine, not a connection; their stalls are left out of both.
    pauses_ms: tuple[float, ...] = ()
    context: dict[str, object] = field(default_factory=dict)

    def evidence(self) -> dict[str, object]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 3)

        return {
            **self.context,
            "streams": self.streams,
            "cadence_ms": r(self.cadence_ms),
            "cadence_source": self.cadence_source,
            "floor_ms": r(self.floor_ms),
            "rtt_ms": r(self.rtt_ms),
            "stall_threshold_ms": r(self.threshold_ms),
            "retransmission_ms": r(retransmission_ms(self)),
            "pauses_ms": [round(p, 3) for p in self.pauses_ms],
            "shared": self.shared.as_dict(),
            "separate": self.separate.as_dict(),
            "http3": None if self.http3 is None else self.http3.as_dict(),
            "http3_note": self.http3_note,
        }


def _share(group: GroupMeasure | None) -> str:
    if group is None:
        return "—"
    co = group.co_stall
    return "no stall" if co is None else f"{co:.2f}"


def _range(group: GroupMeasure) -> str:
    low, high = min(group.stall_ms), max(group.stall_ms)
    return f"{low:.0f} ms" if round(low) == round(high) else f"{low:.0f}–{high:.0f} ms"


def _which(group: GroupMeasure) -> str:
    """Which of the group's streams its stalls held together: ``all 4``, ``2-4 of the 4``."""
    low, high = min(group.together), max(group.together)
    if low == group.streams:
        return f"all {group.streams}"
    span = f"{low}" if low == high else f"{low}–{high}"
    return f"{span} of the {group.streams}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _figures(m: HolMeasure) -> str:
    """Each group's stalls and co-stall, one clause each."""

    def one(name: str, g: GroupMeasure | None) -> str | None:
        if g is None:
            return None
        if not g.stalls:
            return f"{name}: no stall"
        return f"{name}: {_plural(g.stalls, 'stall')} of {_range(g)}, co-stall {_share(g)}"

    parts = [
        one(f"{m.streams} streams on one HTTP/2 connection", m.shared),
        one(f"{m.streams} on separate connections", m.separate),
        one("HTTP/3", m.http3),
    ]
    return "; ".join(p for p in parts if p)


def _threshold(m: HolMeasure) -> str:
    if m.threshold_ms is None or m.cadence_ms is None:
        return ""
    how = "asked of the canary" if m.cadence_source == "canary" else "the stream's median gap"
    return (
        f" (a stall: a gap over {m.threshold_ms:.0f} ms, the {m.cadence_ms:.0f} ms cadence"
        f" ({how}) plus {m.floor_ms:.0f} ms)"
    )


def _paused(m: HolMeasure) -> str:
    if not m.pauses_ms:
        return ""
    return (
        f"; {_plural(len(m.pauses_ms), 'pause')} that held every stream of both groups at once"
        " (the server or this machine, not a connection) left out"
    )


def _unusable(m: HolMeasure) -> Finding | None:
    """A skip or error when the streams cannot show stalls."""
    shared, separate = m.shared, m.separate
    if shared.arrivals == 0 and shared.error is not None:
        return Finding(
            probe=PROBE,
            verdict=Verdict.ERROR,
            summary=f"the probe's streams failed: {shared.error}",
            evidence=m.evidence(),
        )
    if shared.http_version not in (None, "HTTP/2"):
        return Finding(
            probe=PROBE,
            verdict=Verdict.SKIP,
            summary=f"not judged: the endpoint answered in {shared.http_version}, so no two"
            " streams shared a connection (HTTP/2 multiplexing is what this probe measures)",
            evidence=m.evidence(),
        )
    thin = [
        (name, g)
        for name, g in (("shared", shared), ("separate", separate))
        if g.arrivals < MIN_ARRIVALS * g.streams
    ]
    if thin:
        name, g = thin[0]
        said = f" ({g.error})" if g.error else ""
        return Finding(
            probe=PROBE,
            verdict=Verdict.SKIP,
            summary=f"not judged: the {name} streams brought {g.arrivals} distinct arrivals"
            f" over {g.streams} streams, fewer than {MIN_ARRIVALS} each{said}: a stream"
            " delivered in a few blocks has no gaps to compare (see the buffering probe;"
            " raise --max-tokens)",
            evidence=m.evidence(),
        )
    return None


def retransmission_ms(m: HolMeasure) -> float:
    """The longest stall of an episode a lost segment caused lasts at least this: the lost
    token's own stream waits for the retransmission, a round trip or more beyond its
    cadence (less RETRANSMIT_SLACK_MS of timing noise). A stall that held one connection's
    streams together for less is more likely a wait for a CPU at either end."""
    if m.cadence_ms is None or m.rtt_ms is None:
        return m.threshold_ms or 0.0
    return max(m.threshold_ms or 0.0, m.cadence_ms + m.rtt_ms - RETRANSMIT_SLACK_MS)


def is_head_of_line(m: HolMeasure) -> bool:
    """The shared connection's stalls held its streams together, with a retransmission's
    length, and the separate connections' stalls (if any) did not."""
    shared_co = m.shared.co_stall
    marked = m.shared.together_at_least(retransmission_ms(m))
    if shared_co is None or marked < MIN_EPISODES or shared_co < HOL_SHARE:
        return False
    separate_co = m.separate.co_stall
    return separate_co is None or separate_co <= shared_co - MARGIN


def judge(m: HolMeasure) -> Finding:
    """Head-of-line blocking (warn) when the shared connection's stalls hit every stream
    and the separate connections' do not; a pass with the figures otherwise."""
    unusable = _unusable(m)
    if unusable is not None:
        return unusable
    figures = _figures(m)
    note = f"; HTTP/3 not measured: {m.http3_note}" if m.http3 is None and m.http3_note else ""
    note += _paused(m)
    if is_head_of_line(m):
        shared, h3 = m.shared, m.http3
        shared_co = shared.co_stall or 0.0
        h3_words = "" if h3 is None else f"; HTTP/3 {_share(h3)}"
        advice = [
            "find where packets are lost on this path (the path probe; mtr or a capture"
            " from both ends): every lost segment stalls all the streams of a connection",
            "spread concurrent streams over several connections (the client's connection"
            " pool), so that one loss holds back one stream, not all",
        ]
        if h3 is not None and (h3.co_stall is None or h3.co_stall <= shared_co - MARGIN):
            advice.append(
                "HTTP/3 lost less to it here: QUIC retransmits per stream, so a lost packet"
                " holds back only the streams whose data it carried"
            )
        return Finding(
            probe=PROBE,
            verdict=Verdict.WARN,
            summary=f"head-of-line blocking: {_plural(len(shared.together), 'stall')} of"
            f" {_range(shared)} hit {_which(shared)} streams of the shared HTTP/2 connection"
            f" at once (co-stall {_share(shared)}); separate connections {_share(m.separate)}:"
            f" one lost segment holds back every stream (loss on this path){h3_words}"
            f"{_threshold(m)}{note}",
            lead="head-of-line blocking on the shared HTTP/2 connection",
            evidence={**m.evidence(), "head_of_line": True},
            advice=advice,
        )
    stalls = m.shared.stalls + m.separate.stalls + (0 if m.http3 is None else m.http3.stalls)
    if not stalls:
        summary = f"no stalls: {figures}{_threshold(m)}{note}"
    elif (
        m.shared.co_stall is not None
        and m.shared.co_stall >= HOL_SHARE
        and (m.separate.co_stall is not None and m.separate.co_stall >= HOL_SHARE)
    ):
        summary = (
            "no head-of-line blocking told apart: stalls held the streams on separate"
            " connections together too, so something before the connections (the server,"
            f" or this machine) held them all; {figures}{_threshold(m)}{note}"
        )
    elif not m.shared.stalls:
        summary = (
            "no head-of-line blocking: no stall on the shared HTTP/2 connection;"
            f" {figures}{_threshold(m)}{note}"
        )
    else:
        summary = (
            "no head-of-line blocking: the shared connection's stalls did not hold its"
            f" streams together; {figures}{_threshold(m)}{note}"
        )
    return Finding(
        probe=PROBE,
        verdict=Verdict.PASS,
        summary=summary,
        lead="no head-of-line blocking" if stalls else "no stalls",
        evidence={**m.evidence(), "head_of_line": False},
    )


def not_judged(reason: str, evidence: dict[str, object] | None = None) -> Finding:
    """A skip before any stream ran (a target the probe cannot measure)."""
    return Finding(
        probe=PROBE,
        verdict=Verdict.SKIP,
        summary=f"not judged: {reason}",
        evidence=dict(evidence or {}),
    )


__all__ = [
    "HOL_SHARE",
    "MARGIN",
    "MIN_ARRIVALS",
    "MIN_EPISODES",
    "PROBE",
    "HolMeasure",
    "is_head_of_line",
    "judge",
    "not_judged",
]
