"""A listener on 127.0.0.1 that hands each connection to its own thread: the accept loop the
scripted hostile servers (bombs.py, hostilews.py) share."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def serve_each(handle: Callable[[socket.socket], None], *, join_s: float) -> Iterator[int]:
    """Accept on 127.0.0.1 and run ``handle(conn)`` in a thread per connection; yields the port.

    On exit the listener closes and each handler gets ``join_s`` seconds to finish (the
    handlers bound their own time; this only keeps a test from leaving threads writing)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    stop = threading.Event()
    workers: list[threading.Thread] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:  # the 0.2 s timeout (TimeoutError is an OSError) or the close
                continue
            worker = threading.Thread(target=handle, args=(conn,), daemon=True)
            worker.start()
            workers.append(worker)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        listener.close()
        for worker in workers:
            worker.join(join_s)
