"""OpenAI's Realtime API (WebSocket only), one plug-in: its server events as a text session
reads them, the messages the SDK sends, and the reference endpoint's session.

openai 3.57's types name the GA events: ``session.created`` first, the user's turn
acknowledged (``conversation.item.added`` / ``.done``), then per response
``response.created`` … ``response.output_text.delta`` … ``response.done``. The beta API
named the text delta ``response.text.delta`` and the transcript of spoken output
``response.audio_transcript.delta`` (GA: ``response.output_audio_transcript.delta``):
all of them are tokens here. ``response.done`` carries the usage and a status; a status
of ``failed`` (its ``status_details.error``) is an in-band error, as an ``error`` event
is. ``cancelled`` and ``incomplete`` end the response, with the reason kept.
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
    "RealtimeDecoder",
]

_TEXT_DELTAS = frozenset(
    {
        "response.output_text.delta",
        "response.text.delta",  # the beta API's name
        "response.output_audio_transcript.delta",
        "response.audio_transcript.delta",  # beta
    }
)
_TOOL_DELTAS = frozenset(
    {"response.function_call_arguments.delta", "response.mcp_call_arguments.delta"}
)


class RealtimeDecoder(_Dialect):
    """``/v1/realtime``: typed JSON messages; ``response.done`` ends a response."""

    framing: Framing = "websocket"

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        obj = _load(data)
        mk.stamp_from(obj)
        typ = _str(obj.get("type")) or "message"
        if typ in _TEXT_DELTAS or typ in _TOOL_DELTAS:
            delta = _str(obj.get("delta"))
            kind: ContentType = "tool" if typ in _TOOL_DELTAS else "text"
            if delta:
                return [mk("content", typ, content_type=kind, text=delta)]
            return [mk("meta", typ)]
        if typ == "response.done":
            response = _obj(obj.get("response"))
            u = _obj(response.get("usage"))
            usage = _usage(u.get("input_tokens"), u.get("output_tokens"))
            status = _str(response.get("status"))
            details = _obj(response.get("status_details"))
            if status == "failed":
                error = details.get("error") or details or "response failed"
                return [mk("error", typ, usage=usage, error=_error_text(error))]
            reason = _str(details.get("reason"))
            text = f"status={status}" + (f" reason={reason}" if reason else "") if status else ""
            return [mk("end", typ, usage=usage, text=text)]
        if typ == "error":
            return [mk("error", typ, error=_error_text(obj.get("error") or obj))]
        return [mk("meta", typ)]


# -- the request --------------------------------------------------------------------------
def ws_messages(options: RunOptions) -> list[JSON]:
    """The user's turn (``conversation.item.create``) and a text-only ``response.create``,
    as openai 3.57 sends them (observed on loopback)."""
    item: JSON = {
        "type": "conversation.item.create",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": options.prompt}],
        },
    }
    create: JSON = {
        "type": "response.create",
        "response": {"output_modalities": ["text"], "max_output_tokens": options.max_tokens},
    }
    return [item, create]


SPEC = DialectSpec(
    name="realtime",
    title="OpenAI Realtime",
    path_suffixes=("/realtime",),
    default_model="gpt-realtime",
    key_env=OPENAI.key_env,  # the OpenAI APIs share the key, the SDK, the telemetry name
    client=OPENAI.client,
    body=None,
    ws_messages=ws_messages,
    websocket_only=(
        "the Realtime API is WebSocket only: give a ws:// or wss:// URL"
        " (wss://api.openai.com/v1/realtime?model=M)"
    ),
    decoder=RealtimeDecoder,
    otel_provider=OPENAI.otel_provider,
    emulation="Realtime",
    docs=(
        DocRow(
            qualifier=" (WebSocket only)",
            detection="a `ws://` or `wss://` URL ending in `/realtime` (`?model=M`)",
            auth="`Authorization: Bearer` on the upgrade",
            keys="`OPENAI_API_KEY`",
            end="the `response.done` message (status `failed`: an in-band error)",
        ),
    ),
)
