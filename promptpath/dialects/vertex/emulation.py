"""The reference endpoint's Vertex AI: Gemini's emulation on Vertex's paths."""

from __future__ import annotations

from typing import ClassVar

from promptpath.dialects.gemini.emulation import GenerateContent

__all__ = ["VertexGenerateContent"]


class VertexGenerateContent(GenerateContent):
    """Vertex AI's ``projects/P/locations/L/publishers/google/models/M`` paths: the same
    format, its own name in /stats."""

    name: ClassVar[str] = "vertex"
