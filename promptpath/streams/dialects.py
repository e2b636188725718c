"""Framed messages into dialect terms: which event is a token, which is bookkeeping.

One decoder per provider turns an ``SSEMessage`` (or an ``NDJSONLine``) into zero or
more ``StreamEvent``.  The distinction that matters for timing is ``kind="content"``:
text, reasoning/thinking, or a tool-call delta the model produced.  Role-only chunks,
``message_start``, pings and finish reasons are ``meta`` and never count as a token.

Payload shapes are read defensively: a field of the wrong type is treated as absent,
because a diagnostics tool must describe a strange stream, not crash on it.  Only data
that is not a JSON object at all raises ``MalformedEvent``.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Literal, Protocol

from promptpath.core.errors import StreamError
from promptpath.core.timeline import ContentType, EventKind, ServerControls, StreamEvent, Usage
from promptpath.streams.ndjson import NDJSONLine
from promptpath.streams.sse import SSEMessage

#: The stream dialects we decode, named for the API that speaks them.
Provider = Literal["openai", "responses", "anthropic", "ollama"]

__all__ = [
    "AnthropicDecoder",
    "DialectDecoder",
    "Frame",
    "Framing",
    "MalformedEvent",
    "OllamaDecoder",
    "OpenAIChatDecoder",
    "ResponsesDecoder",
    "decoder_for",
]

Framing = Literal["sse", "ndjson"]
Frame = SSEMessage | NDJSONLine
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


def _usage(input_tokens: object, output_tokens: object, reasoning: object = None) -> Usage | None:
    usage = Usage(
        input_tokens=_int(input_tokens),
        output_tokens=_int(output_tokens),
        reasoning_tokens=_int(reasoning),
    )
    return None if usage == Usage() else usage


class _Maker:
    """Builds events for one frame: its stamp, read and reference-endpoint fields."""

    __slots__ = ("controls", "read_index", "sent", "seq", "t_ns")

    def __init__(self, t_ns: int, read_index: int) -> None:
        self.t_ns = t_ns
        self.read_index = read_index
        self.seq: int | None = None
        self.sent: int | None = None
        self.controls: ServerControls | None = None

    def stamp_from(self, obj: JSONObject) -> None:
        """Pick up the reference endpoint's ``"promptpath": {"seq", "sent_unix_ns"}``, and
        on its first event the controls it applied (``controls``, ``controls_from``)."""
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

    def decode(self, frame: Frame, *, read_index: int = -1) -> list[StreamEvent]:
        """Events for one framed message (an SSE comment becomes a ``comment`` event)."""
        if isinstance(frame, SSEMessage):
            if frame.comment:
                return [_comment(frame, read_index)]
            return self._decode(frame.event, frame.data, _Maker(frame.t_ns, read_index))
        return self._decode("", frame.text, _Maker(frame.t_ns, read_index))

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        raise NotImplementedError


# -- OpenAI chat completions -----------------------------------------------------------
class OpenAIChatDecoder(_Dialect):
    """``/v1/chat/completions`` (and compatible servers: vLLM, llama.cpp, OpenRouter…)."""

    framing: Framing = "sse"

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        if data.strip() == "[DONE]":
            return [mk("end", "[DONE]")]
        obj = _load(data)
        mk.stamp_from(obj)
        if obj.get("error") is not None or sse_event == "error":
            return [mk("error", "error", error=_error_text(obj.get("error", obj)))]
        name = _str(obj.get("object")) or "chat.completion.chunk"
        events: list[StreamEvent] = []
        finish: list[str] = []
        for choice in map(_obj, _list(obj.get("choices"))):
            delta = _obj(choice.get("delta"))
            reasoning = _str(delta.get("reasoning_content")) or _str(delta.get("reasoning"))
            if reasoning:
                events.append(mk("content", name, content_type="reasoning", text=reasoning))
            # "text" is the legacy /v1/completions shape, "refusal" is shown to the user.
            for key, source in (("content", delta), ("refusal", delta), ("text", choice)):
                text = _str(source.get(key))
                if text:
                    events.append(mk("content", name, content_type="text", text=text))
            calls = [_obj(c).get("function") for c in _list(delta.get("tool_calls"))]
            calls.append(delta.get("function_call"))  # the deprecated functions API
            for fn in map(_obj, calls):
                args = _str(fn.get("arguments"))
                if _str(fn.get("name")) or args:
                    events.append(mk("content", name, content_type="tool", text=args))
            reason = _str(choice.get("finish_reason"))
            if reason:
                finish.append(reason)
        u = _obj(obj.get("usage"))  # "usage": null on every chunk when include_usage is on
        usage = _usage(
            u.get("prompt_tokens"),
            u.get("completion_tokens"),
            _obj(u.get("completion_tokens_details")).get("reasoning_tokens"),
        )
        if not events:
            text = "finish_reason=" + ",".join(finish) if finish else ""
            return [mk("meta", name, text=text, usage=usage)]
        if usage is not None:
            events[0] = replace(events[0], usage=usage)
        return events


# -- OpenAI Responses API --------------------------------------------------------------
_RESPONSES_CONTENT: dict[str, ContentType] = {
    "response.output_text.delta": "text",
    "response.refusal.delta": "text",
    "response.reasoning_text.delta": "reasoning",
    "response.reasoning_summary_text.delta": "reasoning",
    "response.function_call_arguments.delta": "tool",
    "response.custom_tool_call_input.delta": "tool",
    "response.mcp_call_arguments.delta": "tool",
}
_RESPONSES_TOOL_ITEMS = frozenset({"function_call", "custom_tool_call", "mcp_call"})


class ResponsesDecoder(_Dialect):
    """``/v1/responses``: typed events, ``response.completed`` carries the usage."""

    framing: Framing = "sse"

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        obj = _load(data)
        mk.stamp_from(obj)
        typ = _str(obj.get("type")) or sse_event
        content_type = _RESPONSES_CONTENT.get(typ)
        if content_type is not None:
            delta = _str(obj.get("delta"))
            if delta:
                return [mk("content", typ, content_type=content_type, text=delta)]
            return [mk("meta", typ)]
        if typ == "response.output_item.added":
            # The call starts (it carries the tool name), like a tool_calls first chunk.
            if _str(_obj(obj.get("item")).get("type")) in _RESPONSES_TOOL_ITEMS:
                return [mk("content", typ, content_type="tool")]
            return [mk("meta", typ)]
        response = _obj(obj.get("response"))
        if typ in ("response.completed", "response.incomplete"):
            u = _obj(response.get("usage"))
            usage = _usage(
                u.get("input_tokens"),
                u.get("output_tokens"),
                _obj(u.get("output_tokens_details")).get("reasoning_tokens"),
            )
            reason = _str(_obj(response.get("incomplete_details")).get("reason"))
            return [mk("end", typ, usage=usage, text=f"reason={reason}" if reason else "")]
        if typ == "response.failed":
            return [mk("error", typ, error=_error_text(response.get("error") or "response failed"))]
        if typ == "error":
            return [mk("error", typ, error=_error_text(obj.get("error") or obj))]
        return [mk("meta", typ)]


# -- Anthropic messages ----------------------------------------------------------------
_ANTHROPIC_DELTAS: dict[str, tuple[str, ContentType]] = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "reasoning"),
    "input_json_delta": ("partial_json", "tool"),
}


class AnthropicDecoder(_Dialect):
    """``/v1/messages``: ``message_start`` … ``content_block_delta`` … ``message_stop``."""

    framing: Framing = "sse"

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        obj = _load(data)
        mk.stamp_from(obj)
        typ = _str(obj.get("type")) or sse_event
        if typ == "content_block_delta":
            delta = _obj(obj.get("delta"))
            key_kind = _ANTHROPIC_DELTAS.get(_str(delta.get("type")))
            if key_kind is not None:  # signature_delta, citations_delta: meta
                text = _str(delta.get(key_kind[0]))
                if text:
                    return [mk("content", typ, content_type=key_kind[1], text=text)]
            return [mk("meta", typ)]
        if typ == "content_block_start":
            block = _obj(obj.get("content_block"))
            btype = _str(block.get("type"))
            if btype.endswith("tool_use"):  # tool_use, server_tool_use, mcp_tool_use
                return [mk("content", typ, content_type="tool")]
            if btype == "text" and _str(block.get("text")):
                return [mk("content", typ, content_type="text", text=_str(block.get("text")))]
            if btype == "thinking" and _str(block.get("thinking")):
                text = _str(block.get("thinking"))
                return [mk("content", typ, content_type="reasoning", text=text)]
            return [mk("meta", typ)]
        if typ == "message_start":
            u = _obj(_obj(obj.get("message")).get("usage"))
            # output_tokens here is a placeholder (usually 1); message_delta has the count.
            return [mk("meta", typ, usage=_usage(u.get("input_tokens"), None))]
        if typ == "message_delta":
            u = _obj(obj.get("usage"))
            stop = _str(_obj(obj.get("delta")).get("stop_reason"))
            usage = _usage(u.get("input_tokens"), u.get("output_tokens"))
            return [mk("meta", typ, usage=usage, text=f"stop_reason={stop}" if stop else "")]
        if typ == "message_stop":
            return [mk("end", typ)]
        if typ == "error":
            return [mk("error", typ, error=_error_text(obj.get("error") or obj))]
        return [mk("meta", typ)]  # ping, content_block_stop, unknown future events


# -- Ollama ----------------------------------------------------------------------------
class OllamaDecoder(_Dialect):
    """``/api/chat`` (and ``/api/generate``) NDJSON; the ``done`` line has the counts."""

    framing: Framing = "ndjson"

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        obj = _load(data)
        mk.stamp_from(obj)
        if obj.get("error") is not None:
            return [mk("error", "error", error=_error_text(obj.get("error")))]
        message = _obj(obj.get("message"))
        name = "message" if "message" in obj else "response"
        events: list[StreamEvent] = []
        thinking = _str(message.get("thinking")) or _str(obj.get("thinking"))
        if thinking:
            events.append(mk("content", name, content_type="reasoning", text=thinking))
        text = _str(message.get("content")) or _str(obj.get("response"))
        if text:
            events.append(mk("content", name, content_type="text", text=text))
        for call in map(_obj, _list(message.get("tool_calls"))):
            fn = _obj(call.get("function"))
            args = fn.get("arguments")
            args_text = args if isinstance(args, str) else json.dumps(args, default=str)
            events.append(mk("content", name, content_type="tool", text=args_text))
        if obj.get("done") is True:
            reason = _str(obj.get("done_reason"))
            usage = _usage(obj.get("prompt_eval_count"), obj.get("eval_count"))
            events.append(
                mk("end", "done", usage=usage, text=f"done_reason={reason}" if reason else "")
            )
        return events or [mk("meta", name)]


_DECODERS: dict[str, type[_Dialect]] = {
    "openai": OpenAIChatDecoder,
    "responses": ResponsesDecoder,
    "anthropic": AnthropicDecoder,
    "ollama": OllamaDecoder,
}


def decoder_for(provider: Provider) -> DialectDecoder:
    """A fresh dialect decoder for ``provider``."""
    try:
        return _DECODERS[provider]()
    except KeyError:
        raise ValueError(f"no stream dialect for provider {provider!r}") from None
