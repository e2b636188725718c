"""Realtime on the reference endpoint (``Realtime``): it answers each ``response.create``:
``response.created``, the item and part added, ``response.output_text.delta`` per token,
then the ``.done`` events and ``response.done`` with the usage (``incomplete`` with
``max_output_tokens`` when the cap cut it); a mid-stream failure is an ``error`` event and
``response.done`` with status ``failed``. The session's own events (``session.created``, the
user's turn acknowledged) are the WebSocket handler's (server/websocket.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from promptpath.dialects.openai.emulation import MID_STREAM_ERROR, OpenAIErrors
from promptpath.server.dialect import (
    Dialect,
    Event,
    Finish,
    JSONObject,
    NewId,
    RequestInfo,
)
from promptpath.server.tokens import count_prompt_tokens

__all__ = [
    "Realtime",
]


class Realtime(OpenAIErrors, Dialect):
    """``/v1/realtime?model=M``: the text modality of one response."""

    name: ClassVar[str] = "realtime"
    max_tokens_fields = ("response.max_output_tokens",)
    conversation: ClassVar[bool] = True

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

    # -- the session: its opening, the user's turns, its errors --------------------------
    @classmethod
    def session_opening(cls, model: str, new_id: NewId) -> list[JSONObject]:
        session: JSONObject = {
            "id": new_id("sess"),
            "object": "realtime.session",
            "type": "realtime",
            "model": model,
            "output_modalities": ["text"],
        }
        return [{"type": "session.created", "event_id": new_id("event"), "session": session}]

    @classmethod
    def session_turn(
        cls, kind: object, payload: JSONObject, new_id: NewId
    ) -> tuple[int, list[JSONObject]] | None:
        """The user's turn (``conversation.item.create``: added, then done) and
        ``session.update`` (acknowledged)."""
        if kind == "session.update":
            return 0, [{"type": "session.updated", "event_id": new_id("event")}]
        if kind != "conversation.item.create":
            return None
        item = payload.get("item")
        done: JSONObject = {"id": new_id("item"), "object": "realtime.item", "status": "completed"}
        if isinstance(item, dict):
            done = {**item, **done}
        said = [
            {"type": step, "event_id": new_id("event"), "item": done}
            for step in ("conversation.item.added", "conversation.item.done")
        ]
        return count_prompt_tokens(_texts(item)), said

    @classmethod
    def session_error(cls, error: JSONObject, new_id: NewId) -> JSONObject:
        return {"type": "error", "event_id": new_id("event"), "error": error}


def _texts(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []
