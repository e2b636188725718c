"""OpenAI Chat Completions (``POST /v1/chat/completions``), one plug-in: detection, keys,
model, the request and client its SDK sends, the stream's decoder and the reference
endpoint's emulation.

Compatible servers (vLLM, llama.cpp, OpenRouter, LiteLLM...) speak it too: ``data:``-only
SSE ending in ``data: [DONE]``, a role-only chunk first (not a token), the usage in a last
chunk when ``stream_options.include_usage`` is set. Azure OpenAI (azure.py) sends the same
chunks plus its content filter's.

The reference endpoint (``ChatCompletions``) streams ``data:``-only SSE ending in
``data: [DONE]``; with the ``reasoning`` control the first tokens are
``reasoning_content`` deltas, as DeepSeek, vLLM and LiteLLM stream a reasoning model's
thoughts. Its error bodies (``openai_error_reply``) serve every OpenAI dialect.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from promptpath.core.timeline import StreamEvent
from promptpath.dialects.spec import JSON, DialectSpec, DocRow, httpx_client
from promptpath.options import RunOptions
from promptpath.server.dialect import (
    Dialect,
    ErrorReply,
    Event,
    Finish,
    JSONObject,
    RequestInfo,
)
from promptpath.streams.dialect_base import (
    Framing,
    _Dialect,
    _error_text,
    _list,
    _load,
    _Maker,
    _obj,
    _str,
    _usage,
)

__all__ = [
    "MID_STREAM_ERROR",
    "OPENAI_PYTHON",
    "SPEC",
    "ChatCompletions",
    "OpenAIChatDecoder",
    "OpenAIErrors",
    "chat_body",
    "openai_error_reply",
]


# -- the stream ---------------------------------------------------------------------------
class OpenAIChatDecoder(_Dialect):
    """``/v1/chat/completions`` (and compatible servers: vLLM, llama.cpp, OpenRouter…)."""

    framing: Framing = "sse"

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        if data.strip() == "[DONE]":
            return [mk("end", "[DONE]")]
        obj = _load(data)
        mk.stamp_from(obj)
        if obj.get("error") is not None or sse_event == "error":
            return [mk("error", "error", error=_error_text(obj.get("error", obj)))]
        name = _str(obj.get("object")) or "chat.completion.chunk"
        events: list[StreamEvent] = []
        finish: list[str] = []
        for choice in map(_obj, _list(obj.get("choices"))):
            delta = _obj(choice.get("delta"))
            reasoning = _str(delta.get("reasoning_content")) or _str(delta.get("reasoning"))
            if reasoning:
                events.append(mk("content", name, content_type="reasoning", text=reasoning))
            # "text" is the legacy /v1/completions shape, "refusal" is shown to the user.
            for key, source in (("content", delta), ("refusal", delta), ("text", choice)):
                text = _str(source.get(key))
                if text:
                    events.append(mk("content", name, content_type="text", text=text))
            calls = [_obj(c).get("function") for c in _list(delta.get("tool_calls"))]
            calls.append(delta.get("function_call"))  # the deprecated functions API
            for fn in map(_obj, calls):
                args = _str(fn.get("arguments"))
                if _str(fn.get("name")) or args:
                    events.append(mk("content", name, content_type="tool", text=args))
            reason = _str(choice.get("finish_reason"))
            if reason:
                finish.append(reason)
        u = _obj(obj.get("usage"))  # "usage": null on every chunk when include_usage is on
        usage = _usage(
            u.get("prompt_tokens"),
            u.get("completion_tokens"),
            _obj(u.get("completion_tokens_details")).get("reasoning_tokens"),
        )
        if not events:
            text = "finish_reason=" + ",".join(finish) if finish else ""
            return [mk("meta", _filter_name(obj) or name, text=text, usage=usage)]
        if usage is not None:
            events[0] = replace(events[0], usage=usage)
        return events


def _filter_name(obj: dict[str, object]) -> str | None:
    """Azure's filter bookkeeping: the first chunk (``choices: []`` with
    ``prompt_filter_results``) and chunks whose choices carry only
    ``content_filter_results`` (``content_filter_offsets``): named so they can be counted."""
    if obj.get("prompt_filter_results") is not None and not _list(obj.get("choices")):
        return "prompt_filter_results"
    choices = [_obj(c) for c in _list(obj.get("choices"))]
    if choices and all(
        ("content_filter_results" in c or "content_filter_offsets" in c)
        and not _obj(c.get("delta"))  # the role chunk carries an empty verdict too
        and not _str(c.get("finish_reason"))
        for c in choices
    ):
        return "content_filter_results"
    return None


# -- the reference endpoint (promptpath serve) --------------------------------------------
_OPENAI_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Forbidden."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests per min (RPM). Please try again in 2s.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}

MID_STREAM_ERROR = "The server had an error while processing your request. Sorry about that!"


def openai_error_reply(status: int, message: str | None, param: str | None) -> ErrorReply:
    default = (
        ("server_error", None, f"HTTP {status}")
        if status >= 500
        else (
            "invalid_request_error",
            None,
            f"HTTP {status}",
        )
    )
    kind, code, text = _OPENAI_ERRORS.get(status, default)
    headers = (("retry-after", "2"),) if status == 429 else ()
    body = {"error": {"message": message or text, "type": kind, "param": param, "code": code}}
    return ErrorReply(body=body, headers=headers)


class OpenAIErrors:
    """The error bodies every OpenAI API answers with, before a stream and as a refused
    WebSocket upgrade (a mix-in of its emulations)."""

    @classmethod
    def error_reply(
        cls, status: int, message: str | None = None, *, param: str | None = None
    ) -> ErrorReply:
        return openai_error_reply(status, message, param)


class ChatCompletions(OpenAIErrors, Dialect):
    """``POST /v1/chat/completions``: ``data:``-only SSE ending in ``data: [DONE]``."""

    name: ClassVar[str] = "openai"
    max_tokens_fields = ("max_completion_tokens", "max_tokens")
    reasons: ClassVar[bool] = True

    def __init__(self, info: RequestInfo) -> None:
        super().__init__(info)
        self._reasoned = 0  # reasoning tokens sent: completion_tokens_details

    @classmethod
    def _include_usage(cls, body: JSONObject) -> bool:
        options = body.get("stream_options")
        return isinstance(options, dict) and options.get("include_usage") is True

    def _chunk(self, choices: list[JSONObject], **extra: Any) -> JSONObject:
        chunk: JSONObject = {
            "id": f"chatcmpl-{self.info.id}",
            "object": "chat.completion.chunk",
            "created": self.info.created_unix,
            "model": self.model,
            "system_fingerprint": "fp_promptpath",
            "choices": choices,
        }
        if self.info.params.include_usage:
            chunk["usage"] = None  # as the real API does on every chunk but the last
        chunk.update(extra)
        return chunk

    @staticmethod
    def _choice(delta: JSONObject, finish: Finish | None = None) -> JSONObject:
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

    def _usage(self, output_tokens: int) -> JSONObject:
        prompt = self.info.params.prompt_tokens
        usage: JSONObject = {
            "prompt_tokens": prompt,
            "completion_tokens": output_tokens,
            "total_tokens": prompt + output_tokens,
        }
        if self._reasoned:
            usage["completion_tokens_details"] = {"reasoning_tokens": self._reasoned}
        return usage

    def opening(self) -> list[Event]:
        delta = {"role": "assistant", "content": "", "refusal": None}
        return [Event(self._chunk([self._choice(delta)]))]

    def token(self, text: str) -> Event:
        return Event(self._chunk([self._choice({"content": text})]), content=True)

    def reasoning(self, text: str) -> Event:
        # reasoning_content, as DeepSeek, vLLM and LiteLLM stream a reasoning model's
        # thoughts on this API (OpenAI's own models keep theirs out of chat streams).
        self._reasoned += 1
        return Event(self._chunk([self._choice({"reasoning_content": text})]), content=True)

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        events = [Event(self._chunk([self._choice({}, finish)]))]
        if self.info.params.include_usage:
            events.append(Event(self._chunk([], usage=self._usage(output_tokens))))
        events.append(Event("[DONE]"))
        return events

    def error(self) -> list[Event]:
        return [Event(openai_error_reply(500, MID_STREAM_ERROR, None).body)]

    def malformed(self) -> Event:
        return Event(
            f'{{"id":"chatcmpl-{self.info.id}","object":"chat.completion.chunk",'
            '"choices":[{"index":0,"delta":{"content":" unterminated'
        )

    def complete(
        self, text: str, finish: Finish, output_tokens: int, elapsed_ns: int
    ) -> JSONObject:
        message: JSONObject = {
            "role": "assistant",
            "content": text,
            "refusal": None,
            "annotations": [],
        }
        return {
            "id": f"chatcmpl-{self.info.id}",
            "object": "chat.completion",
            "created": self.info.created_unix,
            "model": self.model,
            "system_fingerprint": "fp_promptpath",
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
            ],
            "usage": self._usage(output_tokens),
        }


# -- the request --------------------------------------------------------------------------
def chat_body(options: RunOptions) -> JSON:
    """The chat body openai-python sends for a stream, the usage asked for."""
    return {
        "model": options.model,
        "messages": [{"role": "user", "content": options.prompt}],
        "max_tokens": options.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


#: openai 3.57.0: _base_client.py default_headers and user_agent ("OpenAI/Python" +
#: version), on httpx2 2.16.2 (Client(http2=False), Accept-Encoding from its decoders);
#: the same headers as openai 1.95.1 on httpx 0.28. Observed on loopback: "Accept-
#: Encoding: gzip, deflate", "accept: application/json", HTTP/1.1.
OPENAI_PYTHON = httpx_client("openai-python", "OpenAI/Python 3.57.0")


SPEC = DialectSpec(
    name="openai",
    title="OpenAI Chat Completions",
    path_suffixes=("/chat/completions",),
    default_model="gpt-4o-mini",
    key_env="OPENAI_API_KEY",
    client="openai-python",
    shapes=(OPENAI_PYTHON,),
    body=chat_body,
    decoder=OpenAIChatDecoder,
    otel_provider="openai",
    emulation=ChatCompletions,
    demo_path="/v1/chat/completions",
    docs=(
        DocRow(
            detection="ends in `/chat/completions`",
            auth="`Authorization: Bearer`",
            keys="`OPENAI_API_KEY`",
            end="`data: [DONE]`",
        ),
    ),
)
