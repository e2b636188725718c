"""Anthropic Messages on the reference endpoint (``Messages``): it writes named SSE events,
``ping``s, ``message_stop`` at the end. With the ``reasoning`` control the answer follows a
``thinking`` block, as extended thinking streams it (the anthropic SDK's types:
``ThinkingBlock`` ``{type: thinking, thinking, signature}``, ``ThinkingDelta``
``thinking_delta``, and a ``SignatureDelta`` "delivered just before the block's
content_block_stop"): block 0 is the thinking, the text block comes next at index 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal

from promptpath.server.dialect import (
    Dialect,
    ErrorReply,
    Event,
    Finish,
    JSONObject,
    RequestInfo,
    marked_words,
)

__all__ = [
    "THINKING_SIGNATURE",
    "Messages",
]


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

    @classmethod
    def marked_prefixes(cls, body: object) -> tuple[list[str], list[int]] | None:
        """Prompt caching caches only up to a block marked ``cache_control`` (in the order
        system, then messages): an unmarked request is never cached."""
        if not isinstance(body, dict):
            return [], []
        return marked_words(
            (body.get("system"), body.get("messages")),
            lambda block: isinstance(block.get("cache_control"), Mapping),
        )

    @property
    def message_id(self) -> str:
        return f"msg_{self.info.id}"

    def _event(self, data: JSONObject, content: bool = False) -> Event:
        return Event(data, name=str(data["type"]), content=content)

    def _message(
        self, content: list[JSONObject], stop_reason: str | None, output_tokens: int
    ) -> JSONObject:
        params = self.info.params
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                # input_tokens leaves the cache's out (Anthropic's usage: the total
                # input is input_tokens + cache_creation_ + cache_read_input_tokens).
                "input_tokens": params.prompt_tokens
                - params.cached_tokens
                - params.cache_write_tokens,
                "cache_creation_input_tokens": params.cache_write_tokens,
                "cache_read_input_tokens": params.cached_tokens,
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
