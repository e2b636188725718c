"""The Gemini API (AI Studio) ``models/M:streamGenerateContent?alt=sse``, one plug-in; its
stream, decoder and emulation serve Vertex AI's too (vertex.py).

Both APIs speak one format (google-genai reads them with one code path): each SSE event
is a whole ``GenerateContentResponse``::

    data: {"candidates": [{"content": {"parts": [{"text": "Hel"}], "role": "model"}}],
           "usageMetadata": {...}, "modelVersion": "...", "responseId": "..."}

What surprises people:

- There is no ``[DONE]``. The last event carries ``candidates[].finishReason`` and the
  body then ends: a stream whose body ends without a finish reason was cut (truncated).
  A prompt refused outright has no candidate at all, only ``promptFeedback.blockReason``:
  that is the end too (the API's answer, not a broken stream).
- Text is in ``candidates[].content.parts[].text``; a part with ``"thought": true`` is the
  model's reasoning (thought summaries), a ``functionCall`` part is a tool call, a part
  holding only a ``thoughtSignature`` carries nothing to show.
- ``usageMetadata`` may ride on every event; the last one is complete.
  ``candidatesTokenCount`` excludes the thinking tokens (``thoughtsTokenCount``): the
  output count here is their sum, so it means what ``completion_tokens`` means for
  OpenAI (reasoning included, ``reasoning_tokens`` the share of it).
- An error mid-stream is an event whose object has an ``error`` member
  (``{"error": {"code": 500, "message": ..., "status": "INTERNAL"}}``), the same shape
  as the plain-JSON error bodies of a refused request; google-genai raises ``APIError``
  on it.

The reference endpoint (``GenerateContent``) sends ``data:`` lines only: google-genai
3.6.1's line reader takes ``data: `` lines and tries to brace-match anything else, so no
``event:`` field is sent. Its errors, before the stream and inside it, are a
``google.rpc.Status`` under ``error``; inside the stream the SDK raises ``APIError`` only
when the message starts with ``{"error":``, so that key comes first.
"""

from __future__ import annotations

import json
import platform
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import ClassVar

from promptpath.core.timeline import ContentType, StreamEvent
from promptpath.dialects.spec import JSON, DialectSpec, DocRow, httpx_client, model_named_in_path
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
    _int,
    _list,
    _load,
    _Maker,
    _obj,
    _str,
    _usage,
)

__all__ = [
    "GOOGLE_GENAI",
    "SPEC",
    "VERTEX_PATH",
    "GeminiDecoder",
    "GenerateContent",
    "body",
    "google_error",
    "google_error_text",
]

_NAME = "GenerateContentResponse"


def google_error_text(value: object) -> str:
    """``"INTERNAL (500): An internal error has occurred"`` from a google.rpc.Status."""
    if isinstance(value, str):
        return value
    err = _obj(value)
    status = _str(err.get("status"))
    code = _int(err.get("code"))
    message = _str(err.get("message"))
    label = (
        f"{status} ({code})"
        if status and code is not None
        else status or (str(code) if code is not None else "")
    )
    if label and message:
        return f"{label}: {message}"
    return message or label or json.dumps(value, default=str)[:200]


class GeminiDecoder(_Dialect):
    """``models/M:streamGenerateContent?alt=sse`` (AI Studio and Vertex alike)."""

    framing: Framing = "sse"

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        obj = _load(data)
        mk.stamp_from(obj)
        if obj.get("error") is not None:
            return [mk("error", "error", error=google_error_text(obj.get("error")))]
        events: list[StreamEvent] = []
        finish: list[str] = []
        for candidate in map(_obj, _list(obj.get("candidates"))):
            for part in map(_obj, _list(_obj(candidate.get("content")).get("parts"))):
                text = _str(part.get("text"))
                if text:
                    kind: ContentType = "reasoning" if part.get("thought") is True else "text"
                    events.append(mk("content", _NAME, content_type=kind, text=text))
                call = part.get("functionCall")
                if isinstance(call, dict):
                    args = json.dumps(call.get("args", {}), default=str)
                    events.append(mk("content", _NAME, content_type="tool", text=args))
            reason = _str(candidate.get("finishReason"))
            if reason:
                finish.append(reason)
        u = _obj(obj.get("usageMetadata"))
        usage = _usage(u.get("promptTokenCount"), _output_tokens(u), u.get("thoughtsTokenCount"))
        blocked = _str(_obj(obj.get("promptFeedback")).get("blockReason"))
        if finish or blocked:
            text = f"finishReason={','.join(finish)}" if finish else f"blockReason={blocked}"
            events.append(mk("end", "finishReason" if finish else "blockReason", text=text))
        if not events:
            return [mk("meta", _NAME, usage=usage)]
        # The usage goes on the last event (the end, when this response finished).
        if usage is not None:
            events[-1] = replace(events[-1], usage=usage)
        return events


def _output_tokens(u: dict[str, object]) -> int | None:
    candidates = _int(u.get("candidatesTokenCount"))
    thoughts = _int(u.get("thoughtsTokenCount"))
    if candidates is None and thoughts is None:
        return None
    return (candidates or 0) + (thoughts or 0)


# -- the reference endpoint (promptpath serve) --------------------------------------------
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


# -- the request --------------------------------------------------------------------------
def body(options: RunOptions) -> JSON:
    """google-genai 3.6.1, observed on loopback: the model is in the path, the stream is
    asked for by the path (:streamGenerateContent?alt=sse), not by the body."""
    return {
        "contents": [{"parts": [{"text": options.prompt}], "role": "user"}],
        "generationConfig": {"maxOutputTokens": options.max_tokens},
    }


#: google-genai 3.6.1 sends its User-Agent as x-goog-api-client too.
_GENAI = f"google-genai-sdk/3.6.1 gl-python/{platform.python_version()}"

#: google-genai 3.6.1 (_api_client.py append_library_version_headers) on httpx2, observed
#: on loopback: "user-agent" and "x-goog-api-client" both "google-genai-sdk/3.6.1
#: gl-python/3.11.7" (the Python version is this machine's, as the SDK's would be),
#: "Accept: */*", "Accept-Encoding: gzip, deflate", HTTP/1.1.
GOOGLE_GENAI = httpx_client(
    "google-genai", _GENAI, accept="*/*", extra=(("x-goog-api-client", _GENAI),)
)


#: Vertex AI: /v1/projects/P/locations/L/publishers/google/models/M:streamGenerateContent.
#: Its paths end as AI Studio's do, so Vertex's pattern lives here, beside Gemini's, which
#: it overrules (vertex.py).
VERTEX_PATH = re.compile(r"/projects/[^/]+/locations/[^/]+/publishers/google/models/[^/:]+:")

SPEC = DialectSpec(
    name="gemini",
    title="Gemini API",
    # AI Studio: /v1beta/models/M:streamGenerateContent (google-genai 3.6 says /v1/), and
    # a tuned model's /v1beta/tunedModels/M:streamGenerateContent
    path_patterns=(re.compile(r"/(?:models|tunedModels)/[^/:]+:streamGenerateContent$"),),
    path_excludes=(VERTEX_PATH,),
    # Gemini names the model in the URL; the default is for a URL that does not.
    model_in_path=model_named_in_path,
    default_model="gemini-2.5-flash",
    # google-genai 3.6.1 _api_client.get_env_api_key: GOOGLE_API_KEY wins when both are
    # set (it warns), GEMINI_API_KEY otherwise.
    key_env="GOOGLE_API_KEY",
    key_fallbacks=("GEMINI_API_KEY",),
    key_header="x-goog-api-key",
    client="google-genai",
    shapes=(GOOGLE_GENAI,),
    body=body,
    decoder=GeminiDecoder,
    otel_provider="gcp.gemini",
    otel_operation="generate_content",
    emulation=GenerateContent,
    docs=(
        DocRow(
            detection="`…/models/M:streamGenerateContent` or `…/tunedModels/M:…` (AI Studio,"
            " `/v1beta/` or `/v1/`)",
            auth="`x-goog-api-key`",
            keys="`GOOGLE_API_KEY`, else `GEMINI_API_KEY` (google-genai's order)",
            end="a `finishReason` (or a prompt's `blockReason`), then EOF",
        ),
    ),
)
