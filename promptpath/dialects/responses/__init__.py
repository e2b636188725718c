"""OpenAI's Responses API (``POST /v1/responses``, and its WebSocket mode), one plug-in:
detection, keys, model, the request (and the WebSocket's messages), the stream's decoder
and the reference endpoint's emulation (``Responses``, over HTTP and WebSocket).

Typed SSE events, each naming itself in ``type``: ``response.created`` ...
``response.output_text.delta`` ... ``response.completed`` (or ``response.incomplete``), which
carries the usage. An error inside the stream is an ``error`` event or
``response.failed``. Over a ws:// or wss:// URL the same events arrive as WebSocket messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from promptpath.core.timeline import ContentType, StreamEvent
from promptpath.dialects.openai import MID_STREAM_ERROR, OpenAIErrors
from promptpath.dialects.spec import JSON, DialectSpec, DocRow
from promptpath.options import RunOptions
from promptpath.server.dialect import (
    Dialect,
    Event,
    Finish,
    JSONObject,
    RequestInfo,
)
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
    "Responses",
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
            )
            reason = _str(_obj(response.get("incomplete_details")).get("reason"))
            return [mk("end", typ, usage=usage, text=f"reason={reason}" if reason else "")]
        if typ == "response.failed":
            return [mk("error", typ, error=_error_text(response.get("error") or "response failed"))]
        if typ == "error":
            return [mk("error", typ, error=_error_text(obj.get("error") or obj))]
        return [mk("meta", typ)]


# -- the reference endpoint (promptpath serve) --------------------------------------------
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
            "input_tokens_details": {"cached_tokens": 0},
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
    key_env="OPENAI_API_KEY",
    client="openai-python",
    body=body,
    ws_messages=ws_messages,
    decoder=ResponsesDecoder,
    otel_provider="openai",
    emulation=Responses,
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
