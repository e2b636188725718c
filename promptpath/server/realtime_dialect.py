"""The Realtime API's text responses (WebSocket only), as openai 3.57's types name them.

One instance per ``response.create``: ``response.created``, the item and part added,
``response.output_text.delta`` per token, then the ``.done`` events and ``response.done``
with the usage (``incomplete`` with ``max_output_tokens`` when the cap cut it). A
mid-stream failure is an ``error`` event and ``response.done`` with status ``failed``.
The session's own events (``session.created``, the user's turn acknowledged) are the
WebSocket handler's (server/websocket.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from promptpath.server.dialect import Dialect, ErrorReply, Event, Finish, JSONObject, RequestInfo
from promptpath.server.openai_dialects import MID_STREAM_ERROR, openai_error_reply


class Realtime(Dialect):
    """``/v1/realtime?model=M``: the text modality of one response."""

    name: ClassVar[str] = "realtime"
    max_tokens_fields = ("response.max_output_tokens",)

    def __init__(self, info: RequestInfo) -> None:
        super().__init__(info)
        self._n = 0
        self._text: list[str] = []
        self.response_id = f"resp_{info.id}"
        self.item_id = f"item_{info.id}"

    @classmethod
    def _prompt_parts(cls, body: JSONObject) -> Iterable[object]:
        response = body.get("response")
        return (response.get("instructions"),) if isinstance(response, dict) else ()

    def _event(self, type_: str, *, content: bool = False, **fields: Any) -> Event:
        self._n += 1
        data: JSONObject = {"type": type_, "event_id": f"event_{self.info.id}_{self._n}"}
        return Event({**data, **fields}, name=type_, content=content)

    def _where(self) -> JSONObject:
        return {
            "response_id": self.response_id,
            "item_id": self.item_id,
            "output_index": 0,
            "content_index": 0,
        }

    def _item(self, status: str, text: str | None) -> JSONObject:
        content = [] if text is None else [{"type": "output_text", "text": text}]
        return {
            "id": self.item_id,
            "object": "realtime.item",
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": content,
        }

    def _response(self, status: str, output: list[JSONObject], **extra: Any) -> JSONObject:
        response: JSONObject = {
            "id": self.response_id,
            "object": "realtime.response",
            "conversation_id": f"conv_{self.info.id}",
            "status": status,
            "status_details": None,
            "output": output,
            "output_modalities": ["text"],
            "max_output_tokens": self.info.params.max_tokens or "inf",
            "metadata": None,
            "usage": None,
        }
        response.update(extra)
        return response

    def _usage(self, output_tokens: int) -> JSONObject:
        prompt = self.info.params.prompt_tokens
        return {
            "total_tokens": prompt + output_tokens,
            "input_tokens": prompt,
            "output_tokens": output_tokens,
            "input_token_details": {"text_tokens": prompt, "audio_tokens": 0, "cached_tokens": 0},
            "output_token_details": {"text_tokens": output_tokens, "audio_tokens": 0},
        }

    def opening(self) -> list[Event]:
        return [
            self._event("response.created", response=self._response("in_progress", [])),
            self._event(
                "response.output_item.added",
                response_id=self.response_id,
                output_index=0,
                item=self._item("in_progress", None),
            ),
            self._event(
                "response.content_part.added",
                **self._where(),
                part={"type": "text", "text": ""},
            ),
        ]

    def token(self, text: str) -> Event:
        self._text.append(text)
        return self._event("response.output_text.delta", content=True, **self._where(), delta=text)

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        text = "".join(self._text)
        status = "completed" if finish == "stop" else "incomplete"
        details = (
            None if finish == "stop" else {"type": "incomplete", "reason": "max_output_tokens"}
        )
        item = self._item(status, text)
        final = self._response(
            status, [item], usage=self._usage(output_tokens), status_details=details
        )
        return [
            self._event("response.output_text.done", **self._where(), text=text),
            self._event(
                "response.content_part.done", **self._where(), part={"type": "text", "text": text}
            ),
            self._event(
                "response.output_item.done", response_id=self.response_id, output_index=0, item=item
            ),
            self._event("response.done", response=final),
        ]

    def error(self) -> list[Event]:
        error: JSONObject = {"type": "server_error", "code": None, "message": MID_STREAM_ERROR}
        details = {"type": "failed", "error": {"type": "server_error", "code": None}}
        failed = self._response(
            "failed", [self._item("incomplete", "".join(self._text))], status_details=details
        )
        return [self._event("error", error=error), self._event("response.done", response=failed)]

    def malformed(self) -> Event:
        return Event(
            '{"type":"response.output_text.delta","delta":"', name="response.output_text.delta"
        )

    def complete(
        self, text: str, finish: Finish, output_tokens: int, elapsed_ns: int
    ) -> JSONObject:
        return self._response("completed", [self._item("completed", text)])

    @classmethod
    def error_reply(
        cls, status: int, message: str | None = None, *, param: str | None = None
    ) -> ErrorReply:
        return openai_error_reply(status, message, param)


__all__ = ["Realtime"]
