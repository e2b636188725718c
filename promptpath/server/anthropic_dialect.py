"""Anthropic Messages wire format: named SSE events, ``ping``s, ``message_stop`` at the end."""

from __future__ import annotations

from typing import ClassVar

from promptpath.server.dialect import Dialect, ErrorReply, Event, Finish, JSONObject

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


class Messages(Dialect):
    """``POST /v1/messages``."""

    name: ClassVar[str] = "anthropic"

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

    def opening(self) -> list[Event]:
        return [
            self._event({"type": "message_start", "message": self._message([], None, 1)}),
            self._event(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                }
            ),
            self._event({"type": "ping"}),
        ]

    def token(self, text: str) -> Event:
        delta = {"type": "text_delta", "text": text}
        return self._event({"type": "content_block_delta", "index": 0, "delta": delta}, True)

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        return [
            self._event({"type": "content_block_stop", "index": 0}),
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
