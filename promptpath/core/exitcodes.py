"""The exit-code contract. CI jobs act on these numbers: never renumber, only add."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FINDING = 1  # a probe finding at or above --fail-on
    USAGE = 2  # bad options or config
    DNS = 3
    CONNECT = 4  # TCP connect (or QUIC handshake that never answered)
    TLS = 5
    HTTP_STATUS = 6  # the server answered with an error status
    STREAM = 7  # truncated, malformed, or an error event inside the stream
    TIMEOUT = 8
    SLO = 9  # an SLO threshold breached
    INTERNAL = 70  # a bug in promptpath (EX_SOFTWARE): please report it
    INTERRUPTED = 130
