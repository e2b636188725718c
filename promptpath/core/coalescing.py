"""Coalescing: which content events the path delivered together, and which our own read
loop merely picked up together. Pure: no clock, no I/O.

Two events in one socket read say only that both were in the kernel's buffer when we
read. That happens on a clean path whenever our loop is a moment late (at 1,000 tokens/s
on loopback ~15% of events share a read with the one before; a capture shows each in its
own TCP segment, tens of µs apart). Only events the path held and delivered together
count against the path:

- with server send stamps (``promptpath serve``): the events in the read were sent
  ``COALESCE_SLACK_NS`` or more apart, so the first of them waited at least that long;
  our own wait for a CPU since the read before is taken off the spread (and off the quiet
  below): a merge it explains is the read loop's;
- without them: the read came ``COALESCE_SLACK_NS`` or more after the previous read, so
  it cannot be back-to-back segments that our loop caught in one go, and later than the
  stream's pace allows for the events it brings (a read on time with two events did not
  hold the first: the origin wrote the second right behind it).

The slack is a hold no reader sees in a stream and more than our loop lags on a busy
machine (the longest read-loop batch measured at 1,000 tokens/s on a loaded 2-core box:
the events in it sent 3.4 ms apart, 5.3 ms after the previous read).

Past the timeline's cap of kept reads (core.timeline.MAX_KEPT_READS) events still carry
their read's ordinal, so "in the same read" stays exact; judged by arrival, a read not
kept has no stamp, and its events count as our read loop's (``unjudged`` says how many).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from promptpath.core.timeline import StreamEvent, Timeline, content_events

COALESCE_SLACK_NS = 20_000_000

JudgedBy = Literal["send_times", "arrival"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Coalescing:
    """Content events that arrived in the same socket read as the previous one, split."""

    path: int  # delivered together by the path (a hop or the origin held them)
    read_loop: int  # sent close together or caught together by our read loop
    judged_by: JudgedBy
    #: per content event, in arrival order: True when it counts in ``path``
    path_flags: tuple[bool, ...] = ()
    #: of ``read_loop``, events judged by arrival whose read was counted, not kept
    #: (Timeline.reads_not_kept): no stamp to judge by, so never held against the path
    unjudged: int = 0


def _by_read(content: list[StreamEvent]) -> dict[int, list[StreamEvent]]:
    reads: dict[int, list[StreamEvent]] = {}
    for e in content:
        if e.read_index >= 0:
            reads.setdefault(e.read_index, []).append(e)
    return reads


def _path_read(
    timeline: Timeline, index: int, events: list[StreamEvent], by: JudgedBy, pace_ns: float
) -> bool:
    """The path, not our read loop, put these events (two or more) into one read.

    Our own wait for a CPU since the read before (``Read.waited_ns``) is taken off first:
    while another process had the core, the packets merged in our receive queue and share
    the last one's stamp (net/schedwait.py), which is no hop's doing."""
    read = timeline.read_at(index)
    waited = 0 if read is None else read.waited_ns
    if by == "send_times":
        sent = [e.server_sent_unix_ns for e in events if e.server_sent_unix_ns is not None]
        return max(sent) - min(sent) - waited >= COALESCE_SLACK_NS
    if not 0 <= index < len(timeline.reads):
        return False
    # The first read's quiet runs from the request: the headers came with it.
    before = timeline.reads[index - 1].t_ns if index else timeline.milestones.get("request_sent")
    if before is None:
        return False
    quiet = timeline.reads[index].t_ns - before - waited
    # A read that came on the stream's pace did not hold its first event back: the ones
    # behind it were written right after it. Held events make the read late by about the
    # pace times the events it brings; half way between the two is the line.
    return quiet >= COALESCE_SLACK_NS and quiet >= (len(events) + 1) / 2 * pace_ns


def coalescing(timeline: Timeline, *, send_times: bool = True) -> Coalescing:
    """``send_times=False`` judges from arrival alone, as for any third-party endpoint,
    even when the events carry the reference endpoint's stamps."""
    content = content_events(timeline.events)
    stamped = (
        send_times and bool(content) and all(e.server_sent_unix_ns is not None for e in content)
    )
    by: JudgedBy = "send_times" if stamped else "arrival"
    span_ns = content[-1].t_ns - content[0].t_ns if content else 0
    pace_ns = span_ns / (len(content) - 1) if len(content) >= 2 else 0.0
    path_reads = {
        index
        for index, events in _by_read(content).items()
        if len(events) >= 2 and _path_read(timeline, index, events, by, pace_ns)
    }
    flags: list[bool] = []
    path = read_loop = unjudged = 0
    kept = len(timeline.reads) if by == "arrival" else None
    for i, e in enumerate(content):
        together = i > 0 and e.read_index >= 0 and e.read_index == content[i - 1].read_index
        on_path = together and e.read_index in path_reads
        path += on_path
        read_loop += together and not on_path
        unjudged += together and kept is not None and e.read_index >= kept
        flags.append(on_path)
    return Coalescing(
        path=path, read_loop=read_loop, judged_by=by, path_flags=tuple(flags), unjudged=unjudged
    )
