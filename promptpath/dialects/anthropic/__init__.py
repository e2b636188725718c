"""Anthropic Messages (``POST /v1/messages``), one plug-in: detection, keys, model, the
request and client its SDK sends, the stream's decoder and the reference endpoint's
emulation. Bedrock's invoke-with-response-stream carries the same events
inside its chunks (bedrock_invoke/).
"""

from __future__ import annotations

from promptpath.core.timeline import ContentType, StreamEvent, Usage
from promptpath.dialects.spec import JSON, DialectSpec, DocRow, cache_split, httpx_client
from promptpath.options import RunOptions
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
    "ANTHROPIC_PYTHON",
    "ANTHROPIC_VERSION",
    "CACHE_CONTROL",
    "SPEC",
    "AnthropicDecoder",
    "content",
]


_ANTHROPIC_DELTAS: dict[str, tuple[str, ContentType]] = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "reasoning"),
    "input_json_delta": ("partial_json", "tool"),
}


class AnthropicDecoder(_Dialect):
    """``/v1/messages``: ``message_start`` … ``content_block_delta`` … ``message_stop``."""

    framing: Framing = "sse"

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        obj = _load(data)
        mk.stamp_from(obj)
        typ = _str(obj.get("type")) or sse_event
        if typ == "content_block_delta":
            delta = _obj(obj.get("delta"))
            key_kind = _ANTHROPIC_DELTAS.get(_str(delta.get("type")))
            if key_kind is not None:  # signature_delta, citations_delta: meta
                text = _str(delta.get(key_kind[0]))
                if text:
                    return [mk("content", typ, content_type=key_kind[1], text=text)]
            return [mk("meta", typ)]
        if typ == "content_block_start":
            block = _obj(obj.get("content_block"))
            btype = _str(block.get("type"))
            if btype.endswith("tool_use"):  # tool_use, server_tool_use, mcp_tool_use
                return [mk("content", typ, content_type="tool")]
            if btype == "text" and _str(block.get("text")):
                return [mk("content", typ, content_type="text", text=_str(block.get("text")))]
            if btype == "thinking" and _str(block.get("thinking")):
                text = _str(block.get("thinking"))
                return [mk("content", typ, content_type="reasoning", text=text)]
            return [mk("meta", typ)]
        if typ == "message_start":
            u = _obj(_obj(obj.get("message")).get("usage"))
            # output_tokens here is a placeholder (usually 1); message_delta has the count.
            return [mk("meta", typ, usage=_cached_usage(u, None))]
        if typ == "message_delta":
            u = _obj(obj.get("usage"))
            stop = _str(_obj(obj.get("delta")).get("stop_reason"))
            usage = _cached_usage(u, u.get("output_tokens"))
            return [mk("meta", typ, usage=usage, text=f"stop_reason={stop}" if stop else "")]
        if typ == "message_stop":
            return [mk("end", typ)]
        if typ == "error":
            return [mk("error", typ, error=_error_text(obj.get("error") or obj))]
        return [mk("meta", typ)]  # ping, content_block_stop, unknown future events


def _cached_usage(u: dict[str, object], output_tokens: object) -> Usage | None:
    """A Messages usage object: its input_tokens leave the prompt cache's reads and
    writes out (they are counted apart: cache_read_input_tokens,
    cache_creation_input_tokens), unlike OpenAI's, which include them."""
    return _usage(
        u.get("input_tokens"),
        output_tokens,
        cached=u.get("cache_read_input_tokens"),
        cache_write=u.get("cache_creation_input_tokens"),
        cached_apart=True,
    )


# -- the request --------------------------------------------------------------------------
ANTHROPIC_VERSION = "2023-06-01"


#: Prompt caching's mark on a content block: the prefix up to and including the block is
#: cached (for 5 minutes; the anthropic SDK's ``CacheControlEphemeralParam``).
CACHE_CONTROL: JSON = {"type": "ephemeral"}


def content(options: RunOptions) -> str | list[JSON]:
    """The user turn's content: the prompt as one string, as the SDK's callers mostly
    write it; with a prefix to cache (``cache_prefix``), text blocks, the prefix's
    carrying ``cache_control`` (a string content cannot be marked). Bedrock's invoke of
    Claude takes the same (bedrock_invoke/)."""
    split = cache_split(options)
    if split is None:
        return options.prompt
    head, rest = split
    blocks: list[JSON] = [{"type": "text", "text": head, "cache_control": dict(CACHE_CONTROL)}]
    if rest:
        blocks.append({"type": "text", "text": rest})
    return blocks


def body(options: RunOptions) -> JSON:
    return {
        "model": options.model,
        "messages": [{"role": "user", "content": content(options)}],
        "max_tokens": options.max_tokens,
        "stream": True,
    }


#: anthropic 2.14.0: the same Stainless base client as openai's ("Anthropic/Python" +
#: version) on httpx2 2.16.2; observed: the same Accept and Accept-Encoding, HTTP/1.1.
ANTHROPIC_PYTHON = httpx_client("anthropic-python", "Anthropic/Python 2.14.0")


SPEC = DialectSpec(
    name="anthropic",
    title="Anthropic Messages",
    path_suffixes=("/messages",),
    default_model="claude-3-5-haiku-latest",
    key_env="ANTHROPIC_API_KEY",
    key_header="x-api-key",
    client="anthropic-python",
    shapes=(ANTHROPIC_PYTHON,),
    body=body,
    cache_mark="cache_control",
    version_headers=(("anthropic-version", ANTHROPIC_VERSION),),
    decoder=AnthropicDecoder,
    otel_provider="anthropic",
    emulation="Messages",
    demo_path="/v1/messages",
    docs=(
        DocRow(
            detection="ends in `/messages`",
            auth="`x-api-key`",
            keys="`ANTHROPIC_API_KEY`",
            end="`message_stop`",
        ),
    ),
)
