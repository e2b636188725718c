"""Bedrock on the reference endpoint (``BedrockConverse``; ``_BedrockEndpoint`` for both APIs):
it frames its events with ``streams/eventstream.py``: ``messageStart``, a
``contentBlockDelta`` per token, ``contentBlockStop``, ``messageStop`` and ``metadata``
(usage and ``metrics.latencyMs``: the server's own time from the request to the end).
Payloads carry a ``p`` padding field as Bedrock's do; errors inside the stream are
``:message-type exception`` messages (the ``error-type`` control picks the exception). A
guardrail in the request (converse's ``guardrailConfig``, invoke's ``X-Amzn-Bedrock-
GuardrailIdentifier``) in its default synchronous streaming mode holds the answer back and
releases it in scanned batches (``GUARDRAIL_BATCH`` tokens); the asynchronous mode
(``streamProcessingMode: async``) streams as it goes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal

from promptpath.core.media import EVENTSTREAM
from promptpath.dialects.bedrock import SIGNING_NAME
from promptpath.server.dialect import (
    Dialect,
    ErrorReply,
    Event,
    Finish,
    JSONObject,
    marked_words,
    stamped,
)
from promptpath.streams.eventstream import encode_message

__all__ = [
    "CONVERSE_EXCEPTIONS",
    "DEFAULT_EXCEPTION",
    "EXCEPTIONS",
    "GUARDRAIL_BATCH",
    "INVOKE_EXCEPTIONS",
    "AwsEvent",
    "BedrockConverse",
]


#: The exceptions Bedrock's streams send mid-stream, as botocore 1.44.8's service model
#: lists them (ConverseStreamOutput; invoke's ResponseStream adds modelTimeoutException),
#: and the ``error-type`` control picks; boto3 names one outside the model with an empty code.
EXCEPTIONS: dict[str, str] = {
    "throttlingException": "Too many requests, please wait before trying again.",
    "modelStreamErrorException": "The model stream failed.",
    "validationException": "The model returned an invalid response.",
    "internalServerException": "The server encountered an internal error.",
    "serviceUnavailableException": "The service is unavailable. Try again later.",
    "modelTimeoutException": "The model took too long to respond.",
}
DEFAULT_EXCEPTION = "modelStreamErrorException"
CONVERSE_EXCEPTIONS = tuple(sorted(set(EXCEPTIONS) - {"modelTimeoutException"}))
INVOKE_EXCEPTIONS = tuple(sorted(EXCEPTIONS))

#: Tokens a synchronous guardrail releases at once (each batch scanned, then sent).
GUARDRAIL_BATCH = 8

_STOP: dict[Finish, str] = {"stop": "end_turn", "length": "max_tokens"}

#: Errors before the stream: status -> (x-amzn-ErrorType, message), as Bedrock answers.
_ERRORS: dict[int, tuple[str, str]] = {
    400: (
        "ValidationException",
        "Malformed input request, please reformat your input and try again.",
    ),
    403: (
        "AccessDeniedException",
        "You don't have access to the model with the specified model ID.",
    ),
    404: (
        "ResourceNotFoundException",
        "Could not resolve the foundation model from the model identifier.",
    ),
    408: ("ModelTimeoutException", "Model has timed out in processing the request."),
    424: ("ModelErrorException", "The model returned an error."),
    429: ("ThrottlingException", "Too many requests, please wait before trying again."),
    500: ("InternalServerException", "The server encountered an internal error."),
    503: ("ServiceUnavailableException", "The service is unavailable. Try again later."),
}

GuardrailMode = Literal["sync", "async"]


@dataclass(frozen=True, slots=True)
class AwsEvent(Event):
    """An event-stream message: an event (``chunk``: its data base64-wrapped) or an
    exception named by ``name``."""

    exception: bool = False
    chunk: bool = False


def _padding(seq: int) -> str:
    """Bedrock pads payloads with ``p`` (random letters against length side channels)."""
    return "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"[: 1 + seq * 7 % 40]


def _encode_event(event: Event, *, seq: int, sent_unix_ns: int, report: JSONObject | None) -> bytes:
    data = event.data
    if isinstance(data, str):  # a deliberately broken payload, sent as it is
        payload = data.encode()
    elif isinstance(event, AwsEvent) and event.chunk:
        inner = json.dumps(
            stamped(data, seq=seq, sent_unix_ns=sent_unix_ns, report=report),
            separators=(",", ":"),
        )
        payload = json.dumps(
            {"bytes": base64.b64encode(inner.encode()).decode(), "p": _padding(seq)},
            separators=(",", ":"),
        ).encode()
    else:
        body = {**stamped(data, seq=seq, sent_unix_ns=sent_unix_ns, report=report)}
        body["p"] = _padding(seq)
        payload = json.dumps(body, separators=(",", ":")).encode()
    name = event.name or "event"
    if isinstance(event, AwsEvent) and event.exception:
        headers: list[tuple[str, str | int | bool | bytes]] = [
            (":exception-type", name),
            (":content-type", "application/json"),
            (":message-type", "exception"),
        ]
    else:
        headers = [
            (":event-type", name),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ]
    return encode_message(list(headers), payload)


class _BedrockEndpoint(Dialect):
    media_type: ClassVar[str] = EVENTSTREAM
    stream_default: ClassVar[bool] = True  # the path asks for the stream
    model_in_path: ClassVar[bool] = True
    guardrail_batch: ClassVar[int] = GUARDRAIL_BATCH
    sigv4_service: ClassVar[str | None] = SIGNING_NAME

    def encode(
        self, event: Event, *, seq: int, sent_unix_ns: int, report: JSONObject | None = None
    ) -> bytes:
        return _encode_event(event, seq=seq, sent_unix_ns=sent_unix_ns, report=report)

    def error(self) -> list[Event]:
        name = self.info.error_type or DEFAULT_EXCEPTION
        message = EXCEPTIONS.get(name, "The request failed.")
        data: JSONObject = {"message": message}
        if name == "modelStreamErrorException":
            data.update(originalStatusCode=500, originalMessage="model stream error")
        return [AwsEvent(data, name=name, exception=True)]

    @classmethod
    def error_reply(
        cls, status: int, message: str | None = None, *, param: str | None = None
    ) -> ErrorReply:
        kind, text = _ERRORS.get(
            status, ("InternalServerException" if status >= 500 else "ValidationException", "")
        )
        headers: tuple[tuple[str, str], ...] = (
            ("x-amzn-errortype", f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),
        )
        if status == 429:
            headers = (*headers, ("retry-after", "2"))
        return ErrorReply(body={"message": message or text or f"HTTP {status}"}, headers=headers)

    @classmethod
    def guardrail(cls, body: object, headers: Mapping[str, str]) -> GuardrailMode | None:
        """The guardrail's streaming mode when the request asks for one."""
        return None


class BedrockConverse(_BedrockEndpoint):
    """``POST /model/{id}/converse-stream``."""

    name: ClassVar[str] = "bedrock"
    max_tokens_fields = ("inferenceConfig.maxTokens",)

    @classmethod
    def _prompt_parts(cls, body: JSONObject) -> Iterable[object]:
        return (body.get("messages"), body.get("system"))

    @classmethod
    def marked_prefixes(cls, body: object) -> tuple[list[str], list[int]] | None:
        """Converse caches only what comes before a ``cachePoint`` block (system, then
        messages): an unmarked request is never cached."""
        if not isinstance(body, dict):
            return [], []
        return marked_words(
            (body.get("system"), body.get("messages")),
            lambda block: isinstance(block.get("cachePoint"), Mapping),
        )

    @classmethod
    def guardrail(cls, body: object, headers: Mapping[str, str]) -> GuardrailMode | None:
        config = body.get("guardrailConfig") if isinstance(body, dict) else None
        if not isinstance(config, dict):
            return None
        return "async" if config.get("streamProcessingMode") == "async" else "sync"

    def _usage(self, output_tokens: int) -> JSONObject:
        prompt = self.info.params.prompt_tokens
        cached = self.info.params.cached_tokens
        written = self.info.params.cache_write_tokens
        usage: JSONObject = {
            # inputTokens leaves the cache's out (TokenUsage: cacheReadInputTokens and
            # cacheWriteInputTokens apart).
            "inputTokens": prompt - cached - written,
            "outputTokens": output_tokens,
            "totalTokens": prompt + output_tokens,
        }
        if cached:  # --prefix-cache, a marked prefix read
            usage["cacheReadInputTokens"] = cached
        if written:  # --prefix-cache, a marked prefix written
            usage["cacheWriteInputTokens"] = written
        return usage

    def opening(self) -> list[Event]:
        return [AwsEvent({"role": "assistant"}, name="messageStart")]

    def token(self, text: str) -> Event:
        return AwsEvent(
            {"contentBlockIndex": 0, "delta": {"text": text}},
            name="contentBlockDelta",
            content=True,
        )

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        return [
            AwsEvent({"contentBlockIndex": 0}, name="contentBlockStop"),
            AwsEvent({"stopReason": _STOP[finish]}, name="messageStop"),
            AwsEvent(
                {
                    "usage": self._usage(output_tokens),
                    "metrics": {"latencyMs": elapsed_ns // 1_000_000},
                },
                name="metadata",
            ),
        ]

    def malformed(self) -> Event:
        return AwsEvent('{"contentBlockIndex":0,"delta":{"text":"', name="contentBlockDelta")

    def complete(
        self, text: str, finish: Finish, output_tokens: int, elapsed_ns: int
    ) -> JSONObject:
        return {
            "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
            "stopReason": _STOP[finish],
            "usage": self._usage(output_tokens),
            "metrics": {"latencyMs": elapsed_ns // 1_000_000},
        }
