"""Every way a run fails, over real loopback sockets, through the real CLI: one table.

For each row the run must exit with its stage's code, name the stage in ``error.stage``,
keep the milestones reached before the failure, give a stalled stage its time up to the
deadline, print JSON that the schema accepts, and show no traceback on either stream.

Observed by hand before writing the rows (``promptpath run ... --json`` against
``promptpath serve``): a UDP resolver that never answers ends as a timeout in stage dns
at the --timeout deadline (the lookup's own timeout is min(--timeout, 10 s)); a stall
after the headers but before any token is cut in stage first_token, one after two tokens
in stage stream; a port bound but not listening refuses the connect at once (RST).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from promptpath.core.exitcodes import ExitCode
from tests.helpers.cli import run_cli
from tests.helpers.rawserver import raw_server, sse_response
from tests.helpers.refserver import RefServer, reference_server

SCHEMA = json.loads((Path(__file__).parents[2] / "promptpath/report/schema.json").read_text())
CHAT = "/v1/chat/completions"
DEADLINE_S = 1.5  # --timeout of the stall rows: long enough to be a stall, short for CI

#: Milestones of a request that got its headers and nothing else.
HEADERS = ["dns_done", "connected", "request_sent", "ttfb"]
#: ... and then some tokens (answer text: first_output is ttft).
TOKENS = [*HEADERS, "first_event", "ttft", "first_output", "last_token"]

#: An Anthropic stream cut before message_stop, sent to a run that expects OpenAI's.
ANTHROPIC_CUT = (
    b"event: message_start\n"
    b'data: {"type":"message_start","message":{"usage":{"input_tokens":3}}}\n\n'
    b"event: content_block_delta\n"
    b'data: {"type":"content_block_delta","delta":{"type":"text_delta","text":"hi"}}\n\n'
)
#: A complete OpenAI stream whose first token carries a byte that is not UTF-8.
BAD_UTF8 = b'data: {"choices":[{"delta":{"content":"a\xffb"}}]}\n\ndata: [DONE]\n\n'


@dataclass(frozen=True, slots=True)
class Env:
    """What the rows point at: started once for the whole table."""

    plain: RefServer  # reference endpoint, plain HTTP
    tls: RefServer  # reference endpoint, TLS with its own CA
    closed_port: int  # bound, not listening: connect is refused
    mute_dns: int  # UDP port on 127.0.0.1 that reads queries and never answers
    wrong_dialect: int  # raw server: ANTHROPIC_CUT, then FIN
    bad_utf8: int  # raw server: BAD_UTF8, then FIN


@dataclass(frozen=True, slots=True)
class Row:
    name: str
    argv: Callable[[Env], list[str]]
    exit: ExitCode
    stage: str | None  # error.stage; None: the run succeeds
    kind: str | None
    milestones: list[str]
    stalled: str | None = None  # the stage cut by the deadline: its time must reach it
    words: str = ""  # must appear in error.message (or the verdict when it succeeds)


def ctl(env: Env, *controls: str) -> list[str]:
    """A run against the plain reference endpoint with ``x-promptpath-*`` controls."""
    argv = [env.plain.path(CHAT)]
    for control in controls:
        argv += ["-H", f"x-promptpath-{control}"]
    return argv


def system_resolver_is_loopback() -> bool:
    """Whether a query the system resolver sends stays on this machine."""
    servers = [
        line.split()[1]
        for line in Path("/etc/resolv.conf").read_text().splitlines()
        if line.startswith("nameserver") and len(line.split()) > 1
    ]
    with contextlib.suppress(ValueError):
        return bool(servers) and all(ipaddress.ip_address(s).is_loopback for s in servers)
    return False


ROWS = [
    Row(
        "refused",
        lambda e: [f"http://127.0.0.1:{e.closed_port}{CHAT}"],
        ExitCode.CONNECT,
        "connect",
        "refused",
        ["dns_done"],
    ),
    Row(
        "dns-resolver-never-answers",
        lambda e: [
            f"http://fault-matrix.test:{e.plain.port}{CHAT}",
            "--resolver",
            f"127.0.0.1:{e.mute_dns}",
            "--timeout",
            str(DEADLINE_S),
        ],
        ExitCode.TIMEOUT,
        "dns",
        "timeout",
        [],
        stalled="dns",
    ),
    Row(
        "dns-nxdomain-invalid-tld",
        lambda e: [f"http://nonexistent.invalid:{e.plain.port}{CHAT}"],
        ExitCode.DNS,
        "dns",
        "nxdomain",
        [],
    ),
    Row(
        "tls-unknown-ca",
        lambda e: [f"https://localhost:{e.tls.port}{CHAT}", "-4"],
        ExitCode.TLS,
        "tls",
        "unknown_ca",
        ["dns_done", "connected"],
        words="is not a trusted CA (--cacert FILE)",
    ),
    Row(
        "401-without-a-key",
        lambda e: ctl(e, "status: 401"),
        ExitCode.HTTP_STATUS,
        "response",
        "http_401",
        HEADERS,
        words="no API key was sent: set OPENAI_API_KEY",
    ),
    Row(
        "429",
        lambda e: ctl(e, "status: 429"),
        ExitCode.HTTP_STATUS,
        "response",
        "http_429",
        HEADERS,
        words="Retry-After: 2",
    ),
    Row(
        "500",
        lambda e: ctl(e, "status: 500"),
        ExitCode.HTTP_STATUS,
        "response",
        "http_500",
        HEADERS,
    ),
    Row(
        "529-said-once",
        lambda e: ctl(e, "status: 529"),
        ExitCode.HTTP_STATUS,
        "response",
        "http_529",
        HEADERS,
        words="HTTP 529 — the provider is overloaded",
    ),
    Row(
        "html-instead-of-sse",
        lambda e: ctl(e, "body: html"),
        ExitCode.STREAM,
        "response",
        "not_event_stream",
        HEADERS,
        words="expected an event stream, got text/html",
    ),
    Row(
        "truncated",
        lambda e: ctl(e, "truncate-after: 3"),
        ExitCode.STREAM,
        "stream",
        "truncated",
        TOKENS,
        words="stream truncated after 3 tokens",
    ),
    Row(
        "wrong-dialect",
        lambda e: [f"http://127.0.0.1:{e.wrong_dialect}{CHAT}"],
        ExitCode.STREAM,
        "stream",
        "truncated",
        [*HEADERS, "first_event"],
        words="try --provider anthropic",
    ),
    Row(
        "malformed-json-event",
        lambda e: ctl(e, "malformed-after: 2"),
        ExitCode.STREAM,
        "stream",
        "malformed_event",
        TOKENS,
        words="malformed stream event",
    ),
    Row(
        "error-event-in-200",
        lambda e: ctl(e, "error-after: 2"),
        ExitCode.STREAM,
        "stream",
        "error_event",
        [*TOKENS, "end"],
        words="the server sent an error event after 2 tokens",
    ),
    Row(
        "stall-before-first-token",
        lambda e: [*ctl(e, "ttft-ms: 30000"), "--timeout", str(DEADLINE_S)],
        ExitCode.TIMEOUT,
        "first_token",
        "timeout",
        [*HEADERS, "first_event"],
        stalled="first_token",
    ),
    Row(
        "stall-mid-stream",
        lambda e: [*ctl(e, "pause-after: 2", "pause-s: 30"), "--timeout", str(DEADLINE_S)],
        ExitCode.TIMEOUT,
        "stream",
        "timeout",
        TOKENS,
        stalled="streaming",
    ),
    Row(
        "invalid-utf8-counted",
        lambda e: [f"http://127.0.0.1:{e.bad_utf8}{CHAT}"],
        ExitCode.OK,
        None,
        None,
        [*TOKENS, "end"],
        words="1 invalid UTF-8 sequence(s) in 1 event(s)",
    ),
]


@contextlib.contextmanager
def udp_sink() -> Iterator[int]:
    """A bound UDP socket nobody reads from: queries sent to it are never answered."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A TCP port bound without listen(): a SYN to it gets RST, and nobody can take it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with contextlib.ExitStack() as stack:
        enter = stack.enter_context
        yield Env(
            plain=enter(reference_server(tls=False, tmp_path=tmp_path_factory.mktemp("plain"))),
            tls=enter(reference_server(tls=True, tmp_path=tmp_path_factory.mktemp("tls"))),
            closed_port=enter(closed_port()),
            mute_dns=enter(udp_sink()),
            wrong_dialect=enter(raw_server(sse_response(ANTHROPIC_CUT), ending="fin")),
            bad_utf8=enter(raw_server(sse_response(BAD_UTF8), ending="fin")),
        )


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_fault_matrix(env: Env, row: Row) -> None:
    if row.name == "dns-nxdomain-invalid-tld" and not system_resolver_is_loopback():
        pytest.skip("the system resolver is not on loopback: the query would leave the machine")
    res = run_cli("run", *row.argv(env), "--json")
    assert "Traceback" not in res.stdout and "Traceback" not in res.stderr, res.stderr
    body: dict[str, Any] = json.loads(res.stdout)
    jsonschema.validate(body, SCHEMA)
    assert res.exit_code == body["exit_code"] == row.exit, (res.exit_code, body["error"])
    error = body["error"]
    if row.stage is None:
        assert error is None
        assert row.words in res.stderr
    else:
        assert (error["stage"], error["kind"]) == (row.stage, row.kind), error
        assert row.words in error["message"], error["message"]
    assert list(body["milestones_ms"]) == row.milestones
    if row.stalled is not None:
        # The cut stage runs to the deadline: not less, and not far past it on a busy box.
        stalled_ms = body["stages_ms"][row.stalled]
        assert DEADLINE_S * 1000 * 0.8 <= stalled_ms <= DEADLINE_S * 1000 + 1000, body["stages_ms"]
