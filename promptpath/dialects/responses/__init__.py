"""OpenAI's Responses API (``POST /v1/responses``, and its WebSocket mode), one plug-in:
detection, keys, model, the request (and the WebSocket's messages), the stream's decoder
and the reference endpoint's emulation (``Responses``, over HTTP and WebSocket).

Typed SSE events, each naming itself in ``type``: ``response.created`` ...
``response.output_text.delta`` ... ``response.completed`` (or ``response.incomplete``), which
carries the usage. An error inside the stream is an ``error`` event or
``response.failed``. Over a ws:// or wss:// URL the same events arrive as WebSocket messages.
"""

from __future__ import annotations

from promptpath.core.timeline import ContentType, StreamEvent
from promptpath.dialects.openai import SPEC as OPENAI
from promptpath.dialects.spec import JSON, DialectSpec, DocRow
from promptpath.options import RunOptions
from promptpath.streams.dialect_base import (
    Framing,
    _Dialect,
    _error_text,
    _load,
    _Maker,
    _obj,
    _str,
    _usage,
)

__all__ = [
    "SPEC",
    "ResponsesDecoder",
]

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
                cache_read=_obj(u.get("input_tokens_details")).get("cached_tokens"),
            )
            reason = _str(_obj(response.get("incomplete_details")).get("reason"))
            return [mk("end", typ, usage=usage, text=f"reason={reason}" if reason else "")]
        if typ == "response.failed":
            return [mk("error", typ, error=_error_text(response.get("error") or "response failed"))]
        if typ == "error":
            return [mk("error", typ, error=_error_text(obj.get("error") or obj))]
        return [mk("meta", typ)]


# -- the request --------------------------------------------------------------------------
def body(options: RunOptions) -> JSON:
    return {
        "model": options.model,
        "input": options.prompt,
        "max_output_tokens": options.max_tokens,
        "stream": True,
    }


def ws_messages(options: RunOptions) -> list[JSON]:
    """The WebSocket mode's one message, as openai 3.57 sends it (observed on loopback):
    ``{"type": "response.create", ...}`` with the request's fields at the top level, no
    ``stream``."""
    return [
        {
            "type": "response.create",
            "model": options.model,
            "input": options.prompt,
            "max_output_tokens": options.max_tokens,
        }
    ]


SPEC = DialectSpec(
    name="responses",
    title="OpenAI Responses",
    path_suffixes=("/responses",),
    default_model="gpt-4o-mini",
    key_env=OPENAI.key_env,  # the OpenAI APIs share the key, the SDK, the telemetry name
    client=OPENAI.client,
    body=body,
    ws_messages=ws_messages,
    decoder=ResponsesDecoder,
    otel_provider=OPENAI.otel_provider,
    emulation="Responses",
    demo_path="/v1/responses",
    docs=(
        DocRow(
            detection="ends in `/responses`",
            auth="`Authorization: Bearer`",
            keys="`OPENAI_API_KEY`",
            end="`response.completed` / `response.incomplete`",
        ),
        DocRow(
            qualifier=" over WebSocket",
            detection="a `ws://` or `wss://` URL ending in `/responses`",
            auth="`Authorization: Bearer` on the upgrade",
            keys="`OPENAI_API_KEY`",
            end="the `response.completed` / `response.incomplete` message",
        ),
    ),
)
