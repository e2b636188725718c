"""The path probe's reading of a hop-by-hop trace, the way an expert reads mtr. Pure.

Routers forward packets in hardware and answer TTL-expired probes from a slow, rate-limited
control plane: a hop's own RTT or loss says how busy that router's CPU is, not how the path
treats traffic through it. So:

* a latency step is blamed on a hop only when it persists at every later hop and at the
  destination: each hop's *floor* is the lowest median from it to the destination, and the
  RTT a hop adds is its floor minus the previous hop's;
* a hop slower or lossier than the hops after it deprioritises its own ICMP replies (it is
  reported, and explicitly not as the problem);
* loss counts against the path only when it reaches the destination;
* a hop that never answers is silent, and the trace goes on past it;
* a step below the measurement floor is placed nowhere: on a sub-millisecond path the
  probe's own timing is most of what it measures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from promptpath.core.findings import Finding, Verdict
from promptpath.probes.path.hops import Hop, Sample, hops_of, name_of
from promptpath.probes.path.udp import read_udp

PROBE = "path"

#: A hop's own median this far above the floor after it is its ICMP's slowness, not the
#: path's: both a fixed margin (timer and scheduling noise) and a share of the floor.
SLOW_ALONE_MS = 2.0
SLOW_ALONE_SHARE = 0.5
#: The handshake may take this much more than the destination's probe RTT before the extra
#: is the server's (accept queue, SYN cookies) rather than the path's.
HANDSHAKE_SLACK_MS = 5.0
HANDSHAKE_SLACK_SHARE = 0.5
#: A step smaller than this is not placed at any hop. A probe's RTT runs from just before
#: connect()/send() to the wake-up of a Python thread after the answer arrived, in a
#: process whose event loop shares the interpreter: on the lab chain with no delay at all
#: (tests/helpers/pathlab.py, 12 runs of --probe path on the shared 2-core machine, load
#: 3.7) the steps measured were up to 0.52 ms, the destination's often 0.4-0.5 ms: the
#: probe's own timing, not the path's. The floor is twice that, and a step must clear it on
#: each hop's fastest probe as well: two late wake-ups at one hop lift its median, never
#: its fastest probe.
MEASUREMENT_FLOOR_MS = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Listening:
    """What the raw ICMP listener and the kernel's counter say about replies the probe
    sockets' error queues did not get (net/rawicmp.py)."""

    reason: str | None = None  # why no raw socket listened (None: one did)
    heard: int = 0  # replies heard only on the raw socket
    out_of_window: int | None = None  # ICMP errors TCP dropped as out of window meanwhile


@dataclass(frozen=True, slots=True, kw_only=True)
class Reading:
    """What the hops say, the expert's way."""

    reached: bool
    floors: dict[int, float]  # ttl -> lowest median from this hop to the destination
    added_ms: dict[int, float]  # ttl -> RTT this hop's side adds (persisting to the end)
    added_fastest_ms: dict[int, float]  # the same on each hop's fastest probe
    deprioritised: list[int]  # hops slow or lossy alone: their ICMP, not the path
    silent: list[int]  # hops that never answered, with an answer after them (the trace went on)
    destination_loss: float
    destination_rtt_ms: float | None

    def measurable(self, ttl: int) -> bool:
        """The step at ``ttl`` is above the measurement floor, on the medians and on the
        fastest probes alike."""
        return min(self.added_ms[ttl], self.added_fastest_ms[ttl]) >= MEASUREMENT_FLOOR_MS

    @property
    def biggest_step(self) -> int | None:
        if not self.added_ms:
            return None
        return max(self.added_ms, key=lambda ttl: self.added_ms[ttl])


def _silent(hops: Sequence[Hop]) -> list[int]:
    """Hops that never answered while a later one did; the unanswered hops after the last
    answer are where the trace ran out, not hops it went past."""
    answered = [h.ttl for h in hops if h.rtts_ms]
    last = max(answered, default=0)
    return [h.ttl for h in hops if not h.rtts_ms and not h.destination and h.ttl < last]


def _floors(medians: dict[int, float]) -> dict[int, float]:
    """Each hop's floor: the lowest median from it to the destination."""
    return {ttl: min(m for t, m in medians.items() if t >= ttl) for ttl in medians}


def read(hops: Sequence[Hop]) -> Reading:
    medians = {h.ttl: m for h in hops if (m := h.median_ms) is not None}
    floors = _floors(medians)
    deprioritised = []
    for h in hops:
        if h.destination or h.ttl not in medians:
            continue
        own, floor = medians[h.ttl], floors[h.ttl]
        slow = own - floor > max(SLOW_ALONE_MS, SLOW_ALONE_SHARE * floor)
        after = [x for x in hops if x.ttl > h.ttl and x.rtts_ms]
        lossy = h.loss > 0 and bool(after) and min(x.loss for x in after) < h.loss
        if slow or lossy:
            deprioritised.append(h.ttl)
    # A step is placed between hops whose own figures can be trusted: a deprioritised hop's
    # RTT says nothing of the links on either side of it.
    trusted = _floors({t: m for t, m in medians.items() if t not in deprioritised})
    # The same on each hop's fastest probe: timing noise only ever adds, so a step of the
    # path shows there too, where two late wake-ups at one hop do not.
    fastest = _floors({h.ttl: min(h.rtts_ms) for h in hops if h.rtts_ms and h.ttl in trusted})
    added: dict[int, float] = {}
    added_fastest: dict[int, float] = {}
    previous = previous_fastest = 0.0
    for ttl in sorted(trusted):
        added[ttl] = round(max(0.0, trusted[ttl] - previous), 3)
        added_fastest[ttl] = round(max(0.0, fastest[ttl] - previous_fastest), 3)
        previous, previous_fastest = trusted[ttl], fastest[ttl]
    last = hops[-1] if hops else None
    reached = last is not None and last.destination
    return Reading(
        reached=reached,
        floors=trusted,
        added_ms=added,
        added_fastest_ms=added_fastest,
        deprioritised=deprioritised,
        silent=_silent(hops),
        destination_loss=last.loss if reached and last is not None else 1.0,
        destination_rtt_ms=last.median_ms if reached and last is not None else None,
    )


def judge(
    *,
    destination: str,
    port: int,
    tcp: Sequence[Sample],
    udp: Sequence[Sample] | None,
    connect_ms: float | None,
    elapsed_s: float,
    names: Mapping[str, str | None] | None = None,
    listening: Listening | None = None,
) -> Finding:
    """The finding for a TCP trace (and, for an HTTP/3 target, the UDP one); ``names``
    the responders' reverse names, when they were asked for."""
    hops = hops_of(tcp, destination, names)
    reading = read(hops)
    by_ttl = {h.ttl: h for h in hops}
    notes: list[str] = []
    advice: list[str] = []
    verdict = Verdict.PASS
    if reading.reached and reading.destination_rtt_ms is not None:
        rtt = reading.destination_rtt_ms
        summary = f"{len(hops)} hop(s) to {destination} port {port}, RTT {rtt:.1f} ms"
        step = reading.biggest_step
        if step is not None and len(hops) > 1 and not reading.measurable(step):
            summary += (
                "; nothing measurable is added at any hop (every step is below the"
                f" {MEASUREMENT_FLOOR_MS:.1f} ms measurement floor)"
            )
        elif step is not None and len(hops) > 1:
            # The hop before the step whose own figures count (a deprioritised one does not).
            earlier = [ttl for ttl in reading.added_ms if ttl < step]
            where = f"hop {step} ({name_of(by_ttl[step])})"
            side = f"at {where}"
            if earlier:
                before = by_ttl[max(earlier)]
                side = f"between hop {before.ttl} ({name_of(before)}) and {where}"
            summary += f"; most of it ({reading.added_ms[step]:.1f} ms) is added {side}"
        if reading.destination_loss > 0:
            verdict = Verdict.WARN
            notes.append(
                f"{reading.destination_loss:.0%} of the probes to the destination were lost:"
                " loss that reaches the destination is the path's"
            )
    else:
        verdict = Verdict.WARN
        answered = [h for h in hops if h.rtts_ms]
        last = f"hop {answered[-1].ttl} ({name_of(answered[-1])})" if answered else "no hop"
        summary = (
            f"the destination {destination} port {port} never answered a TTL-limited SYN;"
            f" the last answer came from {last}"
        )
        after = [h.ttl for h in hops if h.ttl > (answered[-1].ttl if answered else 0)]
        if after:
            summary += f", nothing from hop {after[0]} to hop {after[-1]}"
        advice.append(
            "a firewall on the way may drop TCP probes with a low TTL: try from a host"
            " nearer the destination, or ask its operator"
        )
    for ttl in reading.deprioritised:
        hop = by_ttl[ttl]
        notes.append(
            f"hop {ttl} ({name_of(hop)}) is slower or lossier than the hops after it: this router"
            " deprioritises its own ICMP replies, it is not where the path loses time"
        )
    if reading.deprioritised:
        advice.append(
            "judge a hop by the hops after it: latency or loss at one hop that later hops do not"
            " show is that router's ICMP rate limit (mtr shows it the same way)"
        )
    for ttl in reading.silent:
        notes.append(f"hop {ttl} never answers TTL-expired probes (silent); the trace went on")
    listening = listening or Listening()
    raw_notes, raw_advice = _rewritten(listening, reading)
    notes += raw_notes
    advice += raw_advice
    handshake = None
    if connect_ms is not None and reading.destination_rtt_ms is not None:
        rtt = reading.destination_rtt_ms
        extra = connect_ms - rtt
        handshake = {"connect_ms": connect_ms, "path_rtt_ms": rtt, "extra_ms": round(extra, 3)}
        if extra > max(HANDSHAKE_SLACK_MS, HANDSHAKE_SLACK_SHARE * rtt):
            notes.append(
                f"the trace's TCP handshake took {connect_ms:.1f} ms against a path RTT of"
                f" {rtt:.1f} ms: the extra {extra:.1f} ms is the server's (a full accept queue,"
                " SYN cookies) or the connection went elsewhere"
            )
        else:
            notes.append(
                f"the trace's TCP handshake ({connect_ms:.1f} ms) is one path RTT"
                f" ({rtt:.1f} ms): the connect stage is the path's"
            )
    quic = None
    if udp is not None:
        quic, quic_note, quic_bad, narrowing = read_udp(
            udp, destination, port, reading.reached, names
        )
        notes.append(quic_note)
        if quic_bad:
            verdict = Verdict.WARN if verdict is Verdict.PASS else verdict
            advice.append(
                narrowing.advice()
                if narrowing is not None
                else "HTTP/3 needs UDP to this port end to end: allow it on the firewall, or"
                " expect clients to fall back to HTTP/2"
            )
    if notes:
        summary += "; " + "; ".join(notes)
    return Finding(
        probe=PROBE,
        verdict=verdict,
        summary=summary,
        evidence={
            "destination": destination,
            "port": port,
            "protocol": "tcp",
            "hops": [h.as_dict() for h in hops],
            "added_ms": {str(k): v for k, v in reading.added_ms.items()},
            "measurement_floor_ms": MEASUREMENT_FLOOR_MS,
            "deprioritised": reading.deprioritised,
            "silent": reading.silent,
            "reached": reading.reached,
            "destination_loss": round(reading.destination_loss, 3),
            "handshake": handshake,
            "udp": quic,
            "raw_icmp": {
                "listening": listening.reason is None,
                "reason": listening.reason,
                "heard": listening.heard,
                "out_of_window_icmps": listening.out_of_window,
            },
            "elapsed_s": round(elapsed_s, 3),
        },
        advice=advice,
    )


def _rewritten(listening: Listening, reading: Reading) -> tuple[list[str], list[str]]:
    """Notes and advice when the kernel refused ICMP to the probe sockets as out of window:
    a middlebox that rewrites TCP sequence numbers, and the hops past it heard only raw."""
    notes: list[str] = []
    advice: list[str] = []
    if listening.heard:
        notes.append(
            f"{listening.heard} reply(ies) came only to the raw ICMP socket: the kernel refused"
            " them to the probe sockets, as it does when a middlebox on the path rewrites TCP"
            " sequence numbers and the routers past it quote the rewritten ones"
        )
    dropped = listening.out_of_window or 0
    if dropped and (reading.silent or not reading.reached) and listening.reason is not None:
        notes.append(
            f"this kernel dropped {dropped} ICMP error(s) as out of window while the probe ran:"
            " a middlebox on the path rewrites TCP sequence numbers (a firewall's sequence"
            " randomisation), so the hops past it look silent here though they answer"
        )
        advice.append(
            "run the path probe with CAP_NET_RAW (as root, or `setcap cap_net_raw+ep` on the"
            " interpreter) so a raw ICMP socket hears the hops past the sequence-rewriting"
            f" middlebox; without it: {listening.reason}"
        )
    return notes, advice


def skipped(reason: str) -> Finding:
    return Finding(probe=PROBE, verdict=Verdict.SKIP, summary=f"path not traced: {reason}")
