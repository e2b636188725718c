"""Ollama on the reference endpoint (``OllamaChat``): NDJSON lines, the last one ``"done":
true`` with Ollama's counts and durations; a mid-stream error is an ``{"error": ...}`` line."""

from __future__ import annotations

from typing import ClassVar

from promptpath.server.dialect import Dialect, ErrorReply, Event, Finish, JSONObject

__all__ = [
    "MID_STREAM_ERROR",
    "OllamaChat",
]


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
