"""Amazon Bedrock's ``POST /model/{id}/invoke-with-response-stream``, one plug-in.

The model's own streaming format inside AWS event-stream messages (bedrock/ frames and
reads them): each ``chunk`` event's payload is ``{"bytes": BASE64}``, and the bytes are one
native event (Anthropic's Messages events for Claude, read as anthropic/ reads them).
Bedrock adds ``amazon-bedrock-invocationMetrics`` (token counts, ``invocationLatency``) to
the last chunk, whatever the model. The stream ends with the native end (Anthropic's
``message_stop``), or, for another model's payload, the chunk that carries the invocation
metrics.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import replace

from promptpath.core.timeline import StreamEvent
from promptpath.dialects.anthropic import AnthropicDecoder, content
from promptpath.dialects.bedrock import SPEC as CONVERSE
from promptpath.dialects.bedrock import _Bedrock
from promptpath.dialects.spec import JSON, DocRow, Headers
from promptpath.options import RunOptions
from promptpath.streams.dialect_base import (
    MalformedEvent,
    _load,
    _Maker,
    _obj,
    _str,
    _usage,
)

__all__ = [
    "SPEC",
    "BedrockInvokeDecoder",
]

#: Where an invoke stream's last chunk puts Bedrock's own account of the invocation.
INVOCATION_METRICS = "amazon-bedrock-invocationMetrics"


class BedrockInvokeDecoder(_Bedrock):
    """``/model/{id}/invoke-with-response-stream``: native events inside ``chunk``s."""

    def __init__(self) -> None:
        self._anthropic = AnthropicDecoder()

    def _event(self, name: str, obj: dict[str, object], mk: _Maker) -> list[StreamEvent]:
        if name != "chunk":
            return [mk("meta", name)]
        raw = _str(obj.get("bytes"))
        try:
            inner = base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise MalformedEvent(raw, f"chunk bytes are not base64 of UTF-8 ({exc})") from exc
        native = _load(inner)
        metrics = _obj(native.get(INVOCATION_METRICS))
        if _str(native.get("type")):
            events = self._anthropic._decode("", inner, mk)
        else:  # another model's payload: no tokens read from it
            mk.stamp_from(native)
            events = [mk("meta", "chunk")]
        if not metrics:
            return events
        latency = metrics.get("invocationLatency")
        last = events[-1]
        usage = last.usage or _usage(
            metrics.get("inputTokenCount"), metrics.get("outputTokenCount")
        )
        events[-1] = replace(
            last,
            kind="end" if last.kind == "meta" else last.kind,
            usage=usage,
            server_ms=float(latency) if isinstance(latency, int | float) else None,
        )
        return events


# -- the request --------------------------------------------------------------------------
#: The "anthropic_version" Claude on Bedrock's invoke APIs requires in the body.
BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"


def body(options: RunOptions) -> JSON:
    """invoke_model_with_response_stream sends the body the caller wrote, verbatim:
    Anthropic's Messages body as Bedrock takes it (anthropic_version, no model; a prefix
    to cache marked with ``cache_control`` as on Anthropic's own API); an asynchronous
    guardrail's mode rides in it too."""
    fields: JSON = {
        "anthropic_version": BEDROCK_ANTHROPIC_VERSION,
        "max_tokens": options.max_tokens,
        "messages": [{"role": "user", "content": content(options)}],
    }
    rail = options.guardrail
    if rail is not None and rail.mode == "async":
        fields["amazon-bedrock-guardrailConfig"] = {"streamProcessingMode": "asynchronous"}
    return fields


def headers(options: RunOptions) -> Headers:
    """The ``accept`` argument of invoke_model_with_response_stream (the payloads' type),
    and its guardrailIdentifier/guardrailVersion."""
    found = [("x-amzn-bedrock-accept", "application/json")]
    if options.guardrail is not None:
        found.append(("x-amzn-bedrock-guardrailidentifier", options.guardrail.identifier))
        found.append(("x-amzn-bedrock-guardrailversion", options.guardrail.version))
    return found


#: Converse's plug-in but for the path, the body and headers, the stream and its emulation:
#: the same host, keys, SigV4, client, guardrails and telemetry name.
SPEC = replace(
    CONVERSE,
    name="bedrock-invoke",
    path_patterns=(re.compile(r"/model/[^/]+/invoke-with-response-stream$"),),
    shapes=(),  # boto3's is converse's
    body=body,
    cache_mark="cache_control",
    extra_headers=headers,
    decoder=BedrockInvokeDecoder,
    emulation="BedrockInvoke",
    docs=(
        DocRow(
            detection="`…/model/ID/invoke-with-response-stream`",
            auth="as bedrock",
            keys="as bedrock",
            end="the native end (Claude's `message_stop`), or the chunk with"
            " `amazon-bedrock-invocationMetrics`",
        ),
    ),
)
