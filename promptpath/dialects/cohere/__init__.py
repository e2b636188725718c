"""Cohere v2 ``POST /v2/chat`` (``"stream": true``), one plug-in: detection, keys, model,
the request and client its SDK sends, the stream's decoder and the reference endpoint's
emulation.

Named SSE events whose data repeats the name in ``type``::

    event: message-start   {"id": ..., "type": "message-start", "delta": {"message": {"role": ...}}}
    event: content-start   {"type": "content-start", "index": 0,
                            "delta": {"message": {"content": {"type": "text", "text": ""}}}}
    event: content-delta   {"type": "content-delta", "index": 0,
                            "delta": {"message": {"content": {"text": "Hel"}}}}
    event: content-end     {"type": "content-end", "index": 0}
    event: message-end     {"type": "message-end", "delta": {"finish_reason": "COMPLETE",
                            "usage": {"billed_units": {...}, "tokens": {...}}}}

What surprises people (read in cohere 7.3.1's ``v2/raw_client.py`` and its types, and
checked on loopback with that SDK):

- The end is ``message-end``; the SDK also stops at a ``data: [DONE]`` line, so that is an
  end too. A body that ends without either was cut (truncated).
- A failure mid-stream is not an exception in the SDK: it hands the application a
  ``message-end`` whose ``delta.error`` holds the message and whose ``finish_reason`` is
  ``ERROR`` (``TIMEOUT`` when the generation ran out of time). The answer is then
  incomplete: an in-band error here, with the usage it carries kept.
- ``content.thinking`` (a ``thinking`` content block) is reasoning; ``tool-plan-delta``'s
  ``tool_plan`` is the model's plan for its tool calls, reasoning too, not the answer;
  ``tool-call-start`` / ``tool-call-delta`` carry a call and its argument text.
- ``usage.tokens`` counts what the model read and wrote; ``usage.billed_units`` what was
  billed (the same or fewer): the first is the token count, the second its fallback.
  The SDK types the counts as floats; the API sends whole numbers.
- An event whose ``type`` the SDK does not know (``citation-*`` aside, which it knows) is
  skipped with a warning: here it is ``meta``.
"""

from __future__ import annotations

import re

from promptpath.core.timeline import StreamEvent
from promptpath.dialects.spec import JSON, DialectSpec, DocRow, httpx_client
from promptpath.options import RunOptions
from promptpath.streams.dialect_base import (
    Framing,
    _Dialect,
    _load,
    _Maker,
    _obj,
    _str,
    _usage,
)

__all__ = [
    "COHERE_SDK",
    "SPEC",
    "CohereDecoder",
    "cohere_usage",
]

#: ``finish_reason`` values that mean the generation failed (the SDK's ChatFinishReason).
FAILED = frozenset({"ERROR", "TIMEOUT"})


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def cohere_usage(delta: dict[str, object]) -> tuple[object, object]:
    """(input, output) tokens of a ``message-end`` as sent: ``tokens``, else
    ``billed_units`` (``_usage`` judges them: the SDK types them as floats)."""
    usage = _obj(delta.get("usage"))
    tokens, billed = _obj(usage.get("tokens")), _obj(usage.get("billed_units"))
    found_in, found_out = tokens.get("input_tokens"), tokens.get("output_tokens")
    if not _number(found_in):
        found_in = billed.get("input_tokens")
    if not _number(found_out):
        found_out = billed.get("output_tokens")
    return found_in, found_out


class CohereDecoder(_Dialect):
    """``/v2/chat``: ``message-start`` … ``content-delta`` … ``message-end``."""

    framing: Framing = "sse"

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        if data.strip() == "[DONE]":
            return [mk("end", "[DONE]")]
        obj = _load(data)
        mk.stamp_from(obj)
        typ = _str(obj.get("type")) or sse_event
        delta = _obj(obj.get("delta"))
        message = _obj(delta.get("message"))
        if typ in ("content-delta", "content-start"):
            block = _obj(message.get("content"))
            events: list[StreamEvent] = []
            thinking = _str(block.get("thinking"))
            if thinking:
                events.append(mk("content", typ, content_type="reasoning", text=thinking))
            text = _str(block.get("text"))
            if text:
                events.append(mk("content", typ, content_type="text", text=text))
            return events or [mk("meta", typ)]
        if typ == "tool-plan-delta":
            plan = _str(message.get("tool_plan"))
            if plan:
                return [mk("content", typ, content_type="reasoning", text=plan)]
            return [mk("meta", typ)]
        if typ in ("tool-call-start", "tool-call-delta"):
            # tool-call-start names the call (like a tool_calls first chunk); the deltas
            # carry its argument text.
            fn = _obj(_obj(message.get("tool_calls")).get("function"))
            args = _str(fn.get("arguments"))
            if typ == "tool-call-start" or args:
                return [mk("content", typ, content_type="tool", text=args)]
            return [mk("meta", typ)]
        if typ == "message-end":
            usage = _usage(*cohere_usage(delta))
            reason = _str(delta.get("finish_reason"))
            error = _str(delta.get("error"))
            if error or reason in FAILED:
                said = f"{reason}: {error}" if reason and error else error or reason
                return [mk("error", typ, error=said, usage=usage)]
            return [mk("end", typ, usage=usage, text=f"finish_reason={reason}" if reason else "")]
        return [mk("meta", typ)]  # message-start, content-end, citation-*, debug, unknown


# -- the request --------------------------------------------------------------------------
def body(options: RunOptions) -> JSON:
    """cohere 7.3.1 ClientV2.chat_stream, observed on loopback: the fields not given are
    left out, "stream": true last."""
    return {
        "model": options.model,
        "messages": [{"role": "user", "content": options.prompt}],
        "max_tokens": options.max_tokens,
        "stream": True,
    }


#: cohere 7.3.1 (core/client_wrapper.py get_headers) on httpx 0.28, observed on loopback:
#: "User-Agent: cohere/7.3.1", "Accept: */*", "Accept-Encoding: gzip, deflate", HTTP/1.1,
#: and Fern's X-Fern-* build headers. Those naming the SDK are sent; X-Fern-Runtime and
#: X-Fern-Platform (this machine's Python and kernel release) are left out.
COHERE_SDK = httpx_client(
    "cohere",
    "cohere/7.3.1",
    accept="*/*",
    extra=(
        ("x-fern-language", "Python"),
        ("x-fern-sdk-name", "cohere"),
        ("x-fern-sdk-version", "7.3.1"),
    ),
)


SPEC = DialectSpec(
    name="cohere",
    title="Cohere v2 chat",
    # api.cohere.com, api.cohere.ai, or a gateway's prefix
    path_patterns=(re.compile(r"/v2/chat$"),),
    default_model="command-a-03-2025",
    # cohere 7.3.1 client.py _get_api_key_from_environment: CO_API_KEY (documented), then
    # COHERE_API_KEY (accepted, not documented).
    key_env="CO_API_KEY",
    key_fallbacks=("COHERE_API_KEY",),
    client="cohere",
    shapes=(COHERE_SDK,),
    body=body,
    decoder=CohereDecoder,
    otel_provider="cohere",
    emulation="CohereChat",
    docs=(
        DocRow(
            detection="ends in `/v2/chat` (`api.cohere.com`, `api.cohere.ai`)",
            auth="`Authorization: Bearer`",
            keys="`CO_API_KEY`, else `COHERE_API_KEY` (the cohere SDK's order)",
            end="`message-end`",
        ),
    ),
)
