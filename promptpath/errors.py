"""Exception tree. Every error names the stage it happened in and maps to one exit code.

    PromptpathError                 (stage, kind, message)
     ├── UsageError                 bad options, config, target           exit 2
     ├── DNSError                   NXDOMAIN, SERVFAIL, no address         exit 3
     ├── ConnectError               refused, unreachable, QUIC no answer   exit 4
     ├── TLSError                   unknown CA, expired, wrong host        exit 5
     ├── HTTPStatusError            4xx/5xx before the stream              exit 6
     ├── StreamError                truncated, malformed, error event      exit 7
     ├── TraceTimeout               --timeout elapsed in some stage        exit 8
     └── Interrupted                Ctrl-C in some stage                   exit 130

Foreign exceptions (OSError, ssl.SSLError, httpcore.*) are translated only at the
transport boundary, with ``raise ... from exc``.
"""

from __future__ import annotations

from promptpath.exitcodes import ExitCode


class PromptpathError(Exception):
    """Base: a failure with the stage it happened in and a machine-readable kind."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, stage: str, kind: str, **detail: object) -> None:
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.kind = kind
        self.detail: dict[str, object] = detail

    def as_dict(self) -> dict[str, object]:
        return {"stage": self.stage, "kind": self.kind, "message": self.message, **self.detail}


class UsageError(PromptpathError):
    exit_code = ExitCode.USAGE

    def __init__(self, message: str, *, kind: str = "usage", **detail: object) -> None:
        super().__init__(message, stage="config", kind=kind, **detail)


class DNSError(PromptpathError):
    exit_code = ExitCode.DNS


class ConnectError(PromptpathError):
    exit_code = ExitCode.CONNECT


class TLSError(PromptpathError):
    exit_code = ExitCode.TLS


class HTTPStatusError(PromptpathError):
    exit_code = ExitCode.HTTP_STATUS


class StreamError(PromptpathError):
    exit_code = ExitCode.STREAM


class TraceTimeout(PromptpathError):
    exit_code = ExitCode.TIMEOUT


class Interrupted(PromptpathError):
    exit_code = ExitCode.INTERRUPTED
