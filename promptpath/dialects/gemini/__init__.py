"""The Gemini API (AI Studio) ``models/M:streamGenerateContent?alt=sse``, one plug-in; its
stream, decoder and emulation serve Vertex AI's too (vertex/).

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
  on it. It may come as a ``data:`` event or as that plain JSON, pretty-printed over
  several lines outside any ``data:`` line: google-genai 3.6 collects such lines until
  their braces balance (``_RawJsonLineBuffer``) and raises the same ``APIError`` (its
  code the error's ``code``), so the framer is asked to do the same (``raw_json``).
"""

from __future__ import annotations

import json
import platform
import re
from dataclasses import replace

from promptpath.core.timeline import ContentType, StreamEvent
from promptpath.dialects.spec import JSON, DialectSpec, DocRow, httpx_client, model_named_in_path
from promptpath.options import RunOptions
from promptpath.streams.dialect_base import (
    Framing,
    _Dialect,
    _int,
    _list,
    _load,
    _Maker,
    _obj,
    _str,
    _token_count,
    _usage,
)

__all__ = [
    "GOOGLE_GENAI",
    "SPEC",
    "VERTEX_PATH",
    "GeminiDecoder",
    "body",
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
    raw_json = True

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
        usage = _usage(
            u.get("promptTokenCount"),
            _output_tokens(u),
            u.get("thoughtsTokenCount"),
            cached=u.get("cachedContentTokenCount"),
        )
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


def _output_tokens(u: dict[str, object]) -> object:
    """Candidates and thoughts together; an impossible one as sent (``_usage`` flags it)."""
    raw_candidates, raw_thoughts = u.get("candidatesTokenCount"), u.get("thoughtsTokenCount")
    candidates, thoughts = _token_count(raw_candidates), _token_count(raw_thoughts)
    if candidates is False or thoughts is False:
        return raw_candidates if candidates is False else raw_thoughts
    if candidates is None and thoughts is None:
        return None
    return (candidates or 0) + (thoughts or 0)


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
#: it overrules (vertex/).
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
    emulation="GenerateContent",
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
