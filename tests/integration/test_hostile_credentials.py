"""Every credential a run is given, in every form it can be given, leaves no channel.

Short on purpose (under 8 characters, below the floor of the search inside arbitrary
text): each must leave by its place, whatever its length — a credential header (by its
name, or by a ``Bearer``/``Basic`` value under any name), a key-like query parameter, a
URL's userinfo (the target refuses it; --proxy, --otlp-endpoint, --pushgateway and
--canary-admin send it as Basic), a fragment (never sent, often pasted), --proxy-user,
and the echoes of each where the echoing text says a credential follows.

Each case runs the real CLI twice against peers on loopback: once with --json, -v and
every file export (--junit, --har, --prom-textfile, --html, --svg, --markdown) plus an OTLP receiver
and a Pushgateway stand-in, once with the terminal report on a terminal stdout. Then every
channel — stdout and stderr of both (the terminal report, warnings, ``export failed:``
lines: the CLI's logs), every file, what the OTLP collector and the Pushgateway received
(bodies and headers, their own Authorization aside) — is searched for each credential,
its base64, and for userinfo also ``user:password`` and the user name.

Facts checked by hand first (promptpath at 56ecd8e, this file's peers): the HTML
Reproduce line held ``--otlp-endpoint http://ou:…@…`` and ``-H 'x-api-key: …'`` whole,
``request.path`` held ``?api_key=…``, stderr held ``export failed: --pushgateway
http://pu:…@…`` for a refused connection and for an HTTP error alike, the ghost-stream
finding held ``cannot reach http://au:…@…``, every output held the ``#token=…`` fragment,
and the 401 failure line held the echoed ``Bearer …``. The OTLP collector receives the
userinfo as ``Authorization: Basic`` (so it is live) and so does the Pushgateway.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.cli import CliResult, run_cli
from tests.helpers.hostile import (
    Recorded,
    Request,
    forbidden,
    hostile_origin,
    hostile_proxy,
    recording_origin,
    response,
    said_as_credentials,
)
from tests.helpers.otlpreceiver import OtlpReceiver, otlp_receiver
from tests.helpers.refserver import RefServer

pytestmark = pytest.mark.integration
pytest.importorskip("opentelemetry.sdk")

MARK = "[redacted]"

# Each short, each distinctive enough that finding it anywhere is a leak.
ENV_KEY = "Ek3vQ"  # OPENAI_API_KEY, sent as Authorization: Bearer …
ODD_BEARER = "Au7hN"  # -H 'Authentication: Bearer …' (a credential by its value)
BASIC_V2 = "Vv2kB"  # -H 'X-Api-Key-V2: Basic …' (by its value, and by its versioned name)
X_API_KEY = "Xk4aZ"  # -H 'x-api-key: …'
QUERY = "Qk5rT"  # ?api_key=…
FRAGMENT = "Fr6gM"  # #token=… (never sent)
OTLP_USER, OTLP_PASS = "oUs1r", "Op7wD"  # --otlp-endpoint http://user:pass@…
PUSH_USER, PUSH_PASS = "pUs2r", "Pg8wD"  # --pushgateway http://user:pass@…
ADMIN_USER, ADMIN_PASS = "aUs3r", "Ad9wD"  # --canary-admin http://user:pass@…
PROXY_USER, PROXY_PASS = "xUs4r", "Px0wD"  # --proxy-user user:pass


def _userinfo(user: str, password: str) -> list[str]:
    """What of a URL's userinfo may not show: the pair, the password, the user name; the
    base64 (the Basic token) is added to every secret by ``forbidden``."""
    return [f"{user}:{password}", password, user]


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@dataclass
class Peers:
    """The loopback peers of one case, and what the recording ones were sent."""

    otlp: OtlpReceiver
    push: Recorded
    push_url: str  # with its userinfo
    otlp_url: str
    extra: list[str] = field(default_factory=list)


def refusing_origin(request: Request) -> bytes:
    """A 401 that quotes the request it refuses, in its body, its status line's neighbours
    (hop headers) and an event: each credential where the text says one follows."""
    said = said_as_credentials(request)
    headers = [
        ("content-type", "application/json"),
        (
            "www-authenticate",
            f'Bearer realm="api", error="invalid_token", error_description="{said}"',
        ),
        ("x-request-id", request.header("authorization")),
        *((f"x-echo-{i}", f"{k}: {v}") for i, (k, v) in enumerate(request.headers)),
    ]
    message = f"Incorrect API key provided: {request.header('authorization')}. You sent {said}"
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
    return response("401 Unauthorized", headers, body.encode())


def refusing_pushgateway(request: Request) -> bytes:
    """A Pushgateway (or a proxy before it) that refuses the push, quoting its
    Authorization (the userinfo's Basic token) in the answer promptpath prints."""
    auth = request.header("authorization")
    body = f"push refused: Authorization: {auth} is not allowed here ({auth})"
    return response("400 Bad Request", [("content-type", "text/plain")], body.encode())


def tunnel_echo(request: Request) -> bytes:
    """A CONNECT proxy that opens the tunnel and quotes the Proxy-Authorization it read."""
    auth = request.header("proxy-authorization")
    lines = [
        f"HTTP/1.1 200 Connection established ({auth})",
        f"Via: 1.1 proxy (Proxy-Authorization: {auth})",
        f"X-Proxy-Note: {said_as_credentials(request)}",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class Case:
    name: str
    secrets: tuple[str, ...]  # every form that may not show, beyond forbidden()'s
    code: int  # the --json run's exit code, observed by hand and held
    tty_code: int  # the terminal run's (no exports: no export failure)
    shows: tuple[str, ...]  # on the terminal: proof the credentials were echoed and taken out


ORIGIN = Case(
    "a 401 origin quoting every header, exports with userinfo, a refusing Pushgateway",
    secrets=(
        ENV_KEY, ODD_BEARER, BASIC_V2, QUERY, FRAGMENT,
        *_userinfo(OTLP_USER, OTLP_PASS), *_userinfo(PUSH_USER, PUSH_PASS),
    ),
    # 6: the 401 (the run's own code wins over the failed push's 10).
    code=6,
    tty_code=6,
    # The key echoed after "Bearer " on the failure line, a header echoed as "name: value".
    shows=(f"provided: Bearer {MARK}.", f"X-Api-Key-V2: {MARK}", f"api_key={MARK}"),
)  # fmt: skip
CANARY = Case(
    "the canary through a CONNECT proxy, --canary-admin unreachable, no Pushgateway there",
    secrets=(
        ENV_KEY, ODD_BEARER, X_API_KEY, FRAGMENT, QUERY,
        *_userinfo(OTLP_USER, OTLP_PASS), *_userinfo(PUSH_USER, PUSH_PASS),
        *_userinfo(ADMIN_USER, ADMIN_PASS), *_userinfo(PROXY_USER, PROXY_PASS),
    ),
    # 10: the run passed, the push to a closed port failed.
    code=10,
    tty_code=0,
    shows=(f"cannot reach http://{MARK}@127.0.0.1", f"Proxy-Authorization: {MARK}"),
)  # fmt: skip


@contextlib.contextmanager
def _peers() -> Iterator[Peers]:
    with otlp_receiver() as otlp, recording_origin(refusing_pushgateway) as (push_port, pushed):
        yield Peers(
            otlp=otlp,
            push=pushed,
            push_url=f"http://{PUSH_USER}:{PUSH_PASS}@127.0.0.1:{push_port}",
            otlp_url=otlp.url.replace("://", f"://{OTLP_USER}:{OTLP_PASS}@", 1),
        )


def _args(case: Case, peers: Peers, stack: contextlib.ExitStack, ref: RefServer) -> list[str]:
    if case is ORIGIN:
        port = stack.enter_context(hostile_origin(refusing_origin))
        return [
            f"http://127.0.0.1:{port}/v1/chat/completions?api_key={QUERY}#token={FRAGMENT}",
            "-H", f"Authentication: Bearer {ODD_BEARER}",
            "-H", f"X-Api-Key-V2: Basic {BASIC_V2}",
        ]  # fmt: skip
    proxy_port = stack.enter_context(hostile_proxy(tunnel_echo))
    assert ref.ca is not None
    return [
        ref.path(f"/v1/chat/completions?api_key={QUERY}#token={FRAGMENT}"),
        "--cacert", ref.ca,
        "-H", f"Authentication: Bearer {ODD_BEARER}",
        "-H", f"x-api-key: {X_API_KEY}",
        "--proxy", f"http://127.0.0.1:{proxy_port}",
        "--proxy-user", f"{PROXY_USER}:{PROXY_PASS}",
        "--probe", "ghost-stream", "--canary",
        "--canary-admin", f"http://{ADMIN_USER}:{ADMIN_PASS}@127.0.0.1:{_closed_port()}/",
        "-H", "x-promptpath-tokens: 5",
    ]  # fmt: skip


def _pushgateway(case: Case, peers: Peers) -> str:
    """The stand-in that refuses with an HTTP error, or (the other ``export failed:``
    shape) a port where nothing listens."""
    if case is ORIGIN:
        return peers.push_url
    return f"http://{PUSH_USER}:{PUSH_PASS}@127.0.0.1:{_closed_port()}"


@dataclass
class Outputs:
    json_run: CliResult
    tty_run: CliResult
    files: dict[str, str]
    collector: dict[str, str]

    def channels(self) -> dict[str, str]:
        return {
            "stdout (--json)": self.json_run.stdout,
            "stderr (--json run: the terminal report, warnings, export failures)": (
                self.json_run.stderr
            ),
            "stdout (terminal)": self.tty_run.stdout,
            "stderr (terminal run)": self.tty_run.stderr,
            **self.files,
            **self.collector,
        }


def _run(case: Case, tmp_path: Path, ref: RefServer) -> Outputs:
    files = {
        "--junit": tmp_path / "run.xml",
        "--har": tmp_path / "run.har",
        "--prom-textfile": tmp_path / "run.prom",
        "--html": tmp_path / "run.html",
        "--svg": tmp_path / "run.svg",
        "--markdown": tmp_path / "run.md",
    }
    env = {"OPENAI_API_KEY": ENV_KEY, "NO_COLOR": "1"}
    with _peers() as peers, contextlib.ExitStack() as stack:
        args = ["run", *_args(case, peers, stack, ref), "-v", "--timeout", "15"]
        exports = [x for flag, path in files.items() for x in (flag, str(path))]
        exports += ["--pushgateway", _pushgateway(case, peers), "--otlp-endpoint", peers.otlp_url]
        json_run = run_cli(*args, "--json", *exports, environ=env)
        received = peers.otlp.received[:]
        pushed = peers.push.requests[:]
        # The terminal on a terminal, without the exports.
        tty_run = run_cli(*args, environ=env, stdout_isatty=True)
    assert {r.path for r in received} == {"/v1/traces", "/v1/metrics"}, "no OTLP export arrived"
    for got in received:
        # The collector is where the OTLP userinfo is meant to go (as Basic): live.
        assert got.headers.get("Authorization") == _basic(OTLP_USER, OTLP_PASS)
    collector = {
        f"OTLP {got.path} (body and headers but its Authorization)": got.body.decode(
            "utf-8", "replace"
        )
        + str(got.message)
        + json.dumps({k: v for k, v in got.headers.items() if k.lower() != "authorization"})
        for got in received
    }
    if case is ORIGIN:
        assert pushed, "the push never reached the Pushgateway stand-in"
        assert pushed[0].header("authorization") == _basic(PUSH_USER, PUSH_PASS)
        collector["the Pushgateway's PUT (path and body)"] = "\n".join(
            f"{r.line}\n{r.body.decode('utf-8', 'replace')}" for r in pushed
        )
    written = {flag: path.read_text(encoding="utf-8") for flag, path in files.items()}
    return Outputs(json_run, tty_run, written, collector)


@pytest.mark.parametrize("case", [ORIGIN, CANARY], ids=lambda c: c.name)
def test_no_channel_holds_a_credential_in_any_form(
    case: Case, tmp_path: Path, refserver_tls: RefServer
) -> None:
    out = _run(case, tmp_path, refserver_tls)
    assert out.json_run.exit_code == case.code, out.json_run.stderr
    assert out.tty_run.exit_code == case.tty_code, out.tty_run.stdout + out.tty_run.stderr
    report: dict[str, Any] = json.loads(out.json_run.stdout)
    assert report["otlp"]["exported"] is True, report["otlp"]

    leaks = sorted(
        {
            f"{secret!r} in {channel}"
            for channel, text in out.channels().items()
            for secret in case.secrets
            if any(piece in text for piece in forbidden(secret))
        }
    )
    assert not leaks, "\n".join(leaks)

    # Proof each place was exercised and shows that something was taken out.
    terminal = " ".join(out.tty_run.stdout.split())  # the report wraps long lines
    for expected in case.shows:
        assert expected in terminal, f"{expected!r} not on the terminal"
    assert "export failed: --pushgateway http://[redacted]@127.0.0.1:" in out.json_run.stderr
    section = out.files["--html"].split("<h2>Reproduce</h2>", 1)[1]
    reproduce, notes = section.split("</pre>", 1)
    assert f"--otlp-endpoint &#x27;http://{MARK}@127.0.0.1:" in reproduce
    assert f"api_key={MARK}" in reproduce
    # A redacted credential header would send "[redacted]" if pasted back: the command
    # leaves it out and the page says so (issue 30, item 3).
    assert "Authentication" not in reproduce
    assert "Authentication" in notes.split("<h2>", 1)[0] and "left out" in notes
    # The Markdown summary shows the same command, the same way.
    block = out.files["--markdown"].split("### Reproduce\n\n```sh\n", 1)[1]
    line, md_notes = block.split("\n```\n", 1)
    assert f"--otlp-endpoint 'http://{MARK}@127.0.0.1:" in line and f"api_key={MARK}" in line
    assert "Authentication" not in line and "Authentication" in md_notes
    assert report["request"]["path"] == f"/v1/chat/completions?api_key={MARK}"
    assert "#" not in report["target"]["url"]
