"""Framing plus dialect in one object: the transport feeds bytes, gets ``StreamEvent``s."""

from __future__ import annotations

from typing import cast

from promptpath.core.timeline import InvalidUTF8, StreamEvent
from promptpath.dialects.plugins import decoder_for
from promptpath.dialects.registry import Provider
from promptpath.streams.dialect_base import Frame, MalformedEvent
from promptpath.streams.eventstream import EventStreamDecoder, EventStreamError
from promptpath.streams.framing import MAX_LINE_BYTES, FrameTooLarge
from promptpath.streams.ndjson import NDJSONDecoder
from promptpath.streams.sse import SSEDecoder
from promptpath.streams.wsmessage import MessageFramer

__all__ = ["StreamDecoder"]


class StreamDecoder:
    """``feed(bytes, t_ns, read_index) -> [StreamEvent]`` for one provider's stream.

    Events are stamped with the ``t_ns`` and ``read_index`` of the read that completed
    them.  A ``MalformedEvent`` is re-raised for the caller to record; the events this
    feed decoded before the bad one are on the exception as ``events``.  A line longer
    than ``max_line`` bytes is a ``MalformedEvent`` too (the decoder is then closed).
    """

    __slots__ = (
        "_dialect",
        "_ended",
        "_framer",
        "_last_read_index",
        "_terminal",
        "_truncated_tail",
        "invalid_utf8",
        "messages",
        "provider",
    )

    def __init__(
        self, provider: Provider, *, max_line: int = MAX_LINE_BYTES, messages: bool = False
    ) -> None:
        self.provider = provider
        self._dialect = decoder_for(provider)
        #: ``messages``: each feed is one whole WebSocket message (the dialect's framing
        #: over HTTP does not apply).
        self.messages = messages or self._dialect.framing == "websocket"
        self._framer: SSEDecoder | NDJSONDecoder | MessageFramer | EventStreamDecoder
        if self.messages:
            self._framer = MessageFramer(max_line=max_line)
        elif self._dialect.framing == "sse":
            self._framer = SSEDecoder(max_line=max_line, raw_json=self._dialect.raw_json)
        elif self._dialect.framing == "eventstream":
            self._framer = EventStreamDecoder()  # binary: its own bounds (MAX_MESSAGE_BYTES)
        else:
            self._framer = NDJSONDecoder(max_line=max_line)
        self._last_read_index = -1
        self._ended = False
        self._terminal = False
        self._truncated_tail = False
        #: Invalid UTF-8 in the frames decoded so far (events and comments alike).
        self.invalid_utf8 = InvalidUTF8()

    @property
    def framing(self) -> str:
        return "websocket" if self.messages else self._dialect.framing

    @property
    def pending(self) -> bool:
        """Bytes are buffered that make no complete event (a partial event at EOF)."""
        return self._framer.pending or self._truncated_tail

    @property
    def bytes_seen(self) -> int:
        return self._framer.bytes_seen

    @property
    def ended(self) -> bool:
        """The dialect's terminal marker ([DONE], message_stop, ...) has been decoded."""
        return self._ended

    @property
    def terminal(self) -> bool:
        """The stream has said its last word: the end marker or an error event.

        Nothing a server sends after that changes the outcome, so a transport can stop
        reading after a short grace instead of waiting for the body to end.
        """
        return self._terminal

    def feed(self, data: bytes, t_ns: int, read_index: int) -> list[StreamEvent]:
        """Decode ``data`` carried by read ``read_index`` that returned at ``t_ns``."""
        if data:  # an empty read carries no byte of any event
            self._last_read_index = read_index
        try:
            frames: list[Frame] = list(self._framer.feed(data, t_ns))
        except FrameTooLarge as exc:
            # The frames completed before the oversized line are real events.
            earlier = self._decode(cast(list[Frame], exc.frames), read_index)
            error = MalformedEvent(exc.head, str(exc))
            error.events = earlier
            raise error from exc
        except EventStreamError as exc:
            # The messages framed before the broken one are real events too.
            exc.events = self._decode(cast(list[Frame], exc.frames), read_index)
            raise
        return self._decode(frames, read_index)

    def close(self, t_ns: int) -> list[StreamEvent]:
        """End of body: an unterminated SSE event is dropped (``pending`` stays True).

        Only NDJSON can complete an event here, a last line without LF (Ollama).  It keeps
        the stamp and read index of the read that carried its last byte.  If that line is
        not valid JSON the body was cut mid-line: that is a partial event (``pending``),
        not a malformed one, so no ``MalformedEvent`` is raised for it.
        """
        frames: list[Frame] = list(self._framer.close(t_ns))
        try:
            return self._decode(frames, self._last_read_index)
        except MalformedEvent as exc:
            self._truncated_tail = True
            return exc.events

    def _decode(self, frames: list[Frame], read_index: int) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for frame in frames:
            if frame.invalid_utf8:
                seen = self.invalid_utf8
                self.invalid_utf8 = InvalidUTF8(
                    seen.events + 1, seen.replacements + frame.invalid_utf8
                )
            try:
                decoded = self._dialect.decode(frame, read_index=read_index)
            except MalformedEvent as exc:
                exc.events = events
                raise
            for event in decoded:  # per event: a later frame of this feed may raise
                if event.kind == "end":
                    self._ended = self._terminal = True
                elif event.kind == "error":
                    self._terminal = True
            events.extend(decoded)
        return events
