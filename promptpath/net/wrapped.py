"""A byte stream that forwards to the socket stream it wraps; subclasses stamp what passes."""

from __future__ import annotations

from typing import Any

import anyio.abc


class WrappedStream(anyio.abc.ByteStream):
    """Everything but what a subclass overrides goes straight to the socket stream."""

    def __init__(self, inner: anyio.abc.SocketStream) -> None:
        self._inner = inner

    async def receive(self, max_bytes: int = 65536) -> bytes:
        return await self._inner.receive(max_bytes)

    async def send(self, item: bytes) -> None:
        await self._inner.send(item)

    async def send_eof(self) -> None:
        await self._inner.send_eof()

    async def aclose(self) -> None:
        await self._inner.aclose()

    @property
    def extra_attributes(self) -> Any:
        # Socket attributes (addresses, the raw socket) pass through to TLS and httpcore.
        return self._inner.extra_attributes
