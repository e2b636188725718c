"""OpenAI Chat Completions on the reference endpoint (``ChatCompletions``): it streams
``data:``-only SSE ending in ``data: [DONE]``; with the ``reasoning`` control the first
tokens are ``reasoning_content`` deltas, as DeepSeek, vLLM and LiteLLM stream a reasoning
model's thoughts. Its error bodies (``openai_error_reply``) serve every OpenAI dialect.
"""

from __future__ import annotations

from typing import Any, ClassVar

from promptpath.server.dialect import (
    Dialect,
    ErrorReply,
    Event,
    Finish,
    JSONObject,
    RequestInfo,
)

__all__ = [
    "MID_STREAM_ERROR",
    "ChatCompletions",
    "OpenAIErrors",
    "openai_error_reply",
]


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
        if self.info.params.cached_tokens:  # --prefix-cache: of prompt_tokens, the cached
            usage["prompt_tokens_details"] = {"cached_tokens": self.info.params.cached_tokens}
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
