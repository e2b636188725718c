"""Hostile hops, every output channel: no credential leaves, no control character reaches
the terminal, and the JSON is valid whatever the peer sent.

Each case is a real socket on loopback (tests/helpers/hostile.py: an origin or a CONNECT
proxy that echoes every request header back in its headers, status text, body and stream
events, with control characters and lone surrogates). Each runs the real CLI twice: once
with ``--json -v`` and every file export (the terminal report then goes to stderr), once
with the terminal report on a terminal stdout. Every channel is then searched for every
credential the run held, its base64 and every 12-character piece of it (a prefix long
enough to identify a key), and the terminal text for any control character.
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.fwdproxy import squid
from tests.helpers.hostile import (
    Request,
    chunk,
    forbidden,
    hostile_origin,
    hostile_proxy,
    response,
    sse,
)
from tests.helpers.refserver import reference_server

pytestmark = pytest.mark.integration

KEY = "sk-hostile-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
HEADER_KEY = "hdr-secret-9f8e7d6c5b4a39281706f5e4"
QUERY_KEY = "qk-0a1b2c3d4e5f60718293a4b5c6d7e8f9"
PROXY_USER, PROXY_PASSWORD = "alice", "correct-horse-battery"
PROXY_BASIC = base64.b64encode(f"{PROXY_USER}:{PROXY_PASSWORD}".encode()).decode()
SECRETS = (KEY, HEADER_KEY, QUERY_KEY, PROXY_PASSWORD, f"{PROXY_USER}:{PROXY_PASSWORD}")

#: What a hostile peer puts in text it controls: ESC sequences (recolour, retitle), NUL,
#: BEL, a CR and a newline that would start a line of our own report, a one-byte CSI, a
#: right-to-left override.
CONTROLS = "\x1b[31mred\x1b]0;title\x07 nul\x00 cr\rfake\n[PASS] spoofed line \x9b2J \u202eevil"

#: Forbidden on the terminal: C0 (newline aside: it ends our own lines), DEL, C1, bidi
#: embeddings/overrides/isolates, line/paragraph separators, surrogates.
TERMINAL_BAD = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


def _echo_headers(request: Request) -> list[tuple[str, str]]:
    """Every request header copied into response headers, the usual places first."""
    auth = request.header("authorization")
    out = [
        ("x-request-id", auth),
        ("via", f"1.1 {auth}"),
        ("server", request.header("x-auth-token")),
    ]
    out += [(f"x-echo-{i}", f"{k}={v}") for i, (k, v) in enumerate(request.headers)]
    out += [("x-cache", "HIT \x1b[31m\x9b31m\x7f"), ("cf-ray", "\x9b2J" + auth)]
    return out


def _padded(text: str, pad: int = 103) -> str:
    """``text`` after ``pad`` characters: a snippet limit of 120 cuts inside it."""
    return "x" * pad + text


def stream_echo(request: Request) -> bytes:
    headers = [("content-type", "text/event-stream"), *_echo_headers(request)]
    body = sse(chunk("hi " + request.every_header()), f": {request.every_header()}\n\n")
    return response("200 OK", headers, body)


def nul_in_header(request: Request) -> bytes:
    """The key echoed in a header whose NUL h11 refuses: its error quotes the whole line."""
    return response(
        "200 OK",
        [
            ("content-type", "text/event-stream"),
            ("x-request-id", request.header("authorization") + "\x00"),
        ],
        sse(chunk("a")),
    )


def error_body_echo(request: Request) -> bytes:
    # The key at character 103 of the message: truncating first left its first 16.
    message = _padded(request.header("authorization").split()[-1]) + " " + request.every_header()
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
    return response("401 Unauthorized", _echo_headers(request), body.encode())


def query_echo(request: Request) -> bytes:
    # ESC, then the request line (its query key) where the 120-character snippet is cut.
    body = f"\x1b[31m! {_padded(request.line, 61)} {CONTROLS}".encode()
    return response("404 Not Found", [("content-type", "text/plain")], body)


def status_text_echo(request: Request) -> bytes:
    auth = request.header("authorization")
    body = json.dumps({"message": f"{auth} {CONTROLS}"}).encode()
    return response(f"503 {auth} down", [("content-type", "application/json")], body)


def error_event_echo(request: Request) -> bytes:
    error = {"error": {"type": "server_error", "message": CONTROLS + request.every_header()}}
    # No [DONE] after it: the error event ends the stream (ingest.note keeps the last word).
    body = f"data: {json.dumps(chunk('a'))}\n\ndata: {json.dumps(error)}\n\n".encode()
    return response("200 OK", [("content-type", "text/event-stream")], body)


def not_a_stream_echo(request: Request) -> bytes:
    # The 80-character snippet of the body is cut 14 characters into the key.
    body = f"\x1b[31m! {_padded(request.header('authorization'), 50)} {CONTROLS}".encode()
    return response("200 OK", [("content-type", "text/html")], body)


def surrogates(request: Request) -> bytes:
    # \ud800 and \udfff as JSON escapes: Python's json decodes them into lone surrogates.
    body = b'{"error": {"message": "lone \\ud800 and \\udfff, key ' + KEY.encode() + b'"}}'
    return response("400 Bad Request", [("content-type", "application/json")], body)


def not_xml_characters(request: Request) -> bytes:
    """An error body holding what XML 1.0 forbids even escaped (U+FFFE, U+FFFF, a vertical
    tab): the headline quotes it, and the SVG shows the headline."""
    body = json.dumps({"error": {"message": "bad \ufffe\uffff\x0b bytes"}}, ensure_ascii=False)
    return response(
        "500 Internal Server Error", [("content-type", "application/json")], body.encode()
    )


def surrogate_event(request: Request) -> bytes:
    body = b'data: {"error": {"message": "lone \\ud83d in an event"}}\n\n'
    return response("200 OK", [("content-type", "text/event-stream")], body)


def rate_limited_echo(request: Request) -> bytes:
    """429 whose rate-limit and hop headers (which the ratelimit probe quotes) echo the key."""
    auth = request.header("authorization")
    headers = [
        *_echo_headers(request),
        ("retry-after", f"7 {auth}"),
        ("x-ratelimit-remaining-requests", f"0 {auth} \x9b31m"),
        ("content-type", "application/json"),
    ]
    body = json.dumps({"error": {"message": f"slow down {auth} {CONTROLS}"}}).encode()
    return response("429 Too Many Requests", headers, body)


def proxy_tunnel_echo(request: Request) -> bytes:
    """200 to CONNECT, the Proxy-Authorization echoed in the reason and every kept header."""
    auth = request.header("proxy-authorization")
    lines = [
        f"HTTP/1.1 200 Connection established {auth}",
        f"Via: 1.1 {auth}",
        f"Proxy-Agent: hostile {request.every_header().replace(chr(10), ' ')} \x9b31m",
        f"X-Squid-Error: {auth.split()[-1]}",
        f"Server: {base64.b64decode(auth.split()[-1]).decode()}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def proxy_refusal_echo(request: Request) -> bytes:
    auth = request.header("proxy-authorization")
    headers = [("Via", f"1.1 {auth}"), ("Proxy-Agent", auth), ("X-Squid-Error", CONTROLS[:9])]
    body = f"{_padded(auth)} {CONTROLS}".encode()
    return response(f"407 {auth} refused", headers, body)


@dataclass(frozen=True)
class Case:
    name: str
    respond: Callable[[Request], bytes]
    code: int  # the exit code (core/exitcodes.py), observed once by hand and then held
    shows: tuple[str, ...]  # in the terminal text: proof the hostile text did arrive
    #: origin: respond is the origin; proxy: respond is the CONNECT proxy in front of the
    #: reference server; squid: a real squid with Basic auth in front of respond (plain
    #: http://, absolute form); squid-refused: squid refusing our credentials (407).
    hop: Literal["origin", "proxy", "squid", "squid-refused"] = "origin"
    extra: tuple[str, ...] = field(default=())

    @property
    def proxied(self) -> bool:
        return self.hop != "origin"


MARK = "[redacted]"
ESC = "\\x1b[31m"  # ESC [ 3 1 m as the terminal must show it: spelled out

CASES = [
    Case("headers echoed into response headers and the stream", stream_echo, 0, (MARK, ESC)),
    Case("key at the snippet cut of a 401 body", error_body_echo, 6, ("xxx" + MARK,)),
    Case(
        "key in a header line the HTTP parser refuses and quotes",
        nul_in_header,
        7,
        ("illegal header line", MARK, "\\x00"),
    ),
    Case(
        "series of two, key in the 401 body",
        error_body_echo,
        6,
        (),
        extra=("--count", "2", "--interval", "0"),
    ),
    Case("query key echoed in a long 404 body", query_echo, 6, ("api_key=" + MARK, ESC)),
    Case("key in the status text", status_text_echo, 6, (MARK, ESC)),
    Case("key and controls in a stream error event", error_event_echo, 7, (MARK, ESC)),
    Case(
        "key and controls in a body that is not a stream",
        not_a_stream_echo,
        7,
        ("xBearer " + MARK, ESC),
    ),
    Case(
        "429 echoed, with the ratelimit probe quoting its headers",
        rate_limited_echo,
        6,
        (MARK, ESC),
        extra=("--probe", "ratelimit"),
    ),
    Case("lone surrogates in an error body", surrogates, 6, ("\\ud800", MARK)),
    Case("a lone surrogate in a stream error event", surrogate_event, 7, ("\\ud83d",)),
    Case(
        "characters XML 1.0 forbids in an error body", not_xml_characters, 6, ("bad \ufffe\uffff",)
    ),
    Case(
        "proxy echoes Proxy-Authorization on a tunnel",
        proxy_tunnel_echo,
        0,
        (MARK, "\\x9b31m"),
        hop="proxy",
    ),
    Case("proxy echoes Proxy-Authorization in a 407", proxy_refusal_echo, 6, (MARK,), hop="proxy"),
    Case(
        "real squid with Basic auth before an origin that echoes every header",
        stream_echo,
        0,
        (MARK, "squid"),
        hop="squid",
    ),
    # squid 5.7 answers wrong credentials with 407 and its HTML error page: checked by hand.
    Case("real squid refuses the credentials", stream_echo, 6, ("407",), hop="squid-refused"),
]


def _param(case: Case) -> Any:
    marks = [pytest.mark.lab] if case.hop.startswith("squid") else []
    return pytest.param(case, id=case.name, marks=marks)


@dataclass
class Outputs:
    json_run: CliResult
    tty_run: CliResult
    files: dict[str, str]

    def channels(self) -> dict[str, str]:
        return {
            "stdout (--json)": self.json_run.stdout,
            "stderr (--json run: the terminal report)": self.json_run.stderr,
            "stdout (terminal)": self.tty_run.stdout,
            "stderr (terminal run)": self.tty_run.stderr,
            **self.files,
        }


@pytest.fixture(scope="module")
def refserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with reference_server(tmp_path=tmp_path_factory.mktemp("ref")) as ref:
        yield ref


def _common(url: str) -> tuple[str, ...]:
    return ("run", url, "-v", "-H", f"X-Auth-Token: {HEADER_KEY}", "--timeout", "15")


def _run(case: Case, url: str, extra: tuple[str, ...], tmp_path: Path) -> Outputs:
    env = {"OPENAI_API_KEY": KEY}
    files = {
        "junit": tmp_path / "run.xml",
        "har": tmp_path / "run.har",
        "prom": tmp_path / "run.prom",
        "html": tmp_path / "run.html",
        "svg": tmp_path / "run.svg",
        "markdown": tmp_path / "run.md",
    }
    args = (*_common(url), *extra, *case.extra)
    json_run = run_cli(
        *args,
        "--json",
        "--junit",
        str(files["junit"]),
        "--har",
        str(files["har"]),
        "--prom-textfile",
        str(files["prom"]),
        "--html",
        str(files["html"]),
        "--svg",
        str(files["svg"]),
        "--markdown",
        str(files["markdown"]),
        environ=env,
    )
    tty_run = run_cli(*args, environ={**env, "NO_COLOR": "1"}, stdout_isatty=True)
    written = {f"--{k}": p.read_text(encoding="utf-8") for k, p in files.items() if p.exists()}
    return Outputs(json_run, tty_run, written)


def _strict_json(text: str, what: str) -> Any:
    """Parsed ``text``, which must be JSON a strict parser takes: jq when installed, and
    no string holding a lone surrogate (json.loads alone accepts "\\ud800")."""
    body = json.loads(text)

    def walk(node: Any) -> None:
        if isinstance(node, str):
            node.encode("utf-8")  # raises on a lone surrogate
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(k)
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(body)
    jq = shutil.which("jq")
    if jq is not None:
        done = subprocess.run([jq, "."], input=text.encode(), capture_output=True, timeout=30)
        assert done.returncode == 0, f"jq refused {what}: {done.stderr.decode()[:300]}"
    return body


def _with_credentials(proxy_url: str) -> str:
    return proxy_url.replace("://", f"://{PROXY_USER}:{PROXY_PASSWORD}@", 1)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_hostile_hop_leaks_no_secret_and_no_control_character(
    case: Case, tmp_path: Path, refserver: Any
) -> None:
    path = f"/v1/chat/completions?api_key={QUERY_KEY}"
    with contextlib.ExitStack() as stack:
        if case.hop == "proxy":
            proxy_port = stack.enter_context(hostile_proxy(case.respond))
            proxy = _with_credentials(f"http://127.0.0.1:{proxy_port}")
            url, extra = refserver.url + path, ("--cacert", str(refserver.ca), "--proxy", proxy)
        elif case.hop == "squid-refused":
            squid_proxy = stack.enter_context(squid(user=(PROXY_USER, "not-the-password-sent")))
            proxy = _with_credentials(squid_proxy.url)
            url, extra = refserver.url + path, ("--cacert", str(refserver.ca), "--proxy", proxy)
        else:
            port = stack.enter_context(hostile_origin(case.respond))
            url, extra = f"http://127.0.0.1:{port}{path}", ()
            if case.hop == "squid":
                squid_proxy = stack.enter_context(squid(user=(PROXY_USER, PROXY_PASSWORD)))
                extra = ("--proxy", _with_credentials(squid_proxy.url))
        out = _run(case, url, extra, tmp_path)

    assert out.json_run.exit_code == case.code, out.json_run.stderr
    assert out.tty_run.exit_code == case.code, out.tty_run.stdout + out.tty_run.stderr
    body = _strict_json(out.json_run.stdout, "--json")
    assert body["exit_code"] == case.code
    _strict_json(out.files["--har"], "--har")
    assert set(out.files) == {"--junit", "--har", "--prom", "--html", "--svg", "--markdown"}
    # The Markdown a ticket renders: no control character but its own line ends, and the
    # peer's "[PASS] spoofed line" shown as text, its brackets escaped (no link opens).
    md = out.files["--markdown"]
    assert not any(c < " " and c != "\n" for c in md)
    assert "[PASS]" not in md
    # Well-formed XML whatever the peer sent (Chromium refuses the whole image otherwise).
    ET.fromstring(out.files["--junit"])
    ET.fromstring(out.files["--svg"])

    secrets = list(SECRETS) + ([PROXY_BASIC] if case.proxied else [])
    for channel, text in out.channels().items():
        for secret in secrets:
            leaked = [piece for piece in forbidden(secret) if piece in text]
            assert not leaked, f"{channel} holds {leaked[0]!r} of a credential"
    terminal = {
        "terminal on stderr": out.json_run.stderr,
        "terminal on stdout": out.tty_run.stdout,
        "stderr beside it": out.tty_run.stderr,
    }
    for channel, text in terminal.items():
        bad = TERMINAL_BAD.search(text)
        near = "" if bad is None else text[max(0, bad.start() - 40) : bad.end() + 10]
        assert bad is None, f"{channel}: raw {bad.group()!r} near {near!r}"
    shown = out.tty_run.stdout
    for expected in case.shows:
        assert expected in shown, f"{expected!r} not on the terminal: the case tested nothing"
