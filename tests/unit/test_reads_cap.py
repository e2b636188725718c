"""Timeline.reads and chunks stay bounded whatever arrives: the first MAX_KEPT_READS are
kept, the rest counted with their bytes, and every consumer of a read's ordinal copes
with one past the kept ones. Pure: synthetic reads on a small cap."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import jsonschema
import pytest

from promptpath.core import timeline as timeline_mod
from promptpath.core.analysis import compute, final_silence_ns, headline
from promptpath.core.coalescing import coalescing
from promptpath.core.errors import TraceTimeout
from promptpath.core.timeline import ErrorInfo, Read, StreamEvent, Timeline
from promptpath.net.transport import BodyPiece, Recorder
from promptpath.options import RunOptions, parse_target
from promptpath.report.json import result_json
from promptpath.result import TraceResult
from promptpath.tracer.load import _SharedBody

MS = 1_000_000
T0_UNIX = 1_800_000_000_000_000_000
SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())


@pytest.fixture
def cap3(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(timeline_mod, "MAX_KEPT_READS", 3)
    return 3


def test_reads_past_the_cap_are_counted_with_their_bytes_and_keep_their_ordinal(
    cap3: int,
) -> None:
    rec = Recorder(Timeline(t0_ns=0, t0_unix_ns=0))
    assert rec.read_index == -1
    indices = [rec.read(t * MS, 10 + t) for t in range(1, 8)]
    tl = rec.timeline
    assert indices == list(range(7)) and rec.read_index == 6
    assert tl.reads == [Read(MS, 11), Read(2 * MS, 12), Read(3 * MS, 13)]
    assert tl.read_count == 7 and tl.reads_not_kept.reads == 4
    assert tl.reads_not_kept.read_bytes == 14 + 15 + 16 + 17
    assert tl.last_read_ns == 7 * MS == rec.last_read_ns
    assert tl.read_at(2) == Read(3 * MS, 13)
    assert tl.read_at(6) == Read(7 * MS, 17)  # the last one is kept apart
    assert tl.read_at(4) is None and tl.read_at(-1) is None and tl.read_at(7) is None


def test_chunks_past_the_cap_are_counted_and_bytes_stay_the_whole_body(cap3: int) -> None:
    tl = Timeline(t0_ns=0, t0_unix_ns=0)
    for i in range(5):
        tl.add_chunk(i * MS, 100 + i, i)
    assert [c.read_index for c in tl.chunks] == [0, 1, 2]
    assert tl.reads_not_kept.chunks == 2 and tl.reads_not_kept.chunk_bytes == 103 + 104
    assert tl.body_bytes == sum(range(100, 105))


def _stream(reads: int, events_per_read: int, *, stamped: bool) -> Timeline:
    """``reads`` reads through the Recorder, each completing ``events_per_read`` content
    events sent 30 ms apart and held together (path coalescing), 500 ms apart."""
    rec = Recorder(Timeline(t0_ns=0, t0_unix_ns=T0_UNIX))
    tl = rec.timeline
    tl.mark("request_sent", 0)
    for r in range(reads):
        t = (r + 1) * 500 * MS
        index = rec.read(t, 300)
        for k in range(events_per_read):
            sent = T0_UNIX + t - (events_per_read - k) * 30 * MS
            tl.events.append(
                StreamEvent(
                    t_ns=t,
                    kind="content",
                    text="x",
                    server_sent_unix_ns=sent if stamped else None,
                    read_index=index,
                )
            )
    return tl


def test_coalescing_by_send_times_stays_exact_past_the_cap(cap3: int) -> None:
    together = coalescing(_stream(6, 2, stamped=True))
    assert together.path == 6 and together.read_loop == 0 and together.unjudged == 0


def test_coalescing_by_arrival_judges_the_kept_reads_and_counts_the_rest_unjudged(
    cap3: int,
) -> None:
    tl = _stream(6, 2, stamped=False)
    together = coalescing(tl)
    # Reads 0-2 were kept and judged (each 500 ms late: held); 3-5 have no stamp kept.
    assert together.judged_by == "arrival"
    assert together.path == 3 and together.read_loop == 3 and together.unjudged == 3
    tokens = compute(tl).tokens
    assert tokens.coalesced == 3 and tokens.coalesced_unjudged == 3


def test_the_final_silence_runs_from_the_last_read_not_the_last_one_kept(cap3: int) -> None:
    tl = _stream(6, 1, stamped=False)
    tl.milestones["ttfb"] = 400 * MS
    tl.error = ErrorInfo.from_error(
        TraceTimeout("timed out", stage="stream", kind="timeout", timeout_s=5.0), t_ns=5_000 * MS
    )
    assert final_silence_ns(tl) == (5_000 - 3_000) * MS


def test_a_trickle_past_the_cap_counts_the_bytes_not_kept(cap3: int) -> None:
    rec = Recorder(Timeline(t0_ns=0, t0_unix_ns=0))
    tl = rec.timeline
    tl.mark("request_sent", 0)
    tl.mark("ttfb", MS)
    for i in range(1, 101):  # 1 byte every 50 ms to the deadline
        rec.read(i * 50 * MS, 1)
    tl.error = ErrorInfo.from_error(
        TraceTimeout("timed out", stage="wait", kind="timeout", timeout_s=5.0), t_ns=5_010 * MS
    )
    assert tl.read_bytes_after(MS) == (100, True)  # the stage began before the cap
    assert tl.read_bytes_after(4_000 * MS) == (97, False)  # inside the reads not kept
    assert tl.read_bytes_after(6_000 * MS) == (0, True)
    line = headline(tl, compute(tl))
    assert "still trickling (100 bytes" in line, line


def test_the_json_counts_every_read_and_chunk_and_passes_the_schema(cap3: int) -> None:
    tl = _stream(5, 1, stamped=False)
    tl.status = 200
    for i, read in enumerate(list(tl.reads)):
        tl.add_chunk(read.t_ns, 300, i)
    tl.add_chunk(3_000 * MS, 300, 4)
    tl.add_chunk(3_000 * MS, 300, 4)
    options = RunOptions(
        target=parse_target("http://127.0.0.1:9/v1/chat/completions"), provider="openai", model="m"
    )
    data = result_json(TraceResult(options=options, timeline=tl), exit_code=0)
    jsonschema.validate(data, SCHEMA)
    stream = data["stream"]
    assert stream["socket_reads"] == 5 and stream["bytes"] == 5 * 300
    assert stream["not_kept"] == {
        "events": 0,
        "content": 0,
        "text_chars": 0,
        "reads": 2,
        "read_bytes": 600,
        "chunks": 2,
        "chunk_bytes": 600,
    }


class _Pieces:
    def __init__(self, pieces: list[BodyPiece]) -> None:
        self._it = iter(pieces)

    def __aiter__(self) -> _Pieces:
        return self

    async def __anext__(self) -> BodyPiece:
        try:
            return next(self._it)
        except StopIteration:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        pass


def test_load_mode_copies_reads_past_the_connections_cap_by_the_pieces_stamp(
    cap3: int,
) -> None:
    conn = Recorder(Timeline(t0_ns=0, t0_unix_ns=0))
    indices = [conn.read(t * MS, 1000) for t in range(1, 7)]
    stream = Timeline(t0_ns=0, t0_unix_ns=0)
    # This stream's bytes came in reads 1, 1 (two frames in one read), 4 and 5.
    pieces = [BodyPiece(data=b"ab", t_ns=t * MS + 1, read_index=indices[t - 1]) for t in (2, 2)]
    pieces += [BodyPiece(data=b"abc", t_ns=t * MS + 1, read_index=indices[t - 1]) for t in (5, 6)]

    async def run() -> list[int]:
        body: AsyncIterator[BodyPiece] = _SharedBody(_Pieces(pieces), conn.timeline, stream)
        return [piece.read_index async for piece in body]

    assert anyio.run(run) == [0, 0, 1, 2]
    assert stream.read_count == 3
    assert stream.reads[0] == Read(2 * MS, 1000)  # kept on the connection: copied
    # Read 4 was counted, not kept, on the connection: the piece's stamp and bytes.
    assert stream.reads[1] == Read(5 * MS + 1, 3)
    assert stream.reads[2] == Read(6 * MS, 1000)  # the connection's last read: kept apart
