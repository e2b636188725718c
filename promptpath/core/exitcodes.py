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
    EXPORT = 10  # the run exited 0 but --junit/--har/--prom-textfile/--pushgateway failed
    INTERNAL = 70  # a bug in promptpath (EX_SOFTWARE): please report it
    # 128 + the signal, as a shell reports a process that signal killed: the run stopped
    # early and the report holds what was measured until then.
    HANGUP = 129  # SIGHUP: the terminal or session went away
    INTERRUPTED = 130  # SIGINT (Ctrl-C)
    PIPE_CLOSED = 141  # 128 + SIGPIPE: stdout or stderr was closed by its reader
    TERMINATED = 143  # SIGTERM: CI runners, timeout(1), kill
