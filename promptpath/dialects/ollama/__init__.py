"""Ollama ``/api/chat``, one plug-in: detection, model, the request and client its
library sends, the stream's decoder, and the reference endpoint's emulation.

NDJSON, one object per line, streaming unless told otherwise; the ``"done": true`` line ends
the stream and carries the counts. Ollama takes no key of its own (a key given is sent as a
bearer token, for the gateways in front of it).
"""

from __future__ import annotations

import json
import platform

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
    "OLLAMA_PYTHON",
    "SPEC",
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
    emulation="OllamaChat",
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
