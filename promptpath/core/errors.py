"""Exception tree. Every error names the stage it happened in and maps to one exit code.

    PromptpathError                 (stage, kind, message)
     ├── UsageError                 bad options, config, target           exit 2
     ├── DNSError                   NXDOMAIN, SERVFAIL, no address         exit 3
     ├── ConnectError               refused, unreachable, QUIC no answer   exit 4
     ├── TLSError                   unknown CA, expired, wrong host        exit 5
     ├── HTTPStatusError            4xx/5xx before the stream              exit 6
     ├── StreamError                truncated, malformed, error event      exit 7
     ├── TraceTimeout               --timeout elapsed in some stage        exit 8
     └── Interrupted                Ctrl-C, SIGTERM, SIGHUP in some stage  exit 128 + signal

Foreign exceptions (OSError, ssl.SSLError, httpcore.*) are translated only at the
transport boundary, with ``raise ... from exc``.

``stage`` and ``kind`` are closed sets: ``report/schema.json`` enumerates the same values
(``$defs/error_stage``, ``error_kind``, ``usage_kind``) and a unit test holds the three
(these Literals, the schema, every literal in the code) together. A new kind goes here and
into the schema in the same commit.
"""

from __future__ import annotations

from typing import Literal, NewType

from promptpath.core.exitcodes import ExitCode

#: Where a failure happened: the stages of one trip, in order (README, "Exit codes").
ErrorStage = Literal[
    "config",
    "queue",  # load mode: waiting for a free connection (or a stream slot on one)
    "proxy_dns",  # the forward proxy's name
    "proxy_connect",  # TCP to the proxy
    "proxy_tls",  # TLS with an https:// proxy
    "tunnel",  # CONNECT host:port, to the proxy's answer
    "dns",
    "connect",
    "tls",
    "quic_handshake",
    "upgrade",  # WebSocket: the GET with Upgrade: websocket, to the 101
    "request",
    "wait",  # request sent, no response headers yet
    "response",  # status or content type refused before the stream
    "first_token",
    "stream",
]

#: What is wrong with the options, the config file or the target (always stage ``config``).
#: (``not_allowed``, ``over_budget``: `promptpath mcp` refusing a target outside its
#: allow-list, or a run past its connection's spend limit, before any connection.)
UsageKind = Literal[
    "usage", "bad_option", "bad_target", "bad_config", "cleartext_key", "not_allowed", "over_budget"
]

#: What went wrong, machine-readable. Grouped by the stage that mostly produces it; a few
#: (``refused``, ``timeout``, ``network_error``) occur in more than one.
ErrorKind = Literal[
    UsageKind,
    # dns: getaddrinfo codes and a resolver's answer status
    "nxdomain",
    "nodata",
    "no_address",
    "servfail",
    "servfail_or_timeout",
    "malformed",
    "network",
    "resolve_failed",
    # connect (TCP errno) and quic_handshake
    "refused",
    "host_unreachable",
    "network_unreachable",
    "address_not_available",
    "connect_failed",
    "unsupported",
    "handshake_timeout",
    "version_negotiation",
    "path_mtu",  # QUIC's 1200-byte datagrams do not fit the path (EMSGSIZE)
    # tls, and the certificate checks of quic_handshake
    "handshake_failed",
    "handshake_closed",
    "cert_expired",
    "cert_not_yet_valid",
    "self_signed",
    "unknown_ca",
    "hostname_mismatch",
    "ip_mismatch",
    "cert_verify_failed",
    # tunnel: the forward proxy's answer to CONNECT
    "proxy_auth_required",
    "proxy_denied",
    "proxy_closed",
    # tls: client certificates (mTLS)
    "client_cert_required",
    "client_cert_rejected",
    # upgrade: the WebSocket handshake (a refusal is ``http_<status>``)
    "upgrade_invalid",
    "upgrade_refused",
    # response and stream
    "not_event_stream",
    "no_response",
    "unsupported_encoding",
    "bad_encoding",
    "malformed_event",
    "bad_frame",  # a binary frame (AWS event stream) with a bad CRC or an impossible length
    "error_event",
    "truncated",
    "protocol_error",
    "network_error",
    # any stage
    "timeout",
    "interrupted",
]

#: ``http_<status>`` for a response refused by its status: one kind per status code would
#: be a thousand-member Literal, so it is a type of its own that only ``http_status_kind``
#: makes (the schema: a pattern next to the ``error_kind`` enum).
HTTPStatusKind = NewType("HTTPStatusKind", str)


def http_status_kind(status: int) -> HTTPStatusKind:
    """The kind of an error answer with ``status``, e.g. ``http_429``."""
    return HTTPStatusKind(f"http_{status}")


class PromptpathError(Exception):
    """Base: a failure with the stage it happened in and a machine-readable kind."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(
        self,
        message: str,
        *,
        stage: ErrorStage,
        kind: ErrorKind | HTTPStatusKind,
        **detail: object,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.stage = stage
        self.kind = kind
        self.detail: dict[str, object] = detail

    def as_dict(self) -> dict[str, object]:
        return {"stage": self.stage, "kind": self.kind, "message": self.message, **self.detail}


class UsageError(PromptpathError):
    exit_code = ExitCode.USAGE

    def __init__(self, message: str, *, kind: UsageKind = "usage", **detail: object) -> None:
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
