"""What every stream dialect shares: defensive JSON access, event building, the base class.

The decoders themselves live in their dialects' plug-ins (``dialects/<name>.py``); each
builds on this module, so none imports another's internals.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Literal, Protocol

from promptpath.core.errors import StreamError
from promptpath.core.timeline import (
    MAX_TOKEN_COUNT,
    ContentType,
    EventKind,
    ServerControls,
    StreamEvent,
    Usage,
)
from promptpath.streams.eventstream import EventStreamMessage
from promptpath.streams.ndjson import NDJSONLine
from promptpath.streams.sse import SSEMessage

__all__ = ["DialectDecoder", "Frame", "Framing", "JSONObject", "MalformedEvent"]

#: ``websocket``: one whole message per frame (a dialect that speaks nothing else);
#: ``eventstream``: AWS's binary event-stream messages (Bedrock).
Framing = Literal["sse", "ndjson", "websocket", "eventstream"]
Frame = SSEMessage | NDJSONLine | EventStreamMessage
JSONObject = dict[str, object]

_EXCERPT = 80
_COMMENT_SEQ = re.compile(r"(?:^|\s)seq=(\d+)")
_COMMENT_SENT = re.compile(r"(?:^|\s)sent_unix_ns=(\d+)")


class MalformedEvent(StreamError):
    """A stream event whose data is not a JSON object (the stream is not what it claims).

    The message quotes at most ``_EXCERPT`` characters of the data: its start, or a
    window around ``pos`` (where the parser gave up) when that lies further in.
    """

    def __init__(self, data: str, reason: str, *, pos: int | None = None) -> None:
        start = 0 if pos is None else max(0, min(pos - _EXCERPT // 2, len(data) - _EXCERPT))
        excerpt = data[start : start + _EXCERPT]
        before = "…" if start > 0 else ""
        after = "…" if start + _EXCERPT < len(data) else ""
        super().__init__(
            f"malformed stream event ({reason}): {before}{excerpt!r}{after}",
            stage="stream",
            kind="malformed_event",
            excerpt=excerpt,
            reason=reason,
            position=pos,
        )
        #: Events decoded before this one in the same feed (set by ``StreamDecoder``).
        self.events: list[StreamEvent] = []


class DialectDecoder(Protocol):
    """Maps one framed message to ``StreamEvent``s for one provider's API."""

    @property
    def framing(self) -> Framing: ...

    @property
    def raw_json(self) -> bool:
        """SSE only: a JSON object outside data: lines is a message too (streams/sse.py)."""
        ...

    def decode(self, frame: Frame, *, read_index: int = -1) -> list[StreamEvent]: ...


# -- defensive JSON access -------------------------------------------------------------
def _load(data: str) -> JSONObject:
    try:
        value = json.loads(data)
    except json.JSONDecodeError as exc:
        raise MalformedEvent(data, f"not JSON: {_where(exc)}", pos=exc.pos) from exc
    except RecursionError as exc:
        raise MalformedEvent(data, "JSON nested too deeply to parse") from exc
    except ValueError as exc:  # not a JSONDecodeError: an integer past 4,300 digits
        raise MalformedEvent(data, "a JSON integer too long to read") from exc
    if not isinstance(value, dict):
        raise MalformedEvent(data, f"JSON {type(value).__name__}, not an object")
    return value


def _where(exc: json.JSONDecodeError) -> str:
    """``Unterminated string starting at column 7``: the parser's complaint and position.

    ``exc.msg`` alone drops the position (some messages even end in a dangling "at").
    """
    msg = exc.msg.removesuffix(" at")
    if exc.lineno == 1:  # the usual one-line data: a line number is noise
        return f"{msg} at column {exc.colno}"
    return f"{msg} at line {exc.lineno} column {exc.colno}"


def _obj(value: object) -> JSONObject:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _error_text(value: object) -> str:
    """``"overloaded_error: Overloaded"`` from the usual error shapes."""
    if isinstance(value, str):
        return value
    err = _obj(value)
    message = _str(err.get("message"))
    label = _str(err.get("type"))
    if not label or label == "error":
        label = _str(err.get("code"))
    if label and message:
        return f"{label}: {message}"
    return message or label or json.dumps(value, default=str)[:200]


def _token_count(value: object) -> int | Literal[False] | None:
    """A usage count as sent: the count, None when absent (not a number), or False for a
    number no request can have (negative, fractional, infinite, past MAX_TOKEN_COUNT).
    A float with no fraction counts (Cohere's SDK types its counts as floats)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if not value.is_integer():  # nan and the infinities too
            return False
        value = int(value)
    return value if 0 <= value <= MAX_TOKEN_COUNT else False


def _usage(
    input_tokens: object,
    output_tokens: object,
    reasoning: object = None,
    *,
    cached: object = None,
    cache_write: object = None,
    cached_apart: bool = False,
) -> Usage | None:
    """The counts of one usage object; the impossible ones named as untrusted, not kept.
    ``cached``: the prefix cache's input tokens (read); ``cache_write``: those written to it;
    ``cached_apart``: the API counts both outside ``input_tokens`` (Anthropic, Bedrock)
    rather than inside (OpenAI, Gemini)."""
    counts: dict[str, int] = {}
    untrusted: list[str] = []
    for name, value in (
        ("input_tokens", input_tokens),
        ("output_tokens", output_tokens),
        ("reasoning_tokens", reasoning),
        ("cached_input_tokens", cached),
        ("cache_write_input_tokens", cache_write),
    ):
        count = _token_count(value)
        if count is False:
            untrusted.append(name)
        elif count is not None:
            counts[name] = count
    usage = Usage(
        input_tokens=counts.get("input_tokens"),
        output_tokens=counts.get("output_tokens"),
        reasoning_tokens=counts.get("reasoning_tokens"),
        cached_input_tokens=counts.get("cached_input_tokens"),
        cache_write_input_tokens=counts.get("cache_write_input_tokens"),
        untrusted=tuple(untrusted),
    )
    if usage == Usage():
        return None
    return replace(usage, cached_apart=True) if cached_apart else usage


#: A model name longer than this is no model name: kept out of every report.
MODEL_MAX = 200


def _model_of(obj: JSONObject) -> str | None:
    """The model a stream event names: ``model`` (OpenAI chat, Ollama), ``modelVersion``
    (Gemini), ``message.model`` (Anthropic ``message_start``), ``response.model``
    (Responses). Azure's filter chunks carry ``"model": ""``: no name."""
    for value in (
        obj.get("model"),
        obj.get("modelVersion"),
        _obj(obj.get("message")).get("model"),
        _obj(obj.get("response")).get("model"),
    ):
        name = _str(value)
        if name and len(name) <= MODEL_MAX:
            return name
    return None


class _Maker:
    """Builds events for one frame: its stamp, read and reference-endpoint fields."""

    __slots__ = ("controls", "model", "read_index", "sent", "seq", "t_ns")

    def __init__(self, t_ns: int, read_index: int) -> None:
        self.t_ns = t_ns
        self.read_index = read_index
        self.seq: int | None = None
        self.sent: int | None = None
        self.controls: ServerControls | None = None
        self.model: str | None = None

    def stamp_from(self, obj: JSONObject) -> None:
        """Pick up the reference endpoint's ``"promptpath": {"seq", "sent_unix_ns"}``, and
        on its first event the controls it applied (``controls``, ``controls_from``)."""
        self.model = _model_of(obj)
        ours = _obj(obj.get("promptpath"))
        self.seq = _int(ours.get("seq"))
        self.sent = _int(ours.get("sent_unix_ns"))
        applied = ours.get("controls")
        if isinstance(applied, dict):
            sources = _obj(ours.get("controls_from"))
            request_id = ours.get("request_id")
            self.controls = ServerControls(
                applied=tuple(sorted((str(k), v) for k, v in applied.items())),
                sources=tuple(sorted((str(k), _str(v)) for k, v in sources.items())),
                request_id=request_id if isinstance(request_id, str) else None,
            )

    def __call__(
        self,
        kind: EventKind,
        name: str,
        *,
        content_type: ContentType | None = None,
        text: str = "",
        usage: Usage | None = None,
        error: str | None = None,
        server_ms: float | None = None,
    ) -> StreamEvent:
        return StreamEvent(
            t_ns=self.t_ns,
            kind=kind,
            name=name,
            content_type=content_type,
            text=text,
            usage=usage,
            error=error,
            server_sent_unix_ns=self.sent,
            seq=self.seq,
            read_index=self.read_index,
            controls=self.controls,
            server_ms=server_ms,
            model=self.model,
        )


def _comment(frame: SSEMessage, read_index: int) -> StreamEvent:
    seq = _COMMENT_SEQ.search(frame.data)
    sent = _COMMENT_SENT.search(frame.data)
    return StreamEvent(
        t_ns=frame.t_ns,
        kind="comment",
        name="comment",
        text=frame.data,
        seq=int(seq.group(1)) if seq else None,
        server_sent_unix_ns=int(sent.group(1)) if sent else None,
        read_index=read_index,
    )


class _Dialect:
    framing: Framing = "sse"
    raw_json: bool = False

    def decode(self, frame: Frame, *, read_index: int = -1) -> list[StreamEvent]:
        """Events for one framed message (an SSE comment becomes a ``comment`` event)."""
        if isinstance(frame, SSEMessage):
            if frame.comment:
                return [_comment(frame, read_index)]
            return self._decode(frame.event, frame.data, _Maker(frame.t_ns, read_index))
        if isinstance(frame, EventStreamMessage):
            raise MalformedEvent(frame.text, "an AWS event-stream message in a text dialect")
        return self._decode("", frame.text, _Maker(frame.t_ns, read_index))

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        raise NotImplementedError
