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
(Anthropic's Messages events for Claude): its plug-in is bedrock_invoke/. Bedrock adds
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
"""

from __future__ import annotations

import platform
import re
from urllib.parse import unquote

from promptpath.core.media import EVENTSTREAM
from promptpath.core.timeline import ContentType, EventKind, StreamEvent
from promptpath.dialects.spec import JSON, ClientShape, DialectSpec, DocRow, cache_split
from promptpath.options import RunOptions
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
from promptpath.streams.eventstream import EventStreamMessage

__all__ = [
    "BOTO3",
    "CACHE_POINT",
    "SIGNING_NAME",
    "SPEC",
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
    raw_json = False  # SSE's option: no meaning for binary messages

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
            usage = _usage(
                u.get("inputTokens"),
                u.get("outputTokens"),
                cached=u.get("cacheReadInputTokens"),
                cache_write=u.get("cacheWriteInputTokens"),
                cached_apart=True,
            )
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


# -- the request --------------------------------------------------------------------------
#: Converse's cache mark: a content block of its own, after what is to be cached.
CACHE_POINT: JSON = {"type": "default"}


def body(options: RunOptions) -> JSON:
    """boto3 1.44.8 converse_stream(modelId=M, messages=[...], inferenceConfig=...),
    observed on loopback: the model is in the path, the body only this (and the
    guardrail's guardrailConfig when --guardrail asks for one). A prefix to cache
    (``cache_prefix``) is a text block followed by a ``cachePoint`` block (botocore's
    bedrock-runtime model: ``CachePointBlock``, type ``default``): Converse caches what
    comes before the point."""
    split = cache_split(options)
    blocks: list[JSON] = [{"text": options.prompt}]
    if split is not None:
        head, rest = split
        blocks = [{"text": head}, {"cachePoint": dict(CACHE_POINT)}]
        if rest:
            blocks.append({"text": rest})
    fields: JSON = {
        "messages": [{"role": "user", "content": blocks}],
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
    cache_mark="cachePoint",
    stream_type=EVENTSTREAM,
    guardrails=True,
    holds_answer=synchronous_guardrail,
    decoder=BedrockConverseDecoder,
    otel_provider="aws.bedrock",
    emulation="BedrockConverse",
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
