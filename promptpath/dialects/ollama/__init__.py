"""Ollama ``/api/chat``, one plug-in: detection, model, the request and client its
library sends, the stream's decoder, and the reference endpoint's emulation.

NDJSON, one object per line, streaming unless told otherwise; the ``"done": true`` line ends
the stream and carries the counts. Ollama takes no key of its own (a key given is sent as a
bearer token, for the gateways in front of it).
"""

from __future__ import annotations

import json
import platform
from typing import ClassVar

from promptpath.core.timeline import StreamEvent
from promptpath.dialects.spec import JSON, DialectSpec, DocRow, httpx_client
from promptpath.options import RunOptions
from promptpath.server.dialect import Dialect, ErrorReply, Event, Finish, JSONObject
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
    "OLLAMA_PYTHON",
    "SPEC",
    "OllamaChat",
    "OllamaDecoder",
]


# -- the stream ---------------------------------------------------------------------------
class OllamaDecoder(_Dialect):
    """``/api/chat`` (and ``/api/generate``) NDJSON; the ``done`` line has the counts."""

    framing: Framing = "ndjson"

    def _decode(self, sse_event: str, data: str, mk: _Maker) -> list[StreamEvent]:
        obj = _load(data)
        mk.stamp_from(obj)
        if obj.get("error") is not None:
            return [mk("error", "error", error=_error_text(obj.get("error")))]
        message = _obj(obj.get("message"))
        name = "message" if "message" in obj else "response"
        events: list[StreamEvent] = []
        thinking = _str(message.get("thinking")) or _str(obj.get("thinking"))
        if thinking:
            events.append(mk("content", name, content_type="reasoning", text=thinking))
        text = _str(message.get("content")) or _str(obj.get("response"))
        if text:
            events.append(mk("content", name, content_type="text", text=text))
        for call in map(_obj, _list(message.get("tool_calls"))):
            fn = _obj(call.get("function"))
            args = fn.get("arguments")
            args_text = args if isinstance(args, str) else json.dumps(args, default=str)
            events.append(mk("content", name, content_type="tool", text=args_text))
        if obj.get("done") is True:
            reason = _str(obj.get("done_reason"))
            usage = _usage(obj.get("prompt_eval_count"), obj.get("eval_count"))
            events.append(
                mk("end", "done", usage=usage, text=f"done_reason={reason}" if reason else "")
            )
        return events or [mk("meta", name)]


# -- the reference endpoint (promptpath serve) --------------------------------------------

MID_STREAM_ERROR = "an error was encountered while running the model: unexpected EOF"


class OllamaChat(Dialect):
    """``POST /api/chat``."""

    name: ClassVar[str] = "ollama"
    media_type: ClassVar[str] = "application/x-ndjson"
    stream_default: ClassVar[bool] = True
    max_tokens_fields = ("options.num_predict",)
    reasons: ClassVar[bool] = True

    def _line(self, content: str, done: bool) -> JSONObject:
        return {
            "model": self.model,
            "created_at": self.info.created_iso,
            "message": {"role": "assistant", "content": content},
            "done": done,
        }

    def _stats(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> JSONObject:
        prompt_ns = min(elapsed_ns // 10, 20_000_000)
        return {
            "done_reason": finish,
            "total_duration": elapsed_ns,
            "load_duration": 0,
            "prompt_eval_count": self.info.params.prompt_tokens,
            "prompt_eval_duration": prompt_ns,
            "eval_count": output_tokens,
            "eval_duration": max(0, elapsed_ns - prompt_ns),
        }

    def opening(self) -> list[Event]:
        return []  # Ollama's first line already carries a token

    def token(self, text: str) -> Event:
        return Event(self._line(text, False), content=True)

    def reasoning(self, text: str) -> Event:
        # A thinking model's line with "think": true: message.thinking, content empty.
        line = self._line("", False)
        line["message"]["thinking"] = text
        return Event(line, content=True)

    def closing(self, finish: Finish, output_tokens: int, elapsed_ns: int) -> list[Event]:
        return [Event({**self._line("", True), **self._stats(finish, output_tokens, elapsed_ns)})]

    def error(self) -> list[Event]:
        return [Event({"error": MID_STREAM_ERROR})]

    def malformed(self) -> Event:
        return Event('{"model":"' + self.model + '","message":{"role":"assistant","content":"')

    def complete(
        self, text: str, finish: Finish, output_tokens: int, elapsed_ns: int
    ) -> JSONObject:
        return {**self._line(text, True), **self._stats(finish, output_tokens, elapsed_ns)}

    @classmethod
    def error_reply(
        cls, status: int, message: str | None = None, *, param: str | None = None
    ) -> ErrorReply:
        texts = {
            401: "unauthorized",
            404: "model not found, try pulling it first",
            429: "too many requests",
            500: "internal server error",
            503: "server busy, please try again.  maximum pending requests exceeded",
        }
        headers = (("retry-after", "2"),) if status == 429 else ()
        return ErrorReply(
            body={"error": message or texts.get(status, f"HTTP {status}")}, headers=headers
        )


# -- the request --------------------------------------------------------------------------
def body(options: RunOptions) -> JSON:
    return {
        "model": options.model,
        "messages": [{"role": "user", "content": options.prompt}],
        "stream": True,
        "options": {"num_predict": options.max_tokens},
    }


#: ollama 0.6.1: ollama/_client.py BaseClient sets Accept: application/json and
#: "ollama-python/VERSION (MACHINE SYSTEM) Python/VERSION" on an httpx 0.28 client
#: (gzip, deflate; HTTP/1.1). The platform part is this machine's, as the SDK's would be.
#: Its own shape rather than identity: the library sends a known, fixed header set.
OLLAMA_PYTHON = httpx_client(
    "ollama-python",
    f"ollama-python/0.6.1 ({platform.machine()} {platform.system().lower()})"
    f" Python/{platform.python_version()}",
)


SPEC = DialectSpec(
    name="ollama",
    title="Ollama",
    path_suffixes=("/api/chat",),
    default_model="llama3.2",
    key_env=None,
    client="ollama-python",
    shapes=(OLLAMA_PYTHON,),
    body=body,
    stream_type="application/x-ndjson",
    decoder=OllamaDecoder,
    otel_provider="ollama",
    emulation=OllamaChat,
    demo_path="/api/chat",
    docs=(
        DocRow(
            detection="ends in `/api/chat`",
            auth="`Authorization: Bearer` (when a key is set)",
            keys="none (`--api-key-env`)",
            end='`"done": true`',
        ),
    ),
)
