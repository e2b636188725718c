"""A request path and a model for each HTTP dialect, as a client names them: what the
reference endpoint routes to that dialect (shared by the scripted unit test and the lab)."""

from __future__ import annotations

from typing import Any

from promptpath.dialects.plugins import dialect
from promptpath.dialects.registry import Provider
from promptpath.options import RunOptions, parse_target

BEDROCK_MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
_BEDROCK_PATH = f"/model/{BEDROCK_MODEL.replace(':', '%3A')}"

#: provider -> (a path the reference endpoint routes to its dialect, the model named)
SAMPLES: dict[Provider, tuple[str, str]] = {
    "openai": ("/v1/chat/completions", "gpt-4o-mini"),
    "responses": ("/v1/responses", "gpt-4o-mini"),
    "anthropic": ("/v1/messages", "claude-3-5-haiku-latest"),
    "ollama": ("/api/chat", "llama3.2"),
    "gemini": ("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "gemini-2.5-flash"),
    "vertex": (
        "/v1/projects/p1/locations/us-central1/publishers/google/models/"
        "gemini-2.5-pro:streamGenerateContent?alt=sse",
        "gemini-2.5-pro",
    ),
    "azure": ("/openai/deployments/prod-gpt/chat/completions?api-version=2024-10-21", "prod-gpt"),
    "bedrock": (f"{_BEDROCK_PATH}/converse-stream", BEDROCK_MODEL),
    "bedrock-invoke": (f"{_BEDROCK_PATH}/invoke-with-response-stream", BEDROCK_MODEL),
    "cohere": ("/v2/chat", "command-a-03-2025"),
}


def sample_options(base_url: str, provider: Provider, **kw: Any) -> RunOptions:
    """A run of ``provider``'s sample request at ``base_url``, as its default client sends it."""
    path, model = SAMPLES[provider]
    return RunOptions(
        target=parse_target(base_url + path),
        provider=provider,
        model=model,
        client=dialect(provider).client,
        **kw,
    )


__all__ = ["BEDROCK_MODEL", "SAMPLES", "Provider", "sample_options"]
