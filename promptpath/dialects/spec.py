"""What one plug-in says about its API: the shape every ``dialects/<name>.py`` fills in.

A ``DialectSpec`` puts side by side what promptpath knows of one API: how a URL names it,
its key variables, the model to ask for, the stream decoder that reads it. The code that
uses these facts (detection in ``plugins.py``, the request in ``tracer/request.py``)
holds no table of its own and asks no dialect by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from promptpath.dialects.registry import ClientName, Provider
from promptpath.streams.dialect_base import DialectDecoder

__all__ = ["DialectSpec", "model_named_in_path"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DialectSpec:
    """One API's plug-in: every fact about it that the rest of promptpath reads."""

    name: Provider
    #: The API in words, for messages ("Amazon Bedrock").
    title: str
    # -- the URL ---------------------------------------------------------------------------
    #: Paths that say more than their last segment, tried before every dialect's suffixes
    #: (Azure's /chat/completions would otherwise read as plain OpenAI).
    path_patterns: tuple[re.Pattern[str], ...] = ()
    #: Paths that match a pattern of this dialect but belong to another (Vertex AI's end
    #: as AI Studio's do, after a project and a location).
    path_excludes: tuple[re.Pattern[str], ...] = ()
    #: Path suffixes, tried after every dialect's patterns.
    path_suffixes: tuple[str, ...] = ()
    #: The model (or deployment) the path names, for APIs whose path names one.
    model_in_path: Callable[[str], str | None] | None = None
    #: The model asked for when neither --model nor the path names one.
    default_model: str
    # -- the key ---------------------------------------------------------------------------
    #: The variable the API key is read from (None: none of its own, --api-key-env names one).
    key_env: str | None
    #: Variables read, in order, when ``key_env`` is unset (the SDK's own order).
    key_fallbacks: tuple[str, ...] = ()
    # -- the client ------------------------------------------------------------------------
    #: The --as shape of the client most people reach this API with (its official SDK).
    client: ClientName
    # -- the stream ------------------------------------------------------------------------
    #: A fresh decoder of this API's events (one per stream: a decoder may keep state).
    decoder: Callable[[], DialectDecoder]

    def matches(self, bare: str) -> bool:
        """``bare`` (a path without its query) is this dialect's by one of its patterns."""
        return any(p.search(bare) for p in self.path_patterns) and not any(
            p.search(bare) for p in self.path_excludes
        )


_MODEL_IN_PATH = re.compile(r"/(?:models|tunedModels|deployments)/([^/:?]+)")


def model_named_in_path(path: str) -> str | None:
    """The model (Gemini, Vertex) or deployment (Azure) segment of a path, if it has one."""
    found = _MODEL_IN_PATH.search(path.split("?", 1)[0])
    return found.group(1) if found else None
