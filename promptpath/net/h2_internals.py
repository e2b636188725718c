"""Every write into h2's internals, in one place, checked against one pinned minor.

h2 moves its connection state machine to CLOSED on receiving any GOAWAY and from then on
raises ProtocolError for every frame (python-hyper/h2#1181, open: "h2's connection state
machine immediately transitions to CLOSED upon sending or receiving a GOAWAY"). RFC 9113
section 6.8 says otherwise: streams at or below the GOAWAY's last stream id may still
complete, and a NO_ERROR GOAWAY is how servers drain (checked by hand: nginx 1.22.1 on
``nginx -s reload`` sends GOAWAY(NO_ERROR, last stream 1) and streams stream 1 to its
end). h2 has no API to keep the connection open, so :func:`keep_open_on_graceful_goaway`
wraps its GOAWAY frame handler: a NO_ERROR GOAWAY still becomes a ConnectionTerminated
event, but the state machine and the bytes queued to send are left as they were, so the
frames that follow it in the same read are parsed. A GOAWAY with an error code is h2's own.

Checked against h2 :data:`CHECKED_AGAINST` (pinned in pyproject.toml); when an internal is
missing, :class:`H2InternalsChanged` is raised rather than a GOAWAY silently made fatal
or silently ignored. tests/unit/test_h2_internals.py runs it over two real h2 connections.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h2.connection
import hyperframe.frame

#: The h2 minor this was checked against (``h2>=4.1,<4.5`` in pyproject).
CHECKED_AGAINST = "4.4"


class H2InternalsChanged(RuntimeError):
    """h2 no longer has the internal this module writes to: check it against the new h2."""


def keep_open_on_graceful_goaway(conn: h2.connection.H2Connection) -> None:
    """Make ``conn`` keep its connection open when the peer sends GOAWAY(NO_ERROR)."""
    table: Any = getattr(conn, "_frame_dispatch_table", None)
    machine = getattr(conn, "state_machine", None)
    if (
        not isinstance(table, dict)
        or hyperframe.frame.GoAwayFrame not in table
        or not hasattr(machine, "state")
        or not isinstance(getattr(conn, "_data_to_send", None), bytearray)
    ):
        raise H2InternalsChanged(
            f"h2's GOAWAY handling moved (checked against h2 {CHECKED_AGAINST})"
        )
    receive: Callable[[hyperframe.frame.GoAwayFrame], Any] = table[hyperframe.frame.GoAwayFrame]

    def receive_goaway(frame: hyperframe.frame.GoAwayFrame) -> Any:
        if frame.error_code != 0:
            return receive(frame)  # an error: the connection ends, as h2 has it
        state, queued = machine.state, bytes(conn._data_to_send)  # type: ignore[union-attr]
        result = receive(frame)
        machine.state = state  # type: ignore[union-attr]
        conn._data_to_send = bytearray(queued)  # h2 cleared what it would still send
        return result

    table[hyperframe.frame.GoAwayFrame] = receive_goaway


__all__ = ["CHECKED_AGAINST", "H2InternalsChanged", "keep_open_on_graceful_goaway"]
