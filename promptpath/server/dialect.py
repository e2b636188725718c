"""What every dialect produces, and how events become bytes on the wire.

Dialects are pure: they build event payloads from the request and the tokens handed to
them, never read a clock (times arrive as arguments) and never write. The app stamps
each event with ``{"promptpath": {"seq", "sent_unix_ns"}}`` just before the write.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from promptpath.server.tokens import count_prompt_tokens

Finish = Literal["stop", "length"]
JSONObject = dict[str, Any]
#: Makes a fresh id with a prefix (``event`` -> ``event_3f9a...``): chosen by the server.
NewId = Callable[[str], str]

#: Top-level key added to every JSON event: the server's send time (client contract).
STAMP_KEY = "promptpath"


class RequestError(ValueError):
    """The request body is not something this dialect accepts (answered with a 400)."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True, slots=True)
class Event:
    """One SSE message or NDJSON line, before stamping and framing."""

    data: JSONObject | str  # a str is sent verbatim (``[DONE]``, deliberately broken JSON)
    name: str | None = None  # the SSE ``event:`` field; unused by NDJSON
    content: bool = False  # carries one content token (counted in /stats)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestParams:
    """What the dialect needs from the request body."""

    stream: bool
    model: str
    max_tokens: int | None
    prompt_tokens: int
    include_usage: bool = False
    #: Of ``prompt_tokens``, those the emulated prefix cache held (``--prefix-cache``):
    #: reported in each dialect's own usage field.
    cached_tokens: int = 0
    #: Of ``prompt_tokens``, those written to the emulated cache (a marked prefix not read:
    #: Anthropic's ``cache_creation_input_tokens``, Converse's ``cacheWriteInputTokens``).
    cache_write_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestInfo:
    """Per-response identity, chosen by the app (ids, wall clock) so dialects stay pure."""

    id: str  # random hex; dialects prefix it (chatcmpl-, resp_, msg_)
    created_unix: int
    created_iso: str  # RFC 3339 with nanoseconds, for Ollama
    params: RequestParams
    error_type: str | None = None  # which in-band error ``error()`` sends (the control)
    #: The ``reasoning`` control: the first K tokens are reasoning. A dialect whose opening
    #: announces the first output block (Anthropic, Responses) needs it before any token.
    reasoning: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorReply:
    body: JSONObject
    headers: tuple[tuple[str, str], ...] = ()


class Dialect(ABC):
    """One API's wire format. An instance lives for one response (it may keep state)."""

    name: ClassVar[str]
    media_type: ClassVar[str] = "text/event-stream"
    stream_default: ClassVar[bool] = False
    max_tokens_fields: ClassVar[tuple[str, ...]] = ("max_tokens",)
    #: The path names the model (Gemini, Vertex) or deployment (Azure): it wins over the body.
    model_in_path: ClassVar[bool] = False
    #: The emulation can send reasoning before the answer (the ``reasoning`` control).
    reasons: ClassVar[bool] = False
    #: Tokens a synchronous guardrail (``guardrail``) releases at once, each batch scanned.
    guardrail_batch: ClassVar[int] = 1
    #: The AWS signing name a request must be signed for when serve checks SigV4 (None:
    #: the API takes no SigV4, serve checks its key instead).
    sigv4_service: ClassVar[str | None] = None

    def __init__(self, info: RequestInfo) -> None:
        self.info = info
        self.model = info.params.model

    @property
    def sse(self) -> bool:
        return self.media_type == "text/event-stream"

    def encode(
        self, event: Event, *, seq: int, sent_unix_ns: int, report: JSONObject | None = None
    ) -> bytes:
        """Wire bytes for one event (SSE or NDJSON here; binary framings override it)."""
        return frame(event, sse=self.sse, seq=seq, sent_unix_ns=sent_unix_ns, report=report)

    # -- a WebSocket session (server/websocket.py) ---------------------------------------
    #: The session is a conversation (Realtime): the user's turns arrive as messages of their
    #: own and are the prompt of the next ``response.create``, which answers with the model
    #: the URL names.
    conversation: ClassVar[bool] = False

    @classmethod
    def session_opening(cls, model: str, new_id: NewId) -> list[JSONObject]:
        """The messages a session opens with, before the client says anything."""
        return []

    @classmethod
    def session_turn(
        cls, kind: object, payload: JSONObject, new_id: NewId
    ) -> tuple[int, list[JSONObject]] | None:
        """A client message other than ``response.create``: the prompt tokens it adds and
        the messages that answer it; None for a message the API does not take."""
        return None

    @classmethod
    def session_error(cls, error: JSONObject, new_id: NewId) -> JSONObject:
        """An ``error`` message on the socket (Responses' WebSocket mode: with a status)."""
        return {"type": "error", "status": 400, "error": error}

    @classmethod
    def guardrail(cls, body: object, headers: Mapping[str, str]) -> Literal["sync", "async"] | None:
        """A provider-side guardrail the request turns on, and its streaming mode (Bedrock)."""
        return None

    # -- request ---------------------------------------------------------------------
    @classmethod
    def parse_request(cls, body: object) -> RequestParams:
        if not isinstance(body, dict):
            raise RequestError("request body must be a JSON object")
        stream = body.get("stream", cls.stream_default)
        if not isinstance(stream, bool):
            raise RequestError("'stream' must be a boolean", param="stream")
        model = body.get("model", "promptpath-reference")
        if not isinstance(model, str) or not model:
            raise RequestError("'model' must be a non-empty string", param="model")
        max_tokens = cls._max_tokens(body)
        return RequestParams(
            stream=stream,
            model=model,
            max_tokens=max_tokens,
            prompt_tokens=count_prompt_tokens(_strings(cls._prompt_parts(body))),
            include_usage=cls._include_usage(body),
        )

    @classmethod
    def prompt_words(cls, body: object) -> list[str]:
        """The prompt's words in the order the request gives them (the prefix cache's
        key: server/prefill.py); the same strings ``prompt_tokens`` counts."""
        if not isinstance(body, dict):
            return []
        return [w for s in _strings(cls._prompt_parts(body)) for w in s.split()]

    @classmethod
    def marked_prefixes(cls, body: object) -> tuple[list[str], list[int]] | None:
        """For an API that caches only the prefix a request marks: the prompt's words in
        the order the API caches them, and where each mark ends a prefix (word counts);
        None (the default): the API caches every prompt's prefix by itself."""
        return None

    @classmethod
    def _max_tokens(cls, body: JSONObject) -> int | None:
        for path in cls.max_tokens_fields:
            value: object = body
            for part in path.split("."):
                value = value.get(part) if isinstance(value, dict) else None
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise RequestError(f"'{path}' must be a positive integer", param=path)
            return value
        return None

    @classmethod
    def _prompt_parts(cls, body: JSONObject) -> Iterable[object]:
        return (body.get("messages"), body.get("system"), body.get("instructions"))

    @classmethod
    def _include_usage(cls, body: JSONObject) -> bool:
        return False

    # -- streaming -------------------------------------------------------------------
    @abstractmethod
    def opening(self) -> list[Event]:
        """Events sent at once, before the first-token delay (role chunk, message_start)."""

    @abstractmethod
    def token(self, text: str) -> Event:
        """The event carrying one content token."""

    def reasoning(self, text: str) -> Event:
        """The event carrying one reasoning token (only where ``reasons``)."""
        raise NotImplementedError(f"the {self.name} emulation sends no reasoning")

    def events_for(self, text: str, *, reasoning: bool = False) -> list[Event]:
        """The events that carry one token: of the answer, or of the model's reasoning."""
        return [self.reasoning(text) if reasoning else self.token(text)]

    def filter_verdict(self) -> list[Event]:
        """The content filter's verdict on the output since the last one (the
        ``filter-batch`` control); none where the dialect has no filter of its own."""
        return []

    @abstractmethod
    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        """Everything after the last token, ending with the terminal marker."""

    @abstractmethod
    def error(self) -> list[Event]:
        """The dialect's mid-stream error report."""

    @abstractmethod
    def malformed(self) -> Event:
        """An event whose data is not valid JSON."""

    # -- whole answers ---------------------------------------------------------------
    @abstractmethod
    def complete(
        self, text: str, finish: Finish, output_tokens: int, elapsed_ns: int
    ) -> JSONObject:
        """The non-streaming answer."""

    @classmethod
    @abstractmethod
    def error_reply(
        cls, status: int, message: str | None = None, *, param: str | None = None
    ) -> ErrorReply:
        """A realistic error body (and headers) for an HTTP error status."""


def _strings(value: object) -> Iterator[str]:
    """Every string inside a JSON value (for a rough prompt-token count)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def marked_words(
    parts: Iterable[object], is_mark: Callable[[Mapping[str, object]], bool]
) -> tuple[list[str], list[int]]:
    """The words of every string in ``parts``, in order, and the word count at the end of
    each JSON object ``is_mark`` holds to be a cache mark (an Anthropic block carrying
    ``cache_control``, a Converse ``cachePoint`` block): the marked prefixes' ends."""
    words: list[str] = []
    ends: list[int] = []

    def walk(value: object) -> None:
        if isinstance(value, str):
            words.extend(value.split())
        elif isinstance(value, Mapping):
            for item in value.values():
                walk(item)
            if is_mark(value):
                ends.append(len(words))
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    for part in parts:
        walk(part)
    return words, ends


# -- framing ---------------------------------------------------------------------------


def _dumps(data: JSONObject) -> str:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def stamped(
    data: JSONObject, *, seq: int, sent_unix_ns: int, report: JSONObject | None = None
) -> JSONObject:
    """The payload with the server's send time added as a top-level key, and on the
    first event the ``report`` of the controls applied (request id, controls)."""
    return {**data, STAMP_KEY: {"seq": seq, "sent_unix_ns": sent_unix_ns, **(report or {})}}


def frame(
    event: Event, *, sse: bool, seq: int, sent_unix_ns: int, report: JSONObject | None = None
) -> bytes:
    """Wire bytes for one event: an SSE message or one NDJSON line."""
    if isinstance(event.data, str):
        text = event.data
    else:
        text = _dumps(stamped(event.data, seq=seq, sent_unix_ns=sent_unix_ns, report=report))
    if not sse:
        return (text + "\n").encode()
    lines = [f"event: {event.name}"] if event.name else []
    lines.extend(f"data: {line}" for line in text.split("\n"))
    return ("\n".join(lines) + "\n\n").encode()


def keepalive(*, seq: int, sent_unix_ns: int) -> bytes:
    """An SSE comment line; clients ignore it, proxies see traffic."""
    return f": keepalive seq={seq} sent_unix_ns={sent_unix_ns}\n\n".encode()


def json_body(data: JSONObject) -> bytes:
    return _dumps(data).encode()
