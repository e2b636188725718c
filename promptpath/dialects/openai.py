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
from dataclasses import replace

from promptpath.core.timeline import ContentType, StreamEvent
from promptpath.dialects.anthropic import AnthropicDecoder
from promptpath.dialects.bedrock import BedrockConverseDecoder, BedrockInvokeDecoder
from promptpath.dialects.cohere import CohereDecoder
from promptpath.dialects.gemini import GeminiDecoder
from promptpath.dialects.realtime import RealtimeDecoder
from promptpath.dialects.registry import Provider
from promptpath.streams.dialect_base import (
    DialectDecoder,
    Frame,
    Framing,
    JSONObject,
    MalformedEvent,
    _Dialect,
    _error_text,
    _list,
    _load,
    _Maker,
    _obj,
    _str,
    _usage,
)

__all__ = [
    "AnthropicDecoder",
    "BedrockConverseDecoder",
    "BedrockInvokeDecoder",
    "CohereDecoder",
    "DialectDecoder",
    "Frame",
    "Framing",
    "GeminiDecoder",
    "MalformedEvent",
    "OllamaDecoder",
    "OpenAIChatDecoder",
    "RealtimeDecoder",
    "ResponsesDecoder",
    "decoder_for",
]


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
            return [mk("meta", _filter_name(obj) or name, text=text, usage=usage)]
        if usage is not None:
            events[0] = replace(events[0], usage=usage)
        return events


def _filter_name(obj: JSONObject) -> str | None:
    """Azure's filter bookkeeping: the first chunk (``choices: []`` with
    ``prompt_filter_results``) and chunks whose choices carry only
    ``content_filter_results`` (``content_filter_offsets``): named so they can be counted."""
    if obj.get("prompt_filter_results") is not None and not _list(obj.get("choices")):
        return "prompt_filter_results"
    choices = [_obj(c) for c in _list(obj.get("choices"))]
    if choices and all(
        ("content_filter_results" in c or "content_filter_offsets" in c)
        and not _obj(c.get("delta"))  # the role chunk carries an empty verdict too
        and not _str(c.get("finish_reason"))
        for c in choices
    ):
        return "content_filter_results"
    return None


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


_DECODERS: dict[str, type[DialectDecoder]] = {
    "openai": OpenAIChatDecoder,
    "azure": OpenAIChatDecoder,
    "responses": ResponsesDecoder,
    "anthropic": AnthropicDecoder,
    "ollama": OllamaDecoder,
    "gemini": GeminiDecoder,
    "vertex": GeminiDecoder,
    "realtime": RealtimeDecoder,
    "bedrock": BedrockConverseDecoder,
    "bedrock-invoke": BedrockInvokeDecoder,
    "cohere": CohereDecoder,
}


def decoder_for(provider: Provider) -> DialectDecoder:
    """A fresh dialect decoder for ``provider``."""
    try:
        return _DECODERS[provider]()
    except KeyError:
        raise ValueError(f"no stream dialect for provider {provider!r}") from None
