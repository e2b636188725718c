"""Cohere v2 chat on the reference endpoint (``CohereChat``): it opens a content block with its
first token (a ``thinking`` block for reasoning, then a ``text`` block); a failure
mid-stream is a ``message-end`` with ``finish_reason: ERROR`` and ``delta.error``, which
cohere 7.3.1 hands to the application as it does any ``message-end``. Error answers are
``{"id": ..., "message": ...}``.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from promptpath.server.dialect import Dialect, ErrorReply, Event, Finish, JSONObject, RequestInfo

__all__ = [
    "MID_STREAM_ERROR",
    "CohereChat",
]


MID_STREAM_ERROR = "internal server error, this has been reported to our developers"

_FINISH: dict[Finish, str] = {"stop": "COMPLETE", "length": "MAX_TOKENS"}

_ERRORS: dict[int, str] = {
    400: "invalid request: the request body is not valid",
    401: "invalid api token",
    404: "model 'promptpath-reference' not found, make sure the correct model ID was used",
    413: "request body too large",
    422: "invalid request: the request could not be processed",
    429: (
        "You are using a Trial key, which is limited to 20 API calls / minute. You can"
        " continue to use the Trial key for free or upgrade to a Production key with"
        " higher rate limits"
    ),
    500: "internal server error, this has been reported to our developers",
    503: "service unavailable",
}

Block = Literal["text", "thinking"]


class CohereChat(Dialect):
    """``POST /v2/chat``."""

    name: ClassVar[str] = "cohere"
    reasons: ClassVar[bool] = True

    def __init__(self, info: RequestInfo) -> None:
        super().__init__(info)
        self._block: Block | None = None
        self._index = -1
        self._sent = 0  # tokens sent so far: the usage of a message-end with an error

    def _event(self, data: JSONObject, content: bool = False) -> Event:
        return Event(data, name=str(data["type"]), content=content)

    def _usage(self, output_tokens: int) -> JSONObject:
        counts = {"input_tokens": self.info.params.prompt_tokens, "output_tokens": output_tokens}
        return {"billed_units": dict(counts), "tokens": dict(counts)}

    def _end_block(self) -> list[Event]:
        if self._block is None:
            return []
        return [self._event({"type": "content-end", "index": self._index})]

    def _open(self, block: Block) -> list[Event]:
        """``content-end`` of the block open, ``content-start`` of ``block``, when it changes."""
        if self._block == block:
            return []
        events = self._end_block()
        self._block, self._index = block, self._index + 1
        start = {"message": {"content": {"type": block, block: ""}}}
        events.append(self._event({"type": "content-start", "index": self._index, "delta": start}))
        return events

    def _content_delta(self, block: Block, text: str) -> Event:
        self._sent += 1
        delta = {"message": {"content": {block: text}}}
        return self._event({"type": "content-delta", "index": self._index, "delta": delta}, True)

    def opening(self) -> list[Event]:
        start = {
            "role": "assistant",
            "content": [],
            "tool_plan": "",
            "tool_calls": [],
            "citations": [],
        }
        return [
            self._event({"id": self.info.id, "type": "message-start", "delta": {"message": start}})
        ]

    def token(self, text: str) -> Event:
        return self._content_delta("text", text)

    def reasoning(self, text: str) -> Event:
        return self._content_delta("thinking", text)

    def events_for(self, text: str, *, reasoning: bool = False) -> list[Event]:
        # A block opens with its first token, as the API's content-start comes with it.
        return [
            *self._open("thinking" if reasoning else "text"),
            *super().events_for(text, reasoning=reasoning),
        ]

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        end = {"finish_reason": _FINISH[finish], "usage": self._usage(output_tokens)}
        return [*self._end_block(), self._event({"type": "message-end", "delta": end})]

    def error(self) -> list[Event]:
        end = {
            "error": MID_STREAM_ERROR,
            "finish_reason": "ERROR",
            "usage": self._usage(self._sent),
        }
        return [*self._end_block(), self._event({"type": "message-end", "delta": end})]

    def malformed(self) -> Event:
        return Event(
            '{"type":"content-delta","index":0,"delta":{"message":{"content":{"text":"',
            name="content-delta",
        )

    def complete(
        self, text: str, finish: Finish, output_tokens: int, elapsed_ns: int
    ) -> JSONObject:
        return {
            "id": self.info.id,
            "message": {"role": "assistant", "content": [{"type": "text", "text": text}]},
            "finish_reason": _FINISH[finish],
            "usage": self._usage(output_tokens),
        }

    @classmethod
    def error_reply(
        cls, status: int, message: str | None = None, *, param: str | None = None
    ) -> ErrorReply:
        headers = (("retry-after", "2"),) if status == 429 else ()
        text = message or _ERRORS.get(status, f"HTTP {status}")
        return ErrorReply(body={"id": "", "message": text}, headers=headers)
