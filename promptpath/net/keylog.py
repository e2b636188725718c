"""SSLKEYLOGFILE for HTTP/3: aioquic's traffic secrets in the NSS key log format.

Over TCP the ssl module appends to ``SSLKEYLOGFILE`` itself; aioquic writes only to the
``secrets_log_file`` it is given. Lines are held in memory while a handshake runs and
appended to the file after it, so the file's I/O is not timed as handshake.
"""

from __future__ import annotations


class KeyLog:
    """A ``secrets_log_file`` for aioquic that appends to ``path`` when drained.

    The file is opened once here (before t0), so an unwritable path fails before anything
    is sent, as it does over TCP when the ssl module opens it.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lines: list[str] = []
        with open(path, "a", encoding="ascii"):
            pass

    def write(self, text: str) -> int:
        self._lines.append(text)
        return len(text)

    def flush(self) -> None:
        """aioquic flushes after each line: the file is written by ``drain()`` instead."""

    def drain(self) -> None:
        """Append the lines held so far (after a handshake, when a connection closes)."""
        if not self._lines:
            return
        with open(self.path, "a", encoding="ascii") as fh:
            fh.writelines(self._lines)
        self._lines.clear()


__all__ = ["KeyLog"]
