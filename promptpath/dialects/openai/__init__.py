"""OpenAI Chat Completions (``POST /v1/chat/completions``), one plug-in: detection, keys,
model, the request and client its SDK sends, the stream's decoder and the reference
endpoint's emulation.

Compatible servers (vLLM, llama.cpp, OpenRouter, LiteLLM...) speak it too: ``data:``-only
SSE ending in ``data: [DONE]``, a role-only chunk first (not a token), the usage in a last
chunk when ``stream_options.include_usage`` is set. Azure OpenAI (azure/) sends the same
chunks plus its content filter's.
"""

from __future__ import annotations

from dataclasses import replace

from promptpath.core.timeline import StreamEvent
from promptpath.dialects.spec import JSON, DialectSpec, DocRow, httpx_client
from promptpath.options import RunOptions
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
    "OPENAI_PYTHON",
    "SPEC",
    "OpenAIChatDecoder",
    "chat_body",
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
            # A subset of prompt_tokens (OpenAI counts cached input in the input).
            cache_read=_obj(u.get("prompt_tokens_details")).get("cached_tokens"),
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
    emulation="ChatCompletions",
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
