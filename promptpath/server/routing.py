"""Which dialect answers which path: the plug-ins' emulations, found as the client finds a
dialect (a proxy's prefix before a suffix still works). No dialect is named here."""

from __future__ import annotations

from promptpath.dialects.plugins import (
    detect_provider,
    dialects,
    emulation,
    model_from_path,
)
from promptpath.server.dialect import Dialect

#: The emulations a plain HTTP request reaches, by dialect.
DIALECTS: dict[str, type[Dialect]] = {
    d.name: emulation(d.name) for d in dialects() if d.websocket_only is None and d.body is not None
}
#: The dialects whose path answers only a WebSocket upgrade (a plain request: 426).
WEBSOCKET_ONLY: frozenset[str] = frozenset(d.name for d in dialects() if d.websocket_only)
#: The emulations a WebSocket reaches (server/websocket.py), by dialect.
WS_DIALECTS: dict[str, type[Dialect]] = {
    d.name: emulation(d.name) for d in dialects() if d.ws_messages is not None
}


def dialect_for_path(path: str) -> type[Dialect] | None:
    """By the path; None for a WebSocket-only path (see ``websocket_only``)."""
    provider = detect_provider(path)
    return None if provider is None else DIALECTS.get(provider)


def ws_dialect_for_path(path: str) -> type[Dialect] | None:
    """The emulation a WebSocket upgrade at ``path`` reaches, if any."""
    provider = detect_provider(path)
    return None if provider is None else WS_DIALECTS.get(provider)


def websocket_only(path: str) -> bool:
    """The path answers only a WebSocket upgrade: a plain request there earns a 426."""
    return detect_provider(path) in WEBSOCKET_ONLY


def path_model(path: str) -> str | None:
    """The model (or Azure deployment) the path names, for dialects whose path does."""
    provider = detect_provider(path)
    return None if provider is None else model_from_path(provider, path)
