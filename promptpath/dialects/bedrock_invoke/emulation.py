"""Bedrock invoke on the reference endpoint (``BedrockInvoke``): it wraps Anthropic's events,
as anthropic/'s ``Messages`` writes them without ``ping``, in ``chunk`` events of
``{"bytes": BASE64}``; the last chunk carries ``amazon-bedrock-invocationMetrics``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from promptpath.dialects.anthropic.emulation import Messages
from promptpath.dialects.bedrock.emulation import (
    AwsEvent,
    GuardrailMode,
    _BedrockEndpoint,
)
from promptpath.server.dialect import (
    Event,
    Finish,
    JSONObject,
    RequestParams,
)

__all__ = [
    "BedrockInvoke",
]


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
    def marked_prefixes(cls, body: object) -> tuple[list[str], list[int]] | None:
        """Claude's body as on Anthropic's API: only a ``cache_control`` block is cached."""
        return Messages.marked_prefixes(body)

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
        params = self.info.params
        metrics = {
            # Like the native usage, the count leaves the prompt cache's reads and writes
            # out (Bedrock's invocation log counts them apart: cacheReadInputTokenCount).
            "inputTokenCount": params.prompt_tokens
            - params.cached_tokens
            - params.cache_write_tokens,
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
