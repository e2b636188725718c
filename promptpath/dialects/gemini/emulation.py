"""The Gemini API (and Vertex AI's) on the reference endpoint (``GenerateContent``): it sends
``data:`` lines only: google-genai 3.6.1's line reader takes ``data: `` lines and tries to
brace-match anything else, so no ``event:`` field is sent. Its errors, before the stream and
inside it, are a ``google.rpc.Status`` under ``error``; inside the stream the SDK raises
``APIError`` only when the message starts with ``{"error":``, so that key comes first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

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
    "GenerateContent",
    "google_error",
]


#: google.rpc.Code names for the HTTP statuses the API answers with.
_STATUS: dict[int, tuple[str, str]] = {
    400: ("INVALID_ARGUMENT", "Request contains an invalid argument."),
    401: (
        "UNAUTHENTICATED",
        "Request had invalid authentication credentials. Expected OAuth 2 access token,"
        " login cookie or other valid authentication credential.",
    ),
    403: ("PERMISSION_DENIED", "Method doesn't allow unregistered callers."),
    404: ("NOT_FOUND", "models/promptpath-reference is not found for API version v1beta."),
    413: ("INVALID_ARGUMENT", "Request payload size exceeds the limit."),
    429: (
        "RESOURCE_EXHAUSTED",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    500: (
        "INTERNAL",
        "An internal error has occurred. Please retry or report in"
        " https://developers.generativeai.google/guide/troubleshooting",
    ),
    503: ("UNAVAILABLE", "The model is overloaded. Please try again later."),
}

MID_STREAM_ERROR = _STATUS[500][1]

_FINISH: dict[Finish, str] = {"stop": "STOP", "length": "MAX_TOKENS"}


def google_error(status: int, message: str | None = None) -> JSONObject:
    name, text = _STATUS.get(status, ("INTERNAL" if status >= 500 else "FAILED_PRECONDITION", ""))
    return {
        "error": {"code": status, "message": message or text or f"HTTP {status}", "status": name}
    }


class GenerateContent(Dialect):
    """``POST …/models/M:streamGenerateContent?alt=sse`` (the model is in the path)."""

    name: ClassVar[str] = "gemini"
    stream_default: ClassVar[bool] = True  # the path asks for the stream, not the body
    model_in_path: ClassVar[bool] = True
    max_tokens_fields = ("generationConfig.maxOutputTokens",)
    reasons: ClassVar[bool] = True

    def __init__(self, info: RequestInfo) -> None:
        super().__init__(info)
        self._thoughts = 0  # reasoning tokens sent: thoughtsTokenCount

    @classmethod
    def _prompt_parts(cls, body: JSONObject) -> Iterable[object]:
        return (body.get("contents"), body.get("systemInstruction"))

    def _usage(self, output_tokens: int | None) -> JSONObject:
        prompt = self.info.params.prompt_tokens
        usage: JSONObject = {"promptTokenCount": prompt, "totalTokenCount": prompt}
        if self.info.params.cached_tokens:  # --prefix-cache: of promptTokenCount, cached
            usage["cachedContentTokenCount"] = self.info.params.cached_tokens
        if output_tokens is not None:
            # candidatesTokenCount leaves the thoughts out; the total has both.
            usage["candidatesTokenCount"] = output_tokens - self._thoughts
            if self._thoughts:
                usage["thoughtsTokenCount"] = self._thoughts
            usage["totalTokenCount"] = prompt + output_tokens
        return usage

    def _response(
        self,
        text: str,
        *,
        finish: Finish | None = None,
        output_tokens: int | None = None,
        thought: bool = False,
    ) -> JSONObject:
        part: JSONObject = {"text": text, "thought": True} if thought else {"text": text}
        candidate: JSONObject = {"content": {"parts": [part], "role": "model"}}
        if finish is not None:
            candidate["finishReason"] = _FINISH[finish]
        candidate["index"] = 0
        return {
            "candidates": [candidate],
            "usageMetadata": self._usage(output_tokens),
            "modelVersion": self.model,
            "responseId": self.info.id,
        }

    def opening(self) -> list[Event]:
        return []  # the first response already carries a token

    def token(self, text: str) -> Event:
        return Event(self._response(text), content=True)

    def reasoning(self, text: str) -> Event:
        # A thought summary part, as include_thoughts=True asks for.
        self._thoughts += 1
        return Event(self._response(text, thought=True), content=True)

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        return [Event(self._response("", finish=finish, output_tokens=output_tokens))]

    def error(self) -> list[Event]:
        return [Event(google_error(500, MID_STREAM_ERROR))]

    def malformed(self) -> Event:
        return Event('{"candidates": [{"content": {"parts": [{"text": " unterminated')

    def complete(
        self, text: str, finish: Finish, output_tokens: int, elapsed_ns: int
    ) -> JSONObject:
        return self._response(text, finish=finish, output_tokens=output_tokens)

    @classmethod
    def error_reply(
        cls, status: int, message: str | None = None, *, param: str | None = None
    ) -> ErrorReply:
        headers = (("retry-after", "2"),) if status == 429 else ()
        return ErrorReply(body=google_error(status, message), headers=headers)
