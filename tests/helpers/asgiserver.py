"""A small ASGI app under hypercorn in a thread, on a free 127.0.0.1 port, for tests that
need a server whose behaviour the reference endpoint does not offer."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

from tests.helpers.ports import free_port

READY_TIMEOUT_S = 5.0


@contextlib.contextmanager
def serve_asgi(app: Any) -> Iterator[int]:
    """Serve ``app`` over plain HTTP/1.1 until the block ends; yields the port."""
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    port = free_port()  # hypercorn binds it itself (tests/helpers/ports.py: not port 0)
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    stop = threading.Event()

    def run() -> None:
        async def until_stopped() -> None:
            while not stop.is_set():
                await asyncio.sleep(0.05)

        asyncio.run(serve(app, config, shutdown_trigger=until_stopped))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        ready = threading.Event()
        for _ in range(int(READY_TIMEOUT_S / 0.05)):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                ready.set()
                break
            ready.wait(0.05)
        if not ready.is_set():
            raise RuntimeError(f"hypercorn did not accept on {port} within {READY_TIMEOUT_S:g} s")
        yield port
    finally:
        stop.set()
        thread.join(5)
