"""Amazon Bedrock's ``POST /model/{id}/invoke-with-response-stream``, one plug-in.

The model's own streaming format inside AWS event-stream messages (bedrock.py frames and
reads them): each ``chunk`` event's payload is ``{"bytes": BASE64}``, and the bytes are one
native event (Anthropic's Messages events for Claude, read as anthropic.py reads them).
Bedrock adds ``amazon-bedrock-invocationMetrics`` (token counts, ``invocationLatency``) to
the last chunk, whatever the model. The stream ends with the native end (Anthropic's
``message_stop``), or, for another model's payload, the chunk that carries the invocation
metrics.

The reference endpoint (``BedrockInvoke``) wraps Anthropic's events, as anthropic.py's
``Messages`` writes them without ``ping``, in ``chunk`` events of ``{"bytes": BASE64}``;
the last chunk carries ``amazon-bedrock-invocationMetrics``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import ClassVar

from promptpath.core.timeline import StreamEvent
from promptpath.dialects.anthropic import AnthropicDecoder, Messages
from promptpath.dialects.bedrock import SPEC as CONVERSE
from promptpath.dialects.bedrock import (
    AwsEvent,
    GuardrailMode,
    _Bedrock,
    _BedrockEndpoint,
)
from promptpath.dialects.spec import JSON, DocRow, Headers
from promptpath.options import RunOptions
from promptpath.server.dialect import (
    Event,
    Finish,
    JSONObject,
    RequestParams,
)
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
    "BedrockInvoke",
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


# -- the reference endpoint (promptpath serve) --------------------------------------------
class BedrockInvoke(_BedrockEndpoint):
    """``POST /model/{id}/invoke-with-response-stream`` with Claude's native events."""

    name: ClassVar[str] = "bedrock-invoke"

    def __init__(self, info: object) -> None:
        super().__init__(info)  # type: ignore[arg-type]
        self._native = Messages(self.info)

    @classmethod
    def parse_request(cls, body: object) -> RequestParams:
        if isinstance(body, dict) and "model" in body:
            body = {k: v for k, v in body.items() if k != "model"}  # the path names it
        return super().parse_request(body)

    @classmethod
    def guardrail(cls, body: object, headers: Mapping[str, str]) -> GuardrailMode | None:
        if not headers.get("x-amzn-bedrock-guardrailidentifier"):
            return None
        config = body.get("amazon-bedrock-guardrailConfig") if isinstance(body, dict) else None
        mode = config.get("streamProcessingMode") if isinstance(config, dict) else None
        return "async" if mode == "asynchronous" else "sync"

    @staticmethod
    def _chunks(events: list[Event]) -> list[Event]:
        return [
            AwsEvent(e.data, name="chunk", content=e.content, chunk=True)
            for e in events
            if not (isinstance(e.data, dict) and e.data.get("type") == "ping")
        ]

    def opening(self) -> list[Event]:
        return self._chunks(self._native.opening())

    def token(self, text: str) -> Event:
        return self._chunks([self._native.token(text)])[0]

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        events = self._chunks(self._native.closing(finish, output_tokens, elapsed_ns))
        last = events[-1]
        assert isinstance(last.data, dict)
        metrics = {
            "inputTokenCount": self.info.params.prompt_tokens,
            "outputTokenCount": output_tokens,
            "invocationLatency": elapsed_ns // 1_000_000,
            "firstByteLatency": 0,
        }
        events[-1] = AwsEvent(
            {**last.data, "amazon-bedrock-invocationMetrics": metrics}, name="chunk", chunk=True
        )
        return events

    def malformed(self) -> Event:
        return AwsEvent('{"bytes":"eyJ0eXBlIjoiY29udGVudF9ibG9ja19kZWx0YSIs', name="chunk")

    def complete(
        self, text: str, finish: Finish, output_tokens: int, elapsed_ns: int
    ) -> JSONObject:
        return self._native.complete(text, finish, output_tokens, elapsed_ns)


# -- the request --------------------------------------------------------------------------
#: The "anthropic_version" Claude on Bedrock's invoke APIs requires in the body.
BEDROCK_ANTHROPIC_VERSION = "bedrock-2023-05-31"


def body(options: RunOptions) -> JSON:
    """invoke_model_with_response_stream sends the body the caller wrote, verbatim:
    Anthropic's Messages body as Bedrock takes it (anthropic_version, no model); an
    asynchronous guardrail's mode rides in it too."""
    fields: JSON = {
        "anthropic_version": BEDROCK_ANTHROPIC_VERSION,
        "max_tokens": options.max_tokens,
        "messages": [{"role": "user", "content": options.prompt}],
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
    extra_headers=headers,
    decoder=BedrockInvokeDecoder,
    emulation=BedrockInvoke,
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
