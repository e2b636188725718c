"""Amazon Bedrock's Converse API (``converse-stream``), one plug-in; and what Bedrock's two
streaming APIs share: AWS event-stream messages, their exceptions, the path's model id.

``POST /model/{id}/converse-stream`` (the model-neutral Converse API) sends one message per
event, its name in the ``:event-type`` header and its JSON in the payload::

    messageStart {"role": "assistant"}
    contentBlockStart {"contentBlockIndex": 1, "start": {"toolUse": {...}}}   (tool calls)
    contentBlockDelta {"contentBlockIndex": 0, "delta": {"text": "Hel"}}
    contentBlockStop {"contentBlockIndex": 0}
    messageStop {"stopReason": "end_turn"}
    metadata {"usage": {"inputTokens", "outputTokens", ...}, "metrics": {"latencyMs": 412}}

``POST /model/{id}/invoke-with-response-stream`` carries the model's own streaming format:
each ``chunk`` event's payload is ``{"bytes": BASE64}``, and the bytes are one native event
(Anthropic's Messages events for Claude): its plug-in is bedrock_invoke.py. Bedrock adds
``amazon-bedrock-invocationMetrics`` (token counts, ``invocationLatency``) to the last
chunk, whatever the model.

What surprises people:

- The end is two events: ``messageStop`` and then ``metadata`` (usage, the server's own
  ``latencyMs``). A stream without both was cut: truncated, whatever the transport said.
  ``invoke-with-response-stream`` ends with the native end (Anthropic's ``message_stop``),
  or, for another model's payload, the chunk that carries the invocation metrics.
- Errors inside the 200 are messages with ``:message-type`` ``exception`` and the name in
  ``:exception-type`` (``throttlingException``, ``modelStreamErrorException``,
  ``validationException``, ``internalServerException``, ``serviceUnavailableException``,
  ``modelTimeoutException``), their payload ``{"message": ...}``; boto3 raises
  ``EventStreamError`` on them. ``:message-type`` ``error`` (``:error-code``,
  ``:error-message`` headers) is the framing layer's own error.
- Payloads carry a ``p`` field of random padding (against length side channels): ignored.

The reference endpoint (``BedrockConverse``; ``_BedrockEndpoint`` for both APIs) frames its
events with ``streams/eventstream.py``: ``messageStart``, a ``contentBlockDelta`` per token,
``contentBlockStop``, ``messageStop`` and ``metadata`` (usage and ``metrics.latencyMs``: the
server's own time from the request to the end). Payloads carry a ``p`` padding field as
Bedrock's do; errors inside the stream are ``:message-type exception`` messages (the
``error-type`` control picks the exception). A guardrail in the request (converse's
``guardrailConfig``, invoke's ``X-Amzn-Bedrock-GuardrailIdentifier``) in its default
synchronous streaming mode holds the answer back and releases it in scanned batches
(``GUARDRAIL_BATCH`` tokens); the asynchronous mode (``streamProcessingMode: async``)
streams as it goes.
"""

from __future__ import annotations

import base64
import json
import platform
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal
from urllib.parse import unquote

from promptpath.core.media import EVENTSTREAM
from promptpath.core.timeline import ContentType, EventKind, StreamEvent
from promptpath.dialects.spec import JSON, ClientShape, DialectSpec, DocRow
from promptpath.options import RunOptions
from promptpath.server.dialect import (
    Dialect,
    ErrorReply,
    Event,
    Finish,
    JSONObject,
    stamped,
)
from promptpath.streams.dialect_base import (
    Frame,
    Framing,
    MalformedEvent,
    _int,
    _load,
    _Maker,
    _obj,
    _str,
    _usage,
)
from promptpath.streams.eventstream import EventStreamMessage, encode_message

__all__ = [
    "BOTO3",
    "CONVERSE_EXCEPTIONS",
    "EXCEPTIONS",
    "GUARDRAIL_BATCH",
    "INVOKE_EXCEPTIONS",
    "SIGNING_NAME",
    "SPEC",
    "AwsEvent",
    "BedrockConverse",
    "BedrockConverseDecoder",
    "model_in_path",
    "region_from_host",
    "synchronous_guardrail",
]

#: The signing name of bedrock-runtime (botocore's service model: signingName "bedrock").
SIGNING_NAME = "bedrock"


def _message(frame: Frame) -> EventStreamMessage:
    if not isinstance(frame, EventStreamMessage):  # the decoder pairs framings: a bug
        raise TypeError(f"a Bedrock stream is framed as AWS event stream, not {type(frame)}")
    return frame


def _exception(msg: EventStreamMessage, mk: _Maker) -> list[StreamEvent] | None:
    """The in-band error a message is, if it is one."""
    kind = msg.message_type
    if kind == "exception":
        name = msg.string(":exception-type") or "exception"
        try:
            obj = _load(msg.text)
        except MalformedEvent:
            obj = {}
        mk.stamp_from(obj)
        text = _str(obj.get("message")) or _str(obj.get("Message")) or msg.text[:200]
        original = _int(obj.get("originalStatusCode"))
        if original is not None:  # modelStreamErrorException: the model's own status
            text += f" (model status {original})"
        return [mk("error", name, error=f"{name}: {text}" if text else name)]
    if kind == "error":
        code = msg.string(":error-code") or "error"
        text = msg.string(":error-message")
        return [mk("error", code, error=f"{code}: {text}" if text else code)]
    return None


class _Bedrock:
    framing: Framing = "eventstream"

    def decode(self, frame: Frame, *, read_index: int = -1) -> list[StreamEvent]:
        msg = _message(frame)
        mk = _Maker(msg.t_ns, read_index)
        failed = _exception(msg, mk)
        if failed is not None:
            return failed
        name = msg.string(":event-type")
        if msg.message_type != "event" or not name:
            return [mk("meta", name or msg.message_type or "message")]
        obj = _load(msg.text)
        mk.stamp_from(obj)
        return self._event(name, obj, mk)

    def _event(self, name: str, obj: dict[str, object], mk: _Maker) -> list[StreamEvent]:
        raise NotImplementedError


_DELTAS: tuple[tuple[str, str, ContentType], ...] = (
    ("text", "", "text"),
    ("reasoningContent", "text", "reasoning"),
    ("toolUse", "input", "tool"),
)


class BedrockConverseDecoder(_Bedrock):
    """``/model/{id}/converse-stream``: messageStop then metadata end the stream."""

    def __init__(self) -> None:
        self._stopped = False

    def _event(self, name: str, obj: dict[str, object], mk: _Maker) -> list[StreamEvent]:
        if name == "contentBlockDelta":
            delta = _obj(obj.get("delta"))
            for key, inner, content_type in _DELTAS:
                value = delta.get(key)
                text = _str(_obj(value).get(inner)) if inner else _str(value)
                if text or (key == "toolUse" and isinstance(value, dict)):
                    return [mk("content", name, content_type=content_type, text=text)]
            return [mk("meta", name)]  # a reasoning signature, a citation
        if name == "contentBlockStart":
            if isinstance(_obj(obj.get("start")).get("toolUse"), dict):
                return [mk("content", name, content_type="tool")]  # the call starts
            return [mk("meta", name)]
        if name == "messageStop":
            self._stopped = True
            reason = _str(obj.get("stopReason"))
            return [mk("meta", name, text=f"stopReason={reason}" if reason else "")]
        if name == "metadata":
            u = _obj(obj.get("usage"))
            usage = _usage(u.get("inputTokens"), u.get("outputTokens"))
            latency = _obj(obj.get("metrics")).get("latencyMs")
            server_ms = float(latency) if isinstance(latency, int | float) else None
            kind: EventKind = "end" if self._stopped else "meta"
            return [mk(kind, name, usage=usage, server_ms=server_ms)]
        return [mk("meta", name)]  # messageStart, contentBlockStop, future events


#: Bedrock's model id (or an ARN, its slashes encoded): percent-encoded in the path.
_MODEL = re.compile(r"/model/([^/?]+)/(?:converse-stream|invoke-with-response-stream)")
#: bedrock-runtime.REGION.amazonaws.com (and -fips, and the .com.cn partition)
_HOST = re.compile(r"^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")


def model_in_path(path: str) -> str | None:
    """The model id a Bedrock path names (either API's), decoded as boto3 encoded it."""
    found = _MODEL.search(path.split("?", 1)[0])
    return unquote(found.group(1)) if found else None


def region_from_host(host: str) -> str | None:
    """The AWS region a Bedrock runtime host name carries, if it carries one."""
    found = _HOST.match(host.lower())
    return found.group(1) if found else None


# -- the reference endpoint (promptpath serve) --------------------------------------------
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
    def guardrail(cls, body: object, headers: Mapping[str, str]) -> GuardrailMode | None:
        config = body.get("guardrailConfig") if isinstance(body, dict) else None
        if not isinstance(config, dict):
            return None
        return "async" if config.get("streamProcessingMode") == "async" else "sync"

    def _usage(self, output_tokens: int) -> JSONObject:
        prompt = self.info.params.prompt_tokens
        return {
            "inputTokens": prompt,
            "outputTokens": output_tokens,
            "totalTokens": prompt + output_tokens,
        }

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


# -- the request --------------------------------------------------------------------------
def body(options: RunOptions) -> JSON:
    """boto3 1.44.8 converse_stream(modelId=M, messages=[...], inferenceConfig=...),
    observed on loopback: the model is in the path, the body only this (and the
    guardrail's guardrailConfig when --guardrail asks for one)."""
    fields: JSON = {
        "messages": [{"role": "user", "content": [{"text": options.prompt}]}],
        "inferenceConfig": {"maxTokens": options.max_tokens},
    }
    rail = options.guardrail
    if rail is not None:
        fields["guardrailConfig"] = {
            "guardrailIdentifier": rail.identifier,
            "guardrailVersion": rail.version,
            "streamProcessingMode": rail.mode,
        }
    return fields


def synchronous_guardrail(options: RunOptions) -> bool:
    """A guardrail in synchronous streaming mode (--guardrail, or its header given with
    -H): Bedrock scans the answer in batches and releases each after its scan."""
    if options.guardrail is not None:
        return options.guardrail.mode == "sync"
    return any(n.lower() == "x-amzn-bedrock-guardrailidentifier" for n, _ in options.headers)


#: boto3 1.44.8 / botocore 1.44.8 (bedrock-runtime converse_stream and
#: invoke_model_with_response_stream), observed on loopback: no Accept header at all
#: (invoke adds X-Amzn-Bedrock-Accept), "Accept-Encoding: identity" (urllib3 through
#: http.client), HTTP/1.1 only, and a User-Agent of SDK, OS, language and config
#: tokens. Left out: the per-call feature list (m/...) and amz-sdk-invocation-id /
#: amz-sdk-request (retry bookkeeping no hop treats a stream by).
BOTO3 = ClientShape(
    name="boto3",
    user_agent=(
        "Boto3/1.44.8 md/Botocore#1.44.8 ua/2.1"
        f" os/{platform.system().lower()}#{platform.release()}"
        f" md/arch#{platform.machine().lower()} lang/python#{platform.python_version()}"
        " md/pyimpl#CPython cfg/retry-mode#standard Botocore/1.44.8"
    ),
    accept="",
    encodings=("identity",),
    http="1.1",
)


SPEC = DialectSpec(
    name="bedrock",
    title="Amazon Bedrock",
    # bedrock-runtime.REGION.amazonaws.com: /model/{id}/converse-stream, the id
    # percent-encoded as boto3 sends it
    path_patterns=(re.compile(r"/model/[^/]+/converse-stream$"),),
    # Bedrock names the model in the path; the default is for a URL that does not.
    model_in_path=model_in_path,
    default_model="anthropic.claude-3-5-haiku-20241022-v1:0",
    # A Bedrock API key (botocore 1.39+ sends it as a bearer token); without one the
    # request is signed with SigV4 from the AWS credentials (options.AwsCredentials).
    key_env="AWS_BEARER_TOKEN_BEDROCK",
    sigv4_service=SIGNING_NAME,
    client="boto3",
    shapes=(BOTO3,),
    body=body,
    stream_type=EVENTSTREAM,
    guardrails=True,
    holds_answer=synchronous_guardrail,
    decoder=BedrockConverseDecoder,
    otel_provider="aws.bedrock",
    emulation=BedrockConverse,
    docs=(
        DocRow(
            detection="`…/model/ID/converse-stream` (host `bedrock-runtime.REGION.amazonaws.com`)",
            auth="SigV4 (`Authorization: AWS4-HMAC-SHA256 …`, service `bedrock`), or a Bedrock"
            " API key as `Authorization: Bearer`",
            keys="`AWS_BEARER_TOKEN_BEDROCK`; else `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/"
            "`AWS_SESSION_TOKEN`, `AWS_PROFILE` and the shared files; region from the host, else"
            " `AWS_REGION`/`AWS_DEFAULT_REGION`/the profile",
            end="`messageStop` then `metadata`",
        ),
    ),
)
