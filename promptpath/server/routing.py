"""Which dialect answers which path."""

from __future__ import annotations

from promptpath.dialects.azure import AzureChatCompletions
from promptpath.dialects.ollama import OllamaChat
from promptpath.dialects.plugins import detect_provider, model_from_path
from promptpath.server.anthropic_dialect import Messages
from promptpath.server.bedrock_dialect import BedrockConverse, BedrockInvoke
from promptpath.server.cohere_dialect import CohereChat
from promptpath.server.dialect import Dialect
from promptpath.server.google_dialect import GenerateContent, VertexGenerateContent
from promptpath.server.openai_dialects import ChatCompletions, Responses

DIALECTS: dict[str, type[Dialect]] = {
    "openai": ChatCompletions,
    "responses": Responses,
    "anthropic": Messages,
    "ollama": OllamaChat,
    "gemini": GenerateContent,
    "vertex": VertexGenerateContent,
    "azure": AzureChatCompletions,
    "bedrock": BedrockConverse,
    "bedrock-invoke": BedrockInvoke,
    "cohere": CohereChat,
}


#: Providers whose path answers only a WebSocket upgrade (server/websocket.py).
WEBSOCKET_ONLY = frozenset({"realtime"})


def dialect_for_path(path: str) -> type[Dialect] | None:
    """By the path, as the client detects it (a proxy's prefix before a suffix still works);
    None for a WebSocket-only path (see ``websocket_only``)."""
    provider = detect_provider(path)
    return None if provider is None else DIALECTS.get(provider)


def websocket_only(path: str) -> bool:
    """The path answers only a WebSocket upgrade: a plain request there earns a 426."""
    return detect_provider(path) in WEBSOCKET_ONLY


def path_model(path: str) -> str | None:
    """The model (or Azure deployment) the path names, for dialects whose path does."""
    provider = detect_provider(path)
    return None if provider is None else model_from_path(provider, path)
