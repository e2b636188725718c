"""Anthropic Messages (``POST /v1/messages``), one plug-in: detection, keys, model, the
request and client its SDK sends, the stream's decoder and the reference endpoint's
emulation. Bedrock's invoke-with-response-stream carries the same events
inside its chunks (bedrock_invoke.py).

The reference endpoint (``Messages``) writes named SSE events, ``ping``s, ``message_stop``
at the end. With the ``reasoning`` control the answer follows a ``thinking`` block, as
extended thinking streams it (the anthropic SDK's types: ``ThinkingBlock`` ``{type:
thinking, thinking, signature}``, ``ThinkingDelta`` ``thinking_delta``, and a
``SignatureDelta`` "delivered just before the block's content_block_stop"): block 0 is the
thinking, the text block comes next at index 1.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from promptpath.core.timeline import ContentType, StreamEvent
from promptpath.dialects.spec import JSON, DialectSpec, DocRow, httpx_client
from promptpath.options import RunOptions
from promptpath.server.dialect import Dialect, ErrorReply, Event, Finish, JSONObject, RequestInfo
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
    "ANTHROPIC_PYTHON",
    "ANTHROPIC_VERSION",
    "SPEC",
    "AnthropicDecoder",
    "Messages",
]


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


# -- the reference endpoint (promptpath serve) --------------------------------------------
_ANTHROPIC_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "The requested resource could not be found."),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit.",
    ),
    500: ("api_error", "Internal server error"),
    503: ("overloaded_error", "Overloaded"),
    529: ("overloaded_error", "Overloaded"),
}

_STOP_REASON: dict[Finish, str] = {"stop": "end_turn", "length": "max_tokens"}
#: An opaque stand-in for the signature the API sends at the end of a thinking block.
THINKING_SIGNATURE = "cHJvbXB0cGF0aCByZWZlcmVuY2U="

Block = Literal["text", "thinking"]


class Messages(Dialect):
    """``POST /v1/messages``."""

    name: ClassVar[str] = "anthropic"
    reasons: ClassVar[bool] = True

    def __init__(self, info: RequestInfo) -> None:
        super().__init__(info)
        self._block: Block = "thinking" if info.reasoning > 0 else "text"
        self._index = 0

    @property
    def message_id(self) -> str:
        return f"msg_{self.info.id}"

    def _event(self, data: JSONObject, content: bool = False) -> Event:
        return Event(data, name=str(data["type"]), content=content)

    def _message(
        self, content: list[JSONObject], stop_reason: str | None, output_tokens: int
    ) -> JSONObject:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": self.info.params.prompt_tokens,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": output_tokens,
            },
        }

    def _start(self) -> Event:
        block: JSONObject = (
            {"type": "thinking", "thinking": "", "signature": ""}
            if self._block == "thinking"
            else {"type": "text", "text": ""}
        )
        return self._event(
            {"type": "content_block_start", "index": self._index, "content_block": block}
        )

    def _stop(self) -> list[Event]:
        """The open block's end (a thinking block's signature comes just before it)."""
        events = []
        if self._block == "thinking":
            signature = {"type": "signature_delta", "signature": THINKING_SIGNATURE}
            events.append(
                self._event(
                    {"type": "content_block_delta", "index": self._index, "delta": signature}
                )
            )
        events.append(self._event({"type": "content_block_stop", "index": self._index}))
        return events

    def opening(self) -> list[Event]:
        return [
            self._event({"type": "message_start", "message": self._message([], None, 1)}),
            self._start(),
            self._event({"type": "ping"}),
        ]

    def token(self, text: str) -> Event:
        delta = {"type": "text_delta", "text": text}
        return self._event(
            {"type": "content_block_delta", "index": self._index, "delta": delta}, True
        )

    def reasoning(self, text: str) -> Event:
        delta = {"type": "thinking_delta", "thinking": text}
        return self._event(
            {"type": "content_block_delta", "index": self._index, "delta": delta}, True
        )

    def events_for(self, text: str, *, reasoning: bool = False) -> list[Event]:
        if reasoning or self._block == "text":
            return super().events_for(text, reasoning=reasoning)
        # The first answer token: the thinking block ends and the text block opens.
        events = self._stop()
        self._block, self._index = "text", self._index + 1
        return [*events, self._start(), self.token(text)]

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        return [
            *self._stop(),
            self._event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": _STOP_REASON[finish], "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                }
            ),
            self._event({"type": "message_stop"}),
        ]

    def error(self) -> list[Event]:
        return [self._event(self.error_reply(529).body)]

    def malformed(self) -> Event:
        return Event(
            '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"',
            name="content_block_delta",
        )

    def complete(
        self, text: str, finish: Finish, output_tokens: int, elapsed_ns: int
    ) -> JSONObject:
        return self._message([{"type": "text", "text": text}], _STOP_REASON[finish], output_tokens)

    @classmethod
    def error_reply(
        cls, status: int, message: str | None = None, *, param: str | None = None
    ) -> ErrorReply:
        default = (
            ("api_error", f"HTTP {status}")
            if status >= 500
            else (
                "invalid_request_error",
                f"HTTP {status}",
            )
        )
        kind, text = _ANTHROPIC_ERRORS.get(status, default)
        headers = (("retry-after", "2"),) if status == 429 else ()
        body = {"type": "error", "error": {"type": kind, "message": message or text}}
        return ErrorReply(body=body, headers=headers)


# -- the request --------------------------------------------------------------------------
ANTHROPIC_VERSION = "2023-06-01"


def body(options: RunOptions) -> JSON:
    return {
        "model": options.model,
        "messages": [{"role": "user", "content": options.prompt}],
        "max_tokens": options.max_tokens,
        "stream": True,
    }


#: anthropic 2.14.0: the same Stainless base client as openai's ("Anthropic/Python" +
#: version) on httpx2 2.16.2; observed: the same Accept and Accept-Encoding, HTTP/1.1.
ANTHROPIC_PYTHON = httpx_client("anthropic-python", "Anthropic/Python 2.14.0")


SPEC = DialectSpec(
    name="anthropic",
    title="Anthropic Messages",
    path_suffixes=("/messages",),
    default_model="claude-3-5-haiku-latest",
    key_env="ANTHROPIC_API_KEY",
    key_header="x-api-key",
    client="anthropic-python",
    shapes=(ANTHROPIC_PYTHON,),
    body=body,
    version_headers=(("anthropic-version", ANTHROPIC_VERSION),),
    decoder=AnthropicDecoder,
    otel_provider="anthropic",
    emulation=Messages,
    demo_path="/v1/messages",
    docs=(
        DocRow(
            detection="ends in `/messages`",
            auth="`x-api-key`",
            keys="`ANTHROPIC_API_KEY`",
            end="`message_stop`",
        ),
    ),
)
