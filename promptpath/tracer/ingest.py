"""From response to events, the same for every transport (HTTP/1.1, HTTP/2, HTTP/3).

Transports read and stamp; this module judges the status and headers, decodes the body
read by read into the Timeline, and decides how the stream ended. It never reads a clock
or a socket: stamps come in with the bytes.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from promptpath.core.errors import HTTPStatusError, StreamError, http_status_kind
from promptpath.core.media import DECODABLE, STREAM_TYPES, media_type
from promptpath.core.timeline import (
    NotKept,
    StreamEvent,
    Timeline,
    count_content,
    is_visible,
)
from promptpath.dialects.registry import Provider
from promptpath.dialects.sniff import provider_hint
from promptpath.dialects.stream import StreamDecoder

#: Bytes of an error or non-stream body we read to explain it (never more).
SNIFF_LIMIT = 64 * 1024

#: Most decoded bytes one step hands the decoder. A compressed read can inflate a
#: thousandfold (64 KiB of gzip to 20 MB of events): it is decoded in steps, and the
#: caller yields between them, so its deadline and its other streams get their turn.
#: 16 KiB of token events is ~350 events, ~20 ms (benchmarks/bench_ingest.py; 64 KiB
#: steps held the loop up to 180 ms at load 5).
DECODE_STEP = 16 * 1024
#: Events kept in Timeline.events; past the cap they are counted (Timeline.not_kept).
#: A real answer of max_tokens 100k fits; each kept event costs ~200 bytes.
MAX_KEPT_EVENTS = 100_000
#: Past the cap, usage events are still kept, up to this many more (and the first end
#: marker and error event always are).
MAX_NOTABLE_EXTRA = 64
#: Characters of event text kept over the whole stream (no report shows the text).
MAX_KEPT_TEXT = 1 << 20

STATUS_HINTS = {
    401: "check the API key ({env})",
    403: "the key is not allowed to use this model or endpoint",
    404: "check the URL path and --model",
    429: "rate limited",
    529: "the provider is overloaded",
}


#: Takes the run's credentials out of a text (core/redaction.py's Redactor.text).
Redact = Callable[[str], str]


def _as_is(text: str) -> str:
    return text


def snippet(text: str, limit: int = 120, redact: Redact = _as_is) -> str:
    """``text`` on one line, at most ``limit`` characters; redacted first, so a key the
    cut would shorten is taken out whole, not left as a prefix no search recognises."""
    flat = " ".join(redact(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def error_message(body: bytes, redact: Redact = _as_is) -> str:
    """The human part of an API error body: error.message, message, or a cleaned snippet."""
    text = body.decode("utf-8", "replace").strip()
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # a hostile body nests 64 KiB deep: still text
        return snippet(text, redact=redact)
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("type")
            if msg:
                return snippet(str(msg), redact=redact)
        elif isinstance(err, str):
            return snippet(err, redact=redact)
        if "message" in obj:
            return snippet(str(obj["message"]), redact=redact)
    return snippet(text, redact=redact)


def status_error(
    timeline: Timeline,
    body: bytes,
    *,
    key_env: str | None,
    key_sent: bool = True,
    redact: Redact = _as_is,
) -> HTTPStatusError:
    """A one-line error for a 3xx/4xx/5xx answer, with Retry-After and what to check;
    ``redact`` cleans the body's text before it is cut to a snippet."""
    status = timeline.status or 0
    retry_after = timeline.header("retry-after")
    hint = STATUS_HINTS.get(status, "")
    if status == 401 and not key_sent:
        where = f"set {key_env}" if key_env else "name its variable with --api-key-env"
        hint = f"no API key was sent: {where}, or pass -H 'Authorization: Bearer …'"
    elif status == 401:
        hint = hint.format(env=key_env or "the Authorization header")
    message = error_message(body, redact)
    # A body that only repeats the status line ("HTTP 529", the OpenAI dialect's default
    # for codes it has no text for) would print it twice.
    if message.strip().upper() in (f"HTTP {status}", str(status)):
        message = ""
    parts = [f"HTTP {status}", message or "(empty body)"]
    if not message and body.strip():
        parts.pop()
    if retry_after:
        parts.append(f"Retry-After: {retry_after}")
    location = timeline.header("location")
    if 300 <= status < 400:
        parts.append(
            f"redirect to {location or '(no Location)'}, not followed: keys go only to the"
            " target host; point promptpath at the final URL"
        )
    if hint:
        parts.append(hint)
    return HTTPStatusError(
        " — ".join(parts),
        stage="response",
        kind=http_status_kind(status),
        status=status,
        retry_after=retry_after,
    )


def content_type(timeline: Timeline) -> str:
    return media_type(timeline.header("content-type"))


def is_event_stream(timeline: Timeline) -> bool:
    return content_type(timeline) in STREAM_TYPES


def not_a_stream_error(
    timeline: Timeline, body: bytes, provider: Provider | None = None, redact: Redact = _as_is
) -> StreamError:
    ctype = content_type(timeline)
    what = ctype or "no content-type"
    hint = provider_hint(body, provider) if provider is not None else ""
    return StreamError(
        f"expected an event stream, got {what}:"
        f" {snippet(body.decode('utf-8', 'replace'), 80, redact)!r}{hint}",
        stage="response",
        kind="not_event_stream",
        content_type=ctype,
    )


def content_seen(timeline: Timeline) -> int:
    """Content events the stream carried: those kept, and those counted past the cap."""
    return count_content(timeline.events) + timeline.not_kept.content


def with_hint(err: StreamError, hint: str) -> StreamError:
    """``err`` with ``hint`` appended to its message (the JSON message and str() alike)."""
    if hint:
        err.message += hint
        err.args = (err.message,)
    return err


def note(timeline: Timeline, new: list[StreamEvent]) -> None:
    """Milestones from freshly decoded events (first event, first token, last token, end)."""
    for ev in new:
        timeline.mark("first_event", ev.t_ns)
        if ev.kind == "content":
            timeline.mark("ttft", ev.t_ns)
            if is_visible(ev):
                timeline.mark("first_output", ev.t_ns)
            timeline.milestones["last_token"] = ev.t_ns
        elif ev.kind == "end":
            timeline.mark("end", ev.t_ns)
            # A terminal marker after an in-band error does not undo it: openai-python's
            # Stream raises APIError on the error chunk, before any [DONE] behind it.
            if timeline.stream_end != "error":
                timeline.stream_end = "marker"
        elif ev.kind == "error" and timeline.stream_end is None:
            timeline.mark("end", ev.t_ns)
            timeline.stream_end = "error"


class BodyIngest:
    """Feeds stamped body bytes to the decoder and the Timeline; judges the ending."""

    def __init__(
        self,
        timeline: Timeline,
        provider: Provider,
        redact: Redact = _as_is,
        *,
        messages: bool = False,
    ) -> None:
        self.timeline = timeline
        # A transport's reason may quote what the peer sent (a bad chunk line, a header):
        # redacted before it is cut to a snippet.
        self.redact = redact
        #: Each piece fed is one whole WebSocket message (decoded in one step: a message
        #: is bounded by the transport, and cutting it would cut its JSON).
        self.messages = messages
        self.decoder = StreamDecoder(provider, messages=messages)
        self.provider = provider
        # The first bytes, kept to name the dialect they parse as when this one fails.
        self._head = bytearray()
        self._inflate: Any = None
        # The chunk being decoded step by step (see ``backlog``), and its read's stamp.
        self._pending = b""
        self._more_output = False
        # Bytes a read carried past the end of a gzip member (see ``_inflate_step``).
        self._after_member = b""
        self._trailing = False
        self._stamp = (0, -1)
        self._text_left = MAX_KEPT_TEXT
        self._kinds_kept: set[str] = set()
        #: Content events decoded so far, kept or not.
        self.tokens = 0
        encoding = (timeline.header("content-encoding") or "identity").strip().lower()
        if encoding != "identity":
            # Compressed because the client shape accepts it, or by a hop that ignores
            # Accept-Encoding: decode either way, and say so.
            timeline.compressed = encoding
            if encoding in DECODABLE:
                self._inflate = zlib.decompressobj(wbits=47 if encoding != "deflate" else 15)
            else:
                raise StreamError(
                    f"the event stream is compressed with {encoding!r}, which promptpath cannot"
                    " decode and did not offer (a hop compresses regardless of Accept-Encoding)",
                    stage="stream",
                    kind="unsupported_encoding",
                )

    def feed(self, data: bytes, t_ns: int, read_index: int) -> None:
        """One body chunk as the transport handed it over, stamped with its socket read.

        Decodes its first step only: while ``backlog`` is true the caller calls ``resume``
        (yielding between steps, so that its deadline holds inside one read)."""
        self.timeline.add_chunk(t_ns, len(data), read_index)
        self._pending = data
        self._more_output = False
        self._stamp = (t_ns, read_index)
        self.resume()

    @property
    def backlog(self) -> bool:
        """Bytes of the last chunk are still to be decoded (call ``resume``)."""
        return bool(self._pending) or self._more_output

    def resume(self) -> None:
        """Decode the next step of the last chunk: at most DECODE_STEP bytes of stream,
        however much a compressed read inflates to."""
        tl = self.timeline
        if self._inflate is not None:
            data = self._inflate_step()
        elif self.messages:
            data, self._pending = self._pending, b""
        else:
            data, self._pending = self._pending[:DECODE_STEP], self._pending[DECODE_STEP:]
        tl.decoding = self.backlog
        self._decode(data, *self._stamp)

    def _inflate_step(self) -> bytes:
        """One step of the compressed stream. A gzip stream is a series of members (RFC
        1952 §2.2; a hop may flush one per event): after one ends, bytes that begin with
        the magic are the next member, anything else is left unread (as is whatever
        follows a deflate stream's end)."""
        tl = self.timeline
        inflate = self._inflate
        if inflate.eof:
            rest, self._after_member, self._pending = self._after_member + self._pending, b"", b""
            self._more_output = False
            if self._trailing or tl.compressed not in ("gzip", "x-gzip"):
                return b""
            if len(rest) < 2:  # one byte: the next read says what it begins
                self._after_member = rest
                return b""
            if rest[:2] != b"\x1f\x8b":
                self._trailing = True  # the stream ended here: nothing after is read
                return b""
            inflate = self._inflate = zlib.decompressobj(wbits=31)
            self._pending = rest
        try:
            data: bytes = inflate.decompress(self._pending, DECODE_STEP)
        except zlib.error as exc:
            tl.stream_end = "error"
            self._pending, self._more_output = b"", False
            raise StreamError(
                f"the {tl.compressed} event stream does not decompress: {exc}",
                stage="stream",
                kind="bad_encoding",
            ) from exc
        if inflate.eof:
            # What the read carried past the member's end: another member, perhaps.
            self._after_member, self._pending = inflate.unused_data, b""
            self._more_output = bool(self._after_member)
        else:
            self._pending = inflate.unconsumed_tail
            # A full step may leave output inside zlib with no input left to push it.
            self._more_output = len(data) == DECODE_STEP
        return data

    def _decode(self, data: bytes, t_ns: int, read_index: int) -> None:
        tl = self.timeline
        tl.decoded_bytes += len(data)
        if len(self._head) < SNIFF_LIMIT:
            self._head += data[: SNIFF_LIMIT - len(self._head)]
        try:
            new = self.decoder.feed(data, t_ns, read_index)
        except StreamError as err:
            self._pending, self._more_output = b"", False
            tl.decoding = False
            if err.kind == "malformed_event":
                with_hint(err, self.hint())
            # Events decoded before the bad one in the same read still happened.
            earlier = getattr(err, "events", None)
            if earlier:
                note(tl, earlier)
                self._keep(earlier)
            tl.stream_end = "error"
            raise
        finally:
            tl.invalid_utf8 = self.decoder.invalid_utf8
        if new:
            note(tl, new)
            self._keep(new)

    def _keep(self, new: list[StreamEvent]) -> None:
        """Append ``new`` to the timeline within its bounds; count what does not fit.

        The first MAX_KEPT_EVENTS events are kept (their text within MAX_KEPT_TEXT
        characters in all); past the cap only the events that decide the outcome are:
        the first end marker and error event, and usage events up to MAX_NOTABLE_EXTRA
        more. The rest are counted in ``timeline.not_kept``."""
        tl = self.timeline
        events = tl.events
        dropped = content_dropped = text_dropped = 0
        for ev in new:
            if ev.kind == "content":
                self.tokens += 1
            # The first end marker and the first error event are kept whatever came
            # before them (the report quotes the error); usage, while there is room.
            first = ev.kind in ("end", "error") and ev.kind not in self._kinds_kept
            usage = ev.usage is not None and len(events) < MAX_KEPT_EVENTS + MAX_NOTABLE_EXTRA
            if len(events) >= MAX_KEPT_EVENTS and not (first or usage):
                dropped += 1
                content_dropped += ev.kind == "content"
                text_dropped += len(ev.text)
                continue
            if len(ev.text) > self._text_left:
                text_dropped += len(ev.text) - self._text_left
                ev = replace(ev, text=ev.text[: self._text_left])
            self._text_left -= len(ev.text)
            self._kinds_kept.add(ev.kind)
            events.append(ev)
        if dropped or text_dropped:
            was = tl.not_kept
            tl.not_kept = NotKept(
                was.events + dropped, was.content + content_dropped, was.text_chars + text_dropped
            )

    def hint(self) -> str:
        """Which ``--provider`` to try, when the bytes so far parse as another dialect."""
        return provider_hint(bytes(self._head), self.provider)

    def _truncated_hint(self) -> str:
        # Only a stream with no token at all may be in the wrong dialect: tokens mean
        # this one parsed it.
        return "" if content_seen(self.timeline) else self.hint()

    @property
    def terminal(self) -> bool:
        """The stream said its last word (terminal marker or error event)."""
        return self.decoder.terminal or self.timeline.stream_end in ("marker", "error")

    def ended_abruptly(self, reason: str, closed_ns: int) -> StreamError | None:
        """The transport failed mid-body. After the terminal marker that is a note about
        the connection, not a broken stream; before it, the stream was truncated."""
        if self.terminal:
            self.timeline.close_after_end = snippet(reason, 120, self.redact) or "abrupt"
            self.finish(closed_ns)
            return None
        return self.broken(reason, closed_ns)

    def broken(self, reason: str, closed_ns: int) -> StreamError:
        """The transport failed mid-body (reset, EOF inside a chunk): a truncated stream."""
        tl = self.timeline
        tl.closed_ns = closed_ns
        tl.stream_end = "truncated"
        return with_hint(
            StreamError(
                f"stream truncated after {content_seen(tl)} tokens: the connection"
                f" ended without the terminal marker ({snippet(reason, 80, self.redact)})",
                stage="stream",
                kind="truncated",
            ),
            self._truncated_hint(),
        )

    def finish(self, closed_ns: int) -> None:
        """The body ended cleanly at the transport; raise if the stream itself did not."""
        tl = self.timeline
        tl.closed_ns = closed_ns
        tail = self.decoder.close(closed_ns)
        if tail:
            note(tl, tail)
            self._keep(tail)
        tl.invalid_utf8 = self.decoder.invalid_utf8
        if tl.stream_end == "error":
            err_event = next(e for e in tl.events if e.kind == "error")
            raise StreamError(
                f"the server sent an error event after {content_seen(tl)} tokens:"
                f" {err_event.error}",
                stage="stream",
                kind="error_event",
                server_error=err_event.error,
            )
        if tl.stream_end is None:
            tl.stream_end = "truncated"
            raise with_hint(
                StreamError(
                    f"stream truncated after {content_seen(tl)} tokens: the body ended"
                    " without the terminal marker",
                    stage="stream",
                    kind="truncated",
                ),
                self._truncated_hint(),
            )
