"""Amazon Bedrock's two streaming APIs, framed as AWS event-stream messages, into ``StreamEvent``s.

``POST /model/{id}/converse-stream`` (the model-neutral Converse API) sends one message per
event, its name in the ``:event-type`` header and its JSON in the payload::

    messageStart {"role": "assistant"}
    contentBlockStart {"contentBlockIndex": 1, "start": {"toolUse": {...}}}   (tool calls)
    contentBlockDelta {"contentBlockIndex": 0, "delta": {"text": "Hel"}}
    contentBlockStop {"contentBlockIndex": 0}
    messageStop {"stopReason": "end_turn"}
    metadata {"usage": {"inputTokens", "outputTokens", ...}, "metrics": {"latencyMs": 412}}

``POST /model/{id}/invoke-with-response-stream`` carries the model's own streaming format:
each ``chunk`` event's payload is ``{"bytes": BASE64}``, and the bytes are one native event
(Anthropic's Messages events for Claude, mapped here as ``streams/dialects.py`` maps them).
Bedrock adds ``amazon-bedrock-invocationMetrics`` (token counts, ``invocationLatency``) to
the last chunk, whatever the model.

What surprises people:

- The end is two events: ``messageStop`` and then ``metadata`` (usage, the server's own
  ``latencyMs``). A stream without both was cut: truncated, whatever the transport said.
  ``invoke-with-response-stream`` ends with the native end (Anthropic's ``message_stop``),
  or, for another model's payload, the chunk that carries the invocation metrics.
- Errors inside the 200 are messages with ``:message-type`` ``exception`` and the name in
  ``:exception-type`` (``throttlingException``, ``modelStreamErrorException``,
  ``validationException``, ``internalServerException``, ``serviceUnavailableException``,
  ``modelTimeoutException``), their payload ``{"message": ...}``; boto3 raises
  ``EventStreamError`` on them. ``:message-type`` ``error`` (``:error-code``,
  ``:error-message`` headers) is the framing layer's own error.
- Payloads carry a ``p`` field of random padding (against length side channels): ignored.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import replace

from promptpath.core.timeline import ContentType, EventKind, StreamEvent
from promptpath.dialects.anthropic import AnthropicDecoder
from promptpath.streams.dialect_base import (
    Frame,
    Framing,
    JSONObject,
    MalformedEvent,
    _int,
    _load,
    _Maker,
    _obj,
    _str,
    _usage,
)
from promptpath.streams.eventstream import EventStreamMessage

__all__ = ["BedrockConverseDecoder", "BedrockInvokeDecoder"]

#: Where an invoke stream's last chunk puts Bedrock's own account of the invocation.
INVOCATION_METRICS = "amazon-bedrock-invocationMetrics"


def _message(frame: Frame) -> EventStreamMessage:
    if not isinstance(frame, EventStreamMessage):  # the decoder pairs framings: a bug
        raise TypeError(f"a Bedrock stream is framed as AWS event stream, not {type(frame)}")
    return frame


def _exception(msg: EventStreamMessage, mk: _Maker) -> list[StreamEvent] | None:
    """The in-band error a message is, if it is one."""
    kind = msg.message_type
    if kind == "exception":
        name = msg.string(":exception-type") or "exception"
        try:
            obj = _load(msg.text)
        except MalformedEvent:
            obj = {}
        mk.stamp_from(obj)
        text = _str(obj.get("message")) or _str(obj.get("Message")) or msg.text[:200]
        original = _int(obj.get("originalStatusCode"))
        if original is not None:  # modelStreamErrorException: the model's own status
            text += f" (model status {original})"
        return [mk("error", name, error=f"{name}: {text}" if text else name)]
    if kind == "error":
        code = msg.string(":error-code") or "error"
        text = msg.string(":error-message")
        return [mk("error", code, error=f"{code}: {text}" if text else code)]
    return None


class _Bedrock:
    framing: Framing = "eventstream"

    def decode(self, frame: Frame, *, read_index: int = -1) -> list[StreamEvent]:
        msg = _message(frame)
        mk = _Maker(msg.t_ns, read_index)
        failed = _exception(msg, mk)
        if failed is not None:
            return failed
        name = msg.string(":event-type")
        if msg.message_type != "event" or not name:
            return [mk("meta", name or msg.message_type or "message")]
        obj = _load(msg.text)
        mk.stamp_from(obj)
        return self._event(name, obj, mk)

    def _event(self, name: str, obj: JSONObject, mk: _Maker) -> list[StreamEvent]:
        raise NotImplementedError


_DELTAS: tuple[tuple[str, str, ContentType], ...] = (
    ("text", "", "text"),
    ("reasoningContent", "text", "reasoning"),
    ("toolUse", "input", "tool"),
)


class BedrockConverseDecoder(_Bedrock):
    """``/model/{id}/converse-stream``: messageStop then metadata end the stream."""

    def __init__(self) -> None:
        self._stopped = False

    def _event(self, name: str, obj: JSONObject, mk: _Maker) -> list[StreamEvent]:
        if name == "contentBlockDelta":
            delta = _obj(obj.get("delta"))
            for key, inner, content_type in _DELTAS:
                value = delta.get(key)
                text = _str(_obj(value).get(inner)) if inner else _str(value)
                if text or (key == "toolUse" and isinstance(value, dict)):
                    return [mk("content", name, content_type=content_type, text=text)]
            return [mk("meta", name)]  # a reasoning signature, a citation
        if name == "contentBlockStart":
            if isinstance(_obj(obj.get("start")).get("toolUse"), dict):
                return [mk("content", name, content_type="tool")]  # the call starts
            return [mk("meta", name)]
        if name == "messageStop":
            self._stopped = True
            reason = _str(obj.get("stopReason"))
            return [mk("meta", name, text=f"stopReason={reason}" if reason else "")]
        if name == "metadata":
            u = _obj(obj.get("usage"))
            usage = _usage(u.get("inputTokens"), u.get("outputTokens"))
            latency = _obj(obj.get("metrics")).get("latencyMs")
            server_ms = float(latency) if isinstance(latency, int | float) else None
            kind: EventKind = "end" if self._stopped else "meta"
            return [mk(kind, name, usage=usage, server_ms=server_ms)]
        return [mk("meta", name)]  # messageStart, contentBlockStop, future events


class BedrockInvokeDecoder(_Bedrock):
    """``/model/{id}/invoke-with-response-stream``: native events inside ``chunk``s."""

    def __init__(self) -> None:
        self._anthropic = AnthropicDecoder()

    def _event(self, name: str, obj: JSONObject, mk: _Maker) -> list[StreamEvent]:
        if name != "chunk":
            return [mk("meta", name)]
        raw = _str(obj.get("bytes"))
        try:
            inner = base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise MalformedEvent(raw, f"chunk bytes are not base64 of UTF-8 ({exc})") from exc
        native = _load(inner)
        metrics = _obj(native.get(INVOCATION_METRICS))
        if _str(native.get("type")):
            events = self._anthropic._decode("", inner, mk)
        else:  # another model's payload: no tokens read from it
            mk.stamp_from(native)
            events = [mk("meta", "chunk")]
        if not metrics:
            return events
        latency = metrics.get("invocationLatency")
        last = events[-1]
        usage = last.usage or _usage(
            metrics.get("inputTokenCount"), metrics.get("outputTokenCount")
        )
        events[-1] = replace(
            last,
            kind="end" if last.kind == "meta" else last.kind,
            usage=usage,
            server_ms=float(latency) if isinstance(latency, int | float) else None,
        )
        return events
