"""The Responses API on the reference endpoint (``Responses``), over HTTP and as the
WebSocket mode's responses: typed SSE events with ``sequence_number``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from promptpath.dialects.openai.emulation import MID_STREAM_ERROR, OpenAIErrors
from promptpath.server.dialect import (
    Dialect,
    Event,
    Finish,
    JSONObject,
    RequestInfo,
)

__all__ = [
    "Responses",
]


class Responses(OpenAIErrors, Dialect):
    """``POST /v1/responses``: typed SSE events with ``sequence_number``.

    With the ``reasoning`` control a ``reasoning`` output item with a summary comes first,
    as a reasoning model streams it with ``reasoning.summary`` on (the openai SDK's event
    types: ``response.reasoning_summary_part.added``, ``response.reasoning_summary_text.delta``
    ``{item_id, output_index, summary_index, delta}``, ``.done``, ``_part.done``), then the
    message at output index 1.
    """

    name: ClassVar[str] = "responses"
    max_tokens_fields = ("max_output_tokens",)
    reasons: ClassVar[bool] = True

    def __init__(self, info: RequestInfo) -> None:
        super().__init__(info)
        self._seq = 0
        self._text: list[str] = []
        self._summary: list[str] = []
        self.response_id = f"resp_{info.id}"
        self.item_id = f"msg_{info.id}"
        self.reasoning_id = f"rs_{info.id}"
        self._thinking = info.reasoning > 0  # the reasoning item is open
        self._output_index = 1 if self._thinking else 0  # the message's

    @classmethod
    def _prompt_parts(cls, body: JSONObject) -> Iterable[object]:
        return (body.get("input"), body.get("instructions"))

    def _event(self, type_: str, *, content: bool = False, **fields: Any) -> Event:
        data: JSONObject = {"type": type_, "sequence_number": self._seq, **fields}
        self._seq += 1
        return Event(data, name=type_, content=content)

    def _part(self, text: str) -> JSONObject:
        return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}

    def _item(self, status: str, content: list[JSONObject]) -> JSONObject:
        return {
            "id": self.item_id,
            "type": "message",
            "status": status,
            "content": content,
            "role": "assistant",
        }

    def _response(self, status: str, output: list[JSONObject], **extra: Any) -> JSONObject:
        response: JSONObject = {
            "id": self.response_id,
            "object": "response",
            "created_at": self.info.created_unix,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "instructions": None,
            "max_output_tokens": self.info.params.max_tokens,
            "model": self.model,
            "output": output,
            "parallel_tool_calls": True,
            "previous_response_id": None,
            "reasoning": {"effort": None, "summary": None},
            "store": False,
            "temperature": 1.0,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "top_p": 1.0,
            "truncation": "disabled",
            "usage": None,
            "user": None,
            "metadata": {},
        }
        response.update(extra)
        return response

    def _usage(self, output_tokens: int) -> JSONObject:
        prompt = self.info.params.prompt_tokens
        return {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": self.info.params.cached_tokens},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": len(self._summary)},
            "total_tokens": prompt + output_tokens,
        }

    def _where(self) -> JSONObject:
        return {"item_id": self.item_id, "output_index": self._output_index, "content_index": 0}

    def _reasoning_item(self, status: str) -> JSONObject:
        summary = (
            [{"type": "summary_text", "text": "".join(self._summary)}] if self._summary else []
        )
        return {"id": self.reasoning_id, "type": "reasoning", "summary": summary, "status": status}

    def _summary_where(self) -> JSONObject:
        return {"item_id": self.reasoning_id, "output_index": 0, "summary_index": 0}

    def _message_opening(self) -> list[Event]:
        return [
            self._event(
                "response.output_item.added",
                output_index=self._output_index,
                item=self._item("in_progress", []),
            ),
            self._event("response.content_part.added", **self._where(), part=self._part("")),
        ]

    def _end_reasoning(self) -> list[Event]:
        """The reasoning item's end and the message's start (nothing once it is past)."""
        if not self._thinking:
            return []
        self._thinking = False
        summary = "".join(self._summary)
        part = {"type": "summary_text", "text": summary}
        return [
            self._event(
                "response.reasoning_summary_text.done", **self._summary_where(), text=summary
            ),
            self._event("response.reasoning_summary_part.done", **self._summary_where(), part=part),
            self._event(
                "response.output_item.done", output_index=0, item=self._reasoning_item("completed")
            ),
            *self._message_opening(),
        ]

    def opening(self) -> list[Event]:
        events = [
            self._event("response.created", response=self._response("in_progress", [])),
            self._event("response.in_progress", response=self._response("in_progress", [])),
        ]
        if not self._thinking:
            return events + self._message_opening()
        part = {"type": "summary_text", "text": ""}
        return [
            *events,
            self._event(
                "response.output_item.added",
                output_index=0,
                item=self._reasoning_item("in_progress"),
            ),
            self._event(
                "response.reasoning_summary_part.added", **self._summary_where(), part=part
            ),
        ]

    def token(self, text: str) -> Event:
        self._text.append(text)
        return self._event(
            "response.output_text.delta", content=True, **self._where(), delta=text, logprobs=[]
        )

    def reasoning(self, text: str) -> Event:
        self._summary.append(text)
        return self._event(
            "response.reasoning_summary_text.delta",
            content=True,
            **self._summary_where(),
            delta=text,
        )

    def events_for(self, text: str, *, reasoning: bool = False) -> list[Event]:
        before = [] if reasoning else self._end_reasoning()
        return [*before, *super().events_for(text, reasoning=reasoning)]

    def _output(self, item: JSONObject) -> list[JSONObject]:
        return [self._reasoning_item("completed"), item] if self._summary else [item]

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        opened = self._end_reasoning()  # an answer of reasoning only still ends its message
        text = "".join(self._text)
        # A max_output_tokens cut ends in response.incomplete, as the real API does.
        done_status = "completed" if finish == "stop" else "incomplete"
        item = self._item(done_status, [self._part(text)])
        final = self._response(
            done_status,
            self._output(item),
            usage=self._usage(output_tokens),
            incomplete_details=None if finish == "stop" else {"reason": "max_output_tokens"},
        )
        return [
            *opened,
            self._event("response.output_text.done", **self._where(), text=text, logprobs=[]),
            self._event("response.content_part.done", **self._where(), part=self._part(text)),
            self._event("response.output_item.done", output_index=self._output_index, item=item),
            self._event(f"response.{done_status}", response=final),
        ]

    def error(self) -> list[Event]:
        error: JSONObject = {"code": "server_error", "message": MID_STREAM_ERROR}
        return [
            self._event("error", **error, param=None),
            self._event(
                "response.failed",
                response=self._response(
                    "failed",
                    [self._item("incomplete", [self._part("".join(self._text))])],
                    error=error,
                ),
            ),
        ]

    def malformed(self) -> Event:
        return Event(
            '{"type":"response.output_text.delta","sequence_number":'
            + str(self._seq)
            + ',"delta":"',
            name="response.output_text.delta",
        )

    def complete(
        self, text: str, finish: Finish, output_tokens: int, elapsed_ns: int
    ) -> JSONObject:
        status = "completed" if finish == "stop" else "incomplete"
        return self._response(
            status,
            [self._item(status, [self._part(text)])],
            usage=self._usage(output_tokens),
            incomplete_details=None if finish == "stop" else {"reason": "max_output_tokens"},
        )
