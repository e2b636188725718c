"""Which dialect answers which path."""

from __future__ import annotations

from promptpath.options import detect_provider
from promptpath.server.anthropic_dialect import Messages
from promptpath.server.dialect import Dialect
from promptpath.server.ollama_dialect import OllamaChat
from promptpath.server.openai_dialects import ChatCompletions, Responses

DIALECTS: dict[str, type[Dialect]] = {
    "openai": ChatCompletions,
    "responses": Responses,
    "anthropic": Messages,
    "ollama": OllamaChat,
}


def dialect_for_path(path: str) -> type[Dialect] | None:
    """By path suffix, so a proxy's prefix (``/openai/v1/chat/completions``) still works."""
    provider = detect_provider(path)
    return None if provider is None else DIALECTS[provider]
